"""The row exchange form (templates/exchange.py): a long row split over adjacent programs that each hold
one chunk in registers and exchange chunk statistics, for softmax and the row norms.

Under the interpreter programs run one at a time, so every program but a row's last finds siblings that
never published and reads their chunks itself: these tests check that path against PyTorch, and the
generated kernel for what the GPU runs (publishing, bounded polling)."""

import pytest
import torch
from recipe_support import check, load, problem

from kskill.agents.recipes import build_candidate
from kskill.agents.recipes.templates import exchange


def _softmax(fn: str, shape: tuple[int, ...], scale: str = "x * 2.0") -> str:
    return problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return torch.{fn}({scale}, dim=-1)\n",
                   f"[torch.randn{shape} * 4]")


@pytest.mark.parametrize("fn, shape, params, lanes", [("softmax", (3, 20000), None, None),
                                                      ("softmax", (2, 32 * 4096 + 1), None, 2),
                                                      ("log_softmax", (3, 9000), {"pipeline": True, "lanes": 1}, 1),
                                                      ("softmax", (5, 20000), {"pipeline": True, "lanes": 2}, 2),
                                                      ("softmax", (4, 20000), {"pipeline": True}, 4)])
def test_softmax_rows_split_over_programs_match_pytorch(fn, shape, params, lanes):
    """Rows of a few chunks keep one row a program; rows of many (or where the `pipeline` parameter asks)
    are pipelined: LANES * SPLIT programs, each walking the rows of its lane. Under the interpreter a lane
    of several rows runs its siblings' chunks through the fallback, row after row."""
    cand = check(_softmax(fn, shape), ["online_softmax", "kernel_fusion"], params)
    assert "while (missing > 0) & (spins < SPIN)" in cand.source
    if lanes is None:
        assert "tl.atomic_xchg(ws_ptr + row * SPLIT + c" in cand.source
        assert f"SPLIT={-(-shape[-1] // 4096)}, SPLIT_P2=" in cand.source, "4096-element chunks for rows this long"
        return
    assert "tl.atomic_xchg(ws_ptr + row1 * SPLIT + c" in cand.source, "the next row published before the wait"
    assert "while row0 < ROWS:" in cand.source
    assert f"SPLIT={-(-shape[-1] // exchange.PIPE_CHUNK)}, SPLIT_P2=" in cand.source
    assert f".get(x.device, {lanes})" in cand.source, "the first launch's lanes"
    assert ("_resident(launched" in cand.source) == ("lanes" not in (params or {})), "reckoned unless fixed"


def test_a_chunk_of_minus_infinity_gives_no_nan():
    """A masked row (a chunk of -inf, as an attention mask leaves it): its chunk has max -inf and weight 0."""
    x = torch.randn(2, 12288)
    x[:, :4096] = float("-inf")
    want = torch.softmax(x, dim=-1)
    cand = build_candidate(problem("class Model(nn.Module):\n    def forward(self, x):\n"
                                   "        return torch.softmax(x, dim=-1)\n", "[torch.randn(2, 12288)]"),
                           ["online_softmax"])
    got = load(cand.source)["ModelNew"]()(x)
    assert "SPLIT=3," in cand.source
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("module, shape, rows", [("nn.InstanceNorm2d(3, affine=True)", (2, 3, 100, 130), 6),
                                                 ("nn.GroupNorm(2, 4)", (2, 4, 70, 90), 4),
                                                 ("nn.LayerNorm((6, 2000))", (3, 6, 2000), 3)])
@pytest.mark.parametrize("params", [None, {"pipeline": True, "lanes": 1}, {"pipeline": True, "lanes": 2}])
def test_norm_rows_split_over_programs_match_pytorch(module, shape, rows, params):
    """Rows of a few chunks keep one row a program; the `pipeline` parameter pipelines them, each lane's
    programs walking its rows (two lanes over 3 rows: one lane of two rows, one of one)."""
    ctor = (f"    def __init__(self):\n        super().__init__()\n        self.n = {module}\n"
            "        with torch.no_grad():\n"
            "            for p in self.n.parameters():\n                p.copy_(torch.randn_like(p))\n")
    src = problem(f"class Model(nn.Module):\n{ctor}    def forward(self, x):\n        return torch.relu(self.n(x))\n",
                  f"[torch.rand{shape} * 3 + 1]")
    cand = check(src, ["fused_normalization", "kernel_fusion"], params)
    assert "ws_ptr" in cand.source and "_stats[" not in cand.source, "one kernel, no statistics launch"
    assert ("while row0 < ROWS:" in cand.source) == (params is not None)


def test_split_bounds():
    assert exchange.row_exchange(4096) is None, "a row one chunk holds needs no exchange"
    assert exchange.row_exchange(20000) == (5, 4096, 2)
    assert exchange.row_exchange(393216) == (48, 8192, 4)
    assert exchange.row_exchange(exchange.MAX_SPLIT * 8192) == (exchange.MAX_SPLIT, 8192, 4)
    assert exchange.row_exchange(exchange.MAX_SPLIT * 8192 + 1) is None, "longer rows keep the two-read forms"


def test_pipeline_bounds():
    assert exchange.pipe_split(393216) == (192, exchange.PIPE_CHUNK, exchange.PIPE_WARPS, True)
    assert exchange.pipe_split(exchange.PIPE_CHUNK) is None, "a row one chunk holds"
    assert exchange.pipe_split(exchange.MAX_PIPE_SPLIT * exchange.PIPE_CHUNK + 1) is None
    assert exchange.chosen_split(4, 393216, {}, ()).pipelined, "rows of many chunks"
    assert exchange.chosen_split(4, 393216, {"pipeline": False}, ()) == (48, 8192, 4, False), "the one-row form"
    assert exchange.chosen_split(4, 20000, {}, ()) == (5, 4096, 2, False), "rows of a few chunks"
    assert exchange.chosen_split(4, 20000, {"pipeline": True}, ()) == (10, 2048, 1, True), "the parameter asks"
    assert exchange.chosen_split(4, 20000, {"row_exchange": False}, ()) is None, "the two_reads variant"
    assert exchange.chosen_split(4, 20000, {"BLOCK_R": 1024}, ("BLOCK_R",)) is None, "the two-read form tuned"


def test_rows_too_long_keep_the_two_read_forms():
    longest = max(exchange.MAX_SPLIT * 8192, exchange.MAX_PIPE_SPLIT * exchange.PIPE_CHUNK)
    cand = build_candidate(_softmax("softmax", (2, longest + 1), "x"), ["online_softmax"])
    assert "ws_ptr" not in cand.source and "m_new" in cand.source


@pytest.mark.parametrize("technique, body, shape", [
    ("online_softmax", "torch.softmax(x, dim=-1)", (2, 20000)),
    ("fused_normalization", "self.n(x)", (2, 3, 100, 130))])
def test_the_two_reads_variant_keeps_the_row_in_one_program(technique, body, shape):
    ctor = "    def __init__(self):\n        super().__init__()\n        self.n = nn.InstanceNorm2d(3)\n"
    src = problem(f"class Model(nn.Module):\n{ctor}    def forward(self, x):\n        return {body}\n",
                  f"[torch.rand{shape}]")
    assert "ws_ptr" in build_candidate(src, [technique], {"row_exchange": True}).source
    cand = check(src, [technique], {"row_exchange": False})
    assert "ws_ptr" not in cand.source
