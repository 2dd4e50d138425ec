"""The row exchange form (templates/exchange.py): a long row split over adjacent programs that each hold
one chunk in registers and exchange chunk statistics, for softmax and the row norms.

Under the interpreter programs run one at a time, so every program but a row's last finds siblings that
have not published yet, gives up and sets the flag; the repair launch then finds every slot published
and rewrites the output. These tests check that against PyTorch, that the repair is what makes it right,
and the generated kernel for what the GPU runs (publishing, bounded polling)."""

import pytest
import torch
from recipe_support import check, load, problem

from kskill.agents.recipes import build_candidate
from kskill.agents.recipes.templates import exchange


def _softmax(fn: str, shape: tuple[int, ...], scale: str = "x * 2.0") -> str:
    return problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return torch.{fn}({scale}, dim=-1)\n",
                   f"[torch.randn{shape} * 4]")


@pytest.mark.parametrize("fn, shape, group, params", [("softmax", (3, 20000), 1, None),
                                                      ("softmax", (4, 20000), 1, None),
                                                      ("softmax", (2, 32 * 4096 + 1), 2, None),
                                                      ("log_softmax", (2, 9000), 2, {"group": 2}),
                                                      ("softmax", (4, 20000), 4, {"group": 4}),
                                                      ("softmax", (4, 20000), 1, {"group": 1})])
def test_softmax_rows_split_over_programs_match_pytorch(fn, shape, group, params):
    """Softmax rows of many chunks that divide into groups share programs (a chunk of each row a program, all
    published before any wait; softmax pipelines only where asked): two by default, as many as the `group`
    parameter asks, in chunks that keep a program's elements; rows of few chunks keep one row a program
    unless the parameter asks."""
    cand = check(_softmax(fn, shape), ["online_softmax", "kernel_fusion"], params)
    slots = [f"row{k} * SPLIT + c" for k in range(group)] if group > 1 else ["row * SPLIT + c"]
    assert all(f"tl.atomic_xchg(ws_ptr + 1 + {slot}" in cand.source for slot in slots)
    assert "while (missing > 0) & (spins < SPIN)" in cand.source
    chunk = {1: 4096, 2: 4096, 4: 2048}[group]
    split = -(-shape[-1] // chunk)
    assert f"SPLIT={split}, SPLIT_P2=" in cand.source, f"{chunk}-element chunks for rows this long"
    assert f"[({shape[0] // group * split},)]" in cand.source, "one program per chunk of a group"


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
@pytest.mark.parametrize("group", [None, 2, 4])
def test_norm_rows_split_over_programs_match_pytorch(module, shape, rows, group):
    """Rows of a few chunks keep one row a program; the `group` parameter groups them where they divide."""
    ctor = (f"    def __init__(self):\n        super().__init__()\n        self.n = {module}\n"
            "        with torch.no_grad():\n"
            "            for p in self.n.parameters():\n                p.copy_(torch.randn_like(p))\n")
    src = problem(f"class Model(nn.Module):\n{ctor}    def forward(self, x):\n        return torch.relu(self.n(x))\n",
                  f"[torch.rand{shape} * 3 + 1]")
    cand = check(src, ["fused_normalization", "kernel_fusion"], None if group is None else {"group": group})
    assert "ws_ptr" in cand.source and "_stats[" not in cand.source, "one kernel, no statistics launch"
    grouped = group if group and rows % group == 0 else 1
    assert ("row1 = grp" in cand.source) == (grouped > 1)
    assert ("row3 = grp" in cand.source) == (grouped == 4)


@pytest.mark.parametrize("norm, index", [("nn.GroupNorm(2, 4)", "(row0 * 2 + cols // 10000) % 4"),
                                          ("nn.InstanceNorm2d(4, affine=True)", "(row + cols * 0) % 4")])
def test_per_channel_operands_are_indexed_from_the_row(norm, index):
    """A convolution's bias folded into the norm's loads and a per-channel scale after it are indexed from the
    row's number and the lane's column, not from an offset tensor: a group norm's row holds two channels
    here, an instance norm's row one channel (one value a row)."""
    model = ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             f"        self.conv = nn.Conv2d(3, 4, 3)\n        self.n = {norm}\n"
             "        self.scale = nn.Parameter(torch.randn(4, 1, 1))\n"
             "    def forward(self, x):\n        return self.n(self.conv(x)) * self.scale\n")
    cand = check(problem(model, "[torch.randn(2, 3, 102, 102)]"), ["fused_normalization", "kernel_fusion"],
                 {"group": 2} if "Group" in norm else None)
    assert index in cand.source and "(offs" not in cand.source


