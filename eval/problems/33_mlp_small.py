"""A small MLP: many small launches."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dims):
        super().__init__()
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.net(x)


batch_size = 64
dims = [256, 512, 512, 512, 256, 10]


def get_inputs():
    return [torch.randn(batch_size, dims[0])]


def get_init_inputs():
    return [dims]
