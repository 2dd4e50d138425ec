"""fused_scan: cumsum / cumprod along rows and strided dims, across several tiles."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("fn, dim, shape, block", [("cumsum", 1, (3, 301), 64), ("cumprod", 1, (3, 37), 16),
                                                   ("cumsum", 0, (37, 5), 8), ("cumsum", 1, (2, 9, 3), 4)])
def test_scans(fn, dim, shape, block):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return torch.{fn}(x, dim={dim})\n",
                  f"[torch.rand{shape} * 0.2 + 0.9]")
    cand = check(src, ["fused_scan"], {"launch": {"_scan_0": {"BLOCK_R": block}}})
    assert cand.applied == ["fused_scan"]
