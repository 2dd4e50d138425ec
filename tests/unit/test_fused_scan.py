"""fused_scan: cumsum / cumprod along rows and strided dims, across several tiles; reverse and
exclusive scans written with flips, a window and a cat, folded into the one scan kernel."""

import pytest
from recipe_support import check, problem


def _forward(source: str) -> str:
    return source.split("class ModelNew")[1]


def _forward_problem(body: str, shape: tuple[int, ...]) -> str:
    model = f"class Model(nn.Module):\n    def forward(self, x):\n        {body}\n"
    return problem(model, f"[torch.rand{shape} * 0.2 + 0.9]")


def _assert_one_kernel(cand) -> None:
    """The whole scan is one launch: no cat, flip, window copy or identity block left in PyTorch."""
    forward = _forward(cand.source)
    assert cand.source.count("_kernel[") == 1
    assert not any(op in forward for op in ("torch.cat", ".flip(", ".narrow(", "_like(", "["))


@pytest.mark.parametrize("fn, dim, shape, block", [("cumsum", 1, (3, 301), 64), ("cumprod", 1, (3, 37), 16),
                                                   ("cumsum", 0, (37, 5), 8), ("cumsum", 1, (2, 9, 3), 4)])
def test_scans(fn, dim, shape, block):
    cand = check(_forward_problem(f"return torch.{fn}(x, dim={dim})", shape), ["fused_scan"],
                 {"launch": {"_scan_0": {"BLOCK_R": block}}})
    assert cand.applied == ["fused_scan"]


EXCLUSIVE = ("s = torch.{fn}(x.narrow(dim={dim}, start=0, length=x.size({dim}) - 1), dim={dim})\n"
             "        return torch.cat((torch.{fill}(x.select({dim}, 0).unsqueeze({dim})), s), dim={dim})")


@pytest.mark.parametrize("fn, fill, dim, shape, block", [
    ("cumsum", "zeros_like", 1, (3, 301), 64),  # along the last dim, several tiles
    ("cumsum", "zeros_like", 1, (2, 37, 3), 8),  # along a middle dim (columns scanned as a tile)
    ("cumsum", "zeros_like", 0, (19, 4), 4),
    ("cumprod", "ones_like", 1, (3, 37), 16)])
def test_exclusive_scan_is_one_kernel(fn, fill, dim, shape, block):
    cand = check(_forward_problem(EXCLUSIVE.format(fn=fn, fill=fill, dim=dim), shape), ["fused_scan"],
                 {"launch": {"_scan_0": {"BLOCK_R": block}}})
    assert cand.applied == ["fused_scan"]
    _assert_one_kernel(cand)
    assert any("exclusive scan" in n for n in cand.notes)


@pytest.mark.parametrize("body", [
    # slices for the window and the identity block, a negative dim
    "s = torch.cumsum(x[:, :, :-1], dim=-1)\n        return torch.cat([torch.zeros_like(x[:, :, :1]), s], dim=-1)",
    "s = torch.cumsum(x[..., :-1, :], dim=1)\n        return torch.cat((torch.zeros(2, 1, 5, device=x.device), s), 1)",
    # reverse scans: flip, scan, flip; and the mirrored exclusive form
    "return torch.cumsum(x.flip(1), dim=1).flip(1)",
    "return torch.cumprod(x.flip(dims=[-1]), -1).flip([-1])",
    "s = torch.cumsum(x[:, 1:].flip(1), 1).flip(1)\n        return torch.cat((s, torch.zeros_like(x[:, :1])), 1)",
])
def test_written_forms_fold(body):
    cand = check(_forward_problem(body, (2, 11, 5)), ["fused_scan"], {"launch": {"_scan_0": {"BLOCK_R": 4}}})
    _assert_one_kernel(cand)


def test_exclusive_scan_takes_its_prologue():
    """With kernel_fusion, the chain computing the scanned tensor is read one step back too."""
    src = problem("class Model(nn.Module):\n    def forward(self, x, y):\n        z = torch.relu(x) * y\n"
                  "        s = torch.cumsum(z.narrow(1, 0, z.size(1) - 1), dim=1)\n"
                  "        return torch.cat((torch.zeros_like(z[:, :1]), s), dim=1)\n",
                  "[torch.randn(3, 45), torch.randn(1, 45)]")
    cand = check(src, ["fused_scan", "kernel_fusion"], {"launch": {"_scan_0": {"BLOCK_R": 16}}})
    _assert_one_kernel(cand)


@pytest.mark.parametrize("body", [
    # a window that does not end one short of the scan's end: not an exclusive scan
    "s = torch.cumsum(x.narrow(1, 1, x.size(1) - 1), dim=1)\n        return torch.cat((torch.zeros_like(x[:, :1]), s), 1)",
    # a block that is not the scan's identity
    "s = torch.cumsum(x[:, :-1], dim=1)\n        return torch.cat((torch.ones_like(x[:, :1]), s), 1)",
    "s = torch.cumsum(x[:, :-1], dim=1)\n        return torch.cat((x[:, :1], s), 1)",
    # the identity after a forward scan
    "s = torch.cumsum(x[:, :-1], dim=1)\n        return torch.cat((s, torch.zeros_like(x[:, :1])), 1)",
    # the scan's value is needed elsewhere too
    "s = torch.cumsum(x[:, :-1], dim=1)\n        return torch.cat((torch.zeros_like(x[:, :1]), s), 1), s",
])
def test_other_cats_stay_as_written(body):
    cand = check(_forward_problem(body, (3, 21)), ["fused_scan"], {"launch": {"_scan_0": {"BLOCK_R": 8}}})
    assert cand.applied == ["fused_scan"] and "torch.cat" in _forward(cand.source)
    assert not any(n.startswith("folded") for n in cand.notes)
