"""fused_normalization: layer/group/instance norm and batch norm in training mode."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import fused_normalization as norm


def _module(ctor: str, post: str = "") -> str:
    return (f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = {ctor}\n\n"
            f"    def forward(self, x):\n        return self.n(x){post}\n")


@pytest.mark.parametrize("ctor, shape", [("nn.LayerNorm(37)", (3, 37)), ("nn.LayerNorm((5, 7))", (3, 5, 7)),
                                         ("nn.GroupNorm(3, 6)", (2, 6, 5, 3)), ("nn.InstanceNorm2d(3)", (2, 3, 5, 7)),
                                         ("nn.InstanceNorm2d(3, affine=True)", (2, 3, 5, 7))])
def test_row_norms(ctor, shape):
    cand = check(problem(_module(ctor, " * 2.0"), f"[torch.randn{shape} * 3 + 1]"), ["fused_normalization", "kernel_fusion"])
    assert cand.applied[0] == "fused_normalization"


def test_long_rows_use_chan_merge(monkeypatch):
    monkeypatch.setattr(norm, "MAX_PERSISTENT", 32)
    check(problem(_module("nn.LayerNorm(301)"), "[torch.randn(3, 301) + 4]"), ["fused_normalization"])


@pytest.mark.parametrize("ctor, shape", [("nn.BatchNorm2d(5)", (3, 5, 7, 9)), ("nn.BatchNorm1d(6)", (9, 6)),
                                         ("nn.BatchNorm2d(4, momentum=0.3)", (2, 4, 3, 3))])
def test_batch_norm_training_updates_running_stats(ctor, shape):
    cand = check(problem(_module(ctor, ".relu()"), f"[torch.randn{shape} * 2 + 1]"), ["fused_normalization", "kernel_fusion"],
                 compare_buffers=True)
    assert "running_mean" in cand.source


def test_batch_norm_split_statistics():
    check(problem(_module("nn.BatchNorm2d(3)"), "[torch.randn(5, 3, 9, 9)]"), ["fused_normalization"],
          {"launch": {"_batch_norm_0": {"SPLIT": 3, "BLOCK": 16}}}, compare_buffers=True)


def test_cumulative_momentum_declines():
    cand = check(problem(_module("nn.BatchNorm2d(3, momentum=None)"), "[torch.randn(2, 3, 4, 4)]"), ["fused_normalization"])
    assert cand.applied == []