def _instance_norm(shape: tuple[int, ...]) -> str:
    return problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   f"        self.n = nn.InstanceNorm2d({shape[1]})\n"
                   "    def forward(self, x):\n        return self.n(x)\n", f"[torch.randn{shape}]")


def test_the_repair_launch_is_what_makes_a_given_up_wait_right():
    """The interpreter's waits give up (siblings run later), so the first launch alone leaves rows wrong and
    the flag set; the generated launcher's second launch (REPAIR) rewrites them from published slots."""
    cand = build_candidate(_instance_norm((2, 2, 100, 130)), ["fused_normalization"])
    launches = [ln for ln in cand.source.splitlines() if "_kernel[(" in ln]
    assert len(launches) == 2 and "REPAIR=False" in launches[0] and "REPAIR=True" in launches[1]
    assert "x_ptr + row * R + cols" in cand.source, "addresses written scalar base first"
    x = torch.randn(2, 2, 100, 130)
    want = torch.nn.functional.instance_norm(x)
    first_only = load(cand.source.replace(launches[1] + "\n", ""))
    assert not torch.allclose(first_only["ModelNew"]()(x), want, atol=1e-4), "the first launch alone"
    torch.testing.assert_close(load(cand.source)["ModelNew"]()(x), want, rtol=1e-4, atol=1e-4)


def test_a_nan_statistic_is_published_not_taken_for_an_empty_slot():
    """A NaN whose bits are all ones makes a chunk's mean and M2 that NaN, a pair that would pack to the
    empty slot's -1; it is published as the canonical NaN, so the row comes out NaN, as PyTorch's does."""
    x = torch.randn(2, 2, 100, 130)
    x[0, 1, 3, 4] = torch.tensor(-1, dtype=torch.int32).view(torch.float32)
    got = load(build_candidate(_instance_norm((2, 2, 100, 130)), ["fused_normalization"]).source)["ModelNew"]()(x)
    want = torch.nn.functional.instance_norm(x)
    assert torch.isnan(got[0, 1]).all() and torch.isnan(want[0, 1]).all()
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("source", [_softmax("softmax", (3, 9000)), _softmax("log_softmax", (2, 12000)),
                                    _instance_norm((2, 3, 100, 130))])
def test_the_pipelined_form_matches_pytorch(source):
    """Programs walking the rows of their lane: under the interpreter every row is a lane (nothing reckoned on
    a CPU), each program loads and publishes the lane's next row, clamped to the last, before it writes the
    current one, and the repair launch makes every given-up wait right."""
    technique = "online_softmax" if "softmax" in source else "fused_normalization"
    cand = check(source, [technique], {"pipeline": True})
    assert "while row0 < ROWS:" in cand.source and "row1 = tl.minimum(row0 + LANES, ROWS - 1)" in cand.source
    assert "x0 = x1" in cand.source and "offs0 = offs1" not in cand.source, "only what the write reads is carried"
    assert "[(lanes * " in cand.source and "REPAIR=True" in cand.source


def test_the_pipelined_form_reads_a_fused_prologue_for_each_row():
    """A convolution's bias and a tanh folded into the pipelined group norm's loads, and a per-channel scale and a
    ReLU after it: the prologue is computed for the next row's chunk (suffix 1) as for the first."""
    model = ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.conv = nn.Conv2d(3, 4, 3)\n        self.n = nn.GroupNorm(2, 4)\n"
             "        self.scale = nn.Parameter(torch.randn(4, 1, 1))\n"
             "    def forward(self, x):\n        return torch.relu(self.n(torch.tanh(self.conv(x))) * self.scale)\n")
    cand = check(problem(model, "[torch.randn(2, 3, 102, 102)]"), ["fused_normalization", "kernel_fusion"],
                 {"pipeline": True, "pipe_chunk": 4096})
    assert cand.params["_norm_0"]["pipeline"] is True
    assert "p_in11 = tl.load(conv_bias_ptr + ((row1 * 2 + cols // 10000) % 4), mask=mask," in cand.source


