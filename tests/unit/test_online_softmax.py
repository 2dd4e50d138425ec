"""online_softmax: softmax / log-softmax rows (persistent and looped) and strided dims."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import online_softmax as softmax


@pytest.mark.parametrize("fn, dim, shape", [("softmax", 1, (3, 37)), ("log_softmax", -1, (5, 129)),
                                            ("softmax", 1, (2, 5, 3, 7)), ("log_softmax", 0, (9, 4))])
def test_softmax_variants(fn, dim, shape):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return torch.{fn}(x * 2.0, dim={dim})\n",
                  f"[torch.randn{shape}]")
    cand = check(src, ["online_softmax", "kernel_fusion"])
    assert "online_softmax" in cand.applied


def test_long_rows_use_online_pass(monkeypatch):
    monkeypatch.setattr(softmax, "MAX_PERSISTENT", 64)
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n",
                  "[torch.randn(3, 301) * 5]")
    cand = check(src, ["online_softmax"])
    assert "m_new" in cand.source


def test_prologue_and_epilogue_reached_through_reshapes():
    """softmax(clamp(x).view(b, c, -1)).view(shape) * scale: one kernel, no intermediate in memory."""
    src = problem("class Model(nn.Module):\n"
                  "    def __init__(self):\n        super().__init__()\n"
                  "        self.scale = nn.Parameter(torch.randn(1, 3, 1, 1))\n"
                  "    def forward(self, x):\n"
                  "        b, c, h, w = x.shape\n"
                  "        y = torch.clamp(x + 0.5, 0.0, 1.0).view(b, c, -1)\n"
                  "        y = torch.softmax(y, dim=2)\n"
                  "        return y.view(b, c, h, w) * self.scale\n",
                  "[torch.randn(2, 3, 5, 7)]")
    cand = check(src, ["online_softmax", "kernel_fusion"])
    assert cand.source.count("_kernel[") == 1, cand.source
    assert "tl.minimum" in cand.source and ".view(" not in cand.source.split("class ModelNew")[1]


def test_a_permute_is_not_seen_through():
    """A transpose changes the logical order, so the chain before it stays a kernel of its own."""
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n"
                  "        return torch.softmax((x * 2.0).permute(0, 2, 1), dim=2)\n",
                  "[torch.randn(2, 5, 7)]")
    cand = check(src, ["online_softmax", "kernel_fusion"])
    assert cand.source.count("_kernel[") == 2, cand.source
