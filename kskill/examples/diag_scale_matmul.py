"""diag(d) @ A: a dense matrix product that is really a row scaling (O(n^2) instead of O(n^3)).

Sizes are small so that a CPU run reviews each candidate in seconds; KSKILL_EXAMPLE_SCALE=16
(or more) gives GPU-sized inputs.
"""

import os

import torch
import torch.nn as nn

SCALE = int(os.environ.get("KSKILL_EXAMPLE_SCALE", "1"))
n = 256 * SCALE
m = 256 * SCALE


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, d, a):
        return torch.diag(d) @ a


def get_inputs():
    return [torch.randn(n), torch.randn(n, m)]


def get_init_inputs():
    return []