def test_the_pipeline_lanes_are_what_stays_resident():
    """The launcher's reckoning: 168 registers a thread over one warp leave 12 programs a multiprocessor (registers
    go out 256 a warp), so an H200's 132 hold 12 lanes of 128 programs; shared memory or fewer rows bound it too."""
    cand = build_candidate(_instance_norm((2, 3, 100, 130)), ["fused_normalization"], {"pipeline": True})
    reckon = load(cand.source)["_norm_0_resident_lanes"]
    kernel = type("Compiled", (), {"n_regs": 168, "metadata": type("Meta", (), {"shared": 0})()})()
    h200 = {"max_num_regs": 65536, "warpSize": 32, "max_shared_mem": 232448, "multiprocessor_count": 132}
    assert reckon(kernel, h200, 1, 128, 7168) == 12
    kernel.n_regs = 161  # rounded up to 168: the same
    assert reckon(kernel, h200, 1, 128, 7168) == 12
    assert reckon(kernel, h200, 1, 128, 5) == 5, "no more lanes than rows"
    kernel.metadata.shared = 46 * 1024  # four programs' shared memory a multiprocessor
    assert reckon(kernel, h200, 1, 128, 7168) == 4


def test_split_bounds():
    assert exchange.row_exchange(4096) is None, "a row one chunk holds needs no exchange"
    assert exchange.row_exchange(20000) == (5, 4096, 2)
    assert exchange.row_exchange(393216) == (48, 8192, 4)
    assert exchange.row_exchange(exchange.MAX_SPLIT * 8192) == (exchange.MAX_SPLIT, 8192, 4)
    assert exchange.row_exchange(exchange.MAX_SPLIT * 8192 + 1) == (exchange.MAX_SPLIT + 1, 8192, 4)
    assert exchange.row_exchange(exchange.MAX_LONG_SPLIT * 8192) == (exchange.MAX_LONG_SPLIT, 8192, 4)
    assert exchange.row_exchange(exchange.MAX_LONG_SPLIT * 8192 + 1) is None, "longer rows keep the two-read forms"


def test_group_bounds():
    pair = exchange.Grouped(2, 4096, 4)
    assert exchange.group_split(4096, 393216, pair) == (96, 4096, 4, 2, False)
    assert exchange.group_split(4095, 393216, pair) is None, "rows that do not pair up"
    assert exchange.group_split(2, 4096, pair) is None, "a row one chunk holds"
    assert exchange.group_split(2, exchange.MAX_GROUP_SPLIT * 4096 + 1, pair) is None
    assert exchange.chosen_split(4, 393216, {}, (), pair, True) == (192, 2048, 1, 1, True), "many chunks: pipelined"
    assert exchange.chosen_split(4, 2 << 20, {}, (), pair, True) == (256, 8192, 4, 1, True), "in larger chunks"
    assert exchange.chosen_split(4, 532512, {}, (), pair, True) == (131, 4096, 4, 2, False), "too few: grouped"
    assert exchange.chosen_split(4, 393216, {}, (), pair) == (96, 4096, 4, 2, False), "not the technique's default"
    assert exchange.chosen_split(4, 393216, {"pipeline": False}, (), pair) == (96, 4096, 4, 2, False), "grouped"
    assert exchange.chosen_split(4, 393216, {"group": 1}, (), pair) == (48, 8192, 4, 1, False), "the one-row form"
    assert exchange.chosen_split(4, 20000, {}, (), pair) == (5, 4096, 2, 1, False), "rows of a few chunks"
    assert exchange.chosen_split(4, 20000, {"group": 2}, (), pair) == (5, 4096, 4, 2, False), "the parameter asks"
    assert exchange.chosen_split(4, 20000, {"group": 4}, (), pair) == (10, 2048, 4, 4, False), "the elements kept"
    assert exchange.chosen_split(6, 20000, {"group": 4}, (), pair).group == 1, "6 rows make no groups of 4"
    assert exchange.chosen_split(4, 20000, {"row_exchange": False}, (), pair) is None, "the two_reads variant"
    assert exchange.chosen_split(4, 20000, {"BLOCK_R": 1024}, ("BLOCK_R",), pair) is None, "the two-read form tuned"
    assert exchange.chosen_split(4, 20000, {"pipeline": True}, (), pair) == (10, 2048, 1, 1, True), "pipelined"
    assert exchange.chosen_split(4, 20000, {"pipeline": True, "pipe_chunk": 4096}, (), pair) == (5, 4096, 2, 1, True)
    assert exchange.chosen_split(4, 2048, {"pipeline": True}, (), pair) is None, "a row one chunk holds"


def test_rows_too_long_keep_the_two_read_forms():
    longest = max(exchange.MAX_LONG_SPLIT * 8192, exchange.MAX_GROUP_SPLIT * 4096)
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
