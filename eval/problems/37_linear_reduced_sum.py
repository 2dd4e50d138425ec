"""A linear layer whose output features are only summed, after a scale and an offset: a GEMM that a
matrix-vector product over the weight's summed rows replaces."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.offset = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        x = self.linear(x) * 0.5 - self.offset
        return torch.sum(x, dim=1, keepdim=True)


batch_size = 1024
in_features = 4096
out_features = 4096


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
