"""Argmax over the middle dimension of a 3-d tensor (KernelBench's argmax over a dimension)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.argmax(x, dim=1)


batch_size = 64
dim1 = 1024
dim2 = 2047


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
