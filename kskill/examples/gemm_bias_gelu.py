"""Linear layer (GEMM + bias), GELU and a scale: the epilogue can ride on the GEMM's output.

Sizes are small so that a CPU run (Triton interpreter) reviews each candidate in seconds;
KSKILL_EXAMPLE_SCALE=8 (or more) gives GPU-sized inputs.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = int(os.environ.get("KSKILL_EXAMPLE_SCALE", "1"))
batch_size = 32 * SCALE
in_features = 64 * SCALE
out_features = 64 * SCALE


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, 0.5]
