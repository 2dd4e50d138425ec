"""Conv2d, ReLU and a per-channel bias add."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.02)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


batch_size = 64
cin, cout, k = 64, 128, 3
height = width = 128


def get_inputs():
    return [torch.randn(batch_size, cin, height, width)]


def get_init_inputs():
    return [cin, cout, k]
