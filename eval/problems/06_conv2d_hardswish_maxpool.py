"""Conv2d, Hardswish and 2x2 max pooling."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(F.hardswish(self.conv(x)))


batch_size = 64
cin, cout = 32, 64
height = width = 128


def get_inputs():
    return [torch.randn(batch_size, cin, height, width)]


def get_init_inputs():
    return [cin, cout]
