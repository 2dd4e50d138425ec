"""Conv2d, BatchNorm2d in training mode (batch statistics) and ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 64
cin, cout = 32, 64
height = width = 128


def get_inputs():
    return [torch.randn(batch_size, cin, height, width)]


def get_init_inputs():
    return [cin, cout]
