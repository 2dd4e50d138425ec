"""Linear, Swish, bias add and GroupNorm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, groups):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)
        self.norm = nn.GroupNorm(groups, out_features)

    def forward(self, x):
        y = self.fc(x)
        y = torch.sigmoid(y) * y
        y = y + self.bias
        return self.norm(y)


batch_size = 1024
in_features = 4096
out_features = 4096
groups = 64


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, groups]
