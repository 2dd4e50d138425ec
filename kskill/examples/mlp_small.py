"""A small MLP at a small batch: a dozen short kernels whose launches cost more than their work.

The layer sizes stay small at every scale (that is the point of the example);
KSKILL_EXAMPLE_SCALE only grows the batch.
"""

import os

import torch
import torch.nn as nn

SCALE = int(os.environ.get("KSKILL_EXAMPLE_SCALE", "1"))
batch = 8 * SCALE
dims = [256, 512, 512, 256, 10]


class Model(nn.Module):
    def __init__(self, dims):
        super().__init__()
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(batch, dims[0])]


def get_init_inputs():
    return [dims]
