"""Softmax over the last dimension: one read and one write per row are enough.

Sizes are small so that a CPU run (Triton interpreter) reviews each candidate in seconds;
KSKILL_EXAMPLE_SCALE=32 (or more) gives GPU-sized inputs.
"""

import os

import torch
import torch.nn as nn

SCALE = int(os.environ.get("KSKILL_EXAMPLE_SCALE", "1"))
rows = 64 * SCALE
cols = 128 * SCALE


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
