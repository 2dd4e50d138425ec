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
