"""fused_normalization: layer, group, instance and batch norm as Triton kernels, exact PyTorch semantics.

Row norms (layer, group, instance) over rows of a (P, R) view: y = (x - mean) / sqrt(var + eps) *
w[c] + b[c], biased variance as PyTorch computes it. A row that fits in registers is read once
(the mean, then the centred variance); a longer row of up to 256 chunks is split over programs that
exchange their chunks' mean and M2 (templates/exchange.py) and is read once too; otherwise, or as the
two_reads variant chooses, a row merges per-tile statistics with Chan's formula in one read, then
normalises in a second read. Few long rows (a layer norm over C*H*W of a small
batch) are split across programs: partial statistics first, then each program merges its row's.
The affine channel of an element depends on the norm: the column (layer norm), the group's channel
(group norm) or the row's channel (instance).

Batch norm, training mode included (the KernelBench default, since problems are not switched to
eval mode), with nn.BatchNorm's running-statistics update: statistics, finalize and one normalising
sweep with the epilogue (e.g. ReLU) fused, in NCHW or reading channels-last memory as it lies; a
convolution whose only use is the norm is taken over, its bias folded into the statistics
(templates/batch_norm.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.gemm_epilogue_fusion import GEMM_OPS
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import first_operand, is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.batch_norm import (
    CHAN_MERGE, PARTS_MERGE, TILE_STATS, batch_norm_unit, load_parts)
from kskill.agents.recipes.templates.common import TARGET_SMS as SMS
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id, split_chunk
from kskill.agents.recipes.templates.exchange import (
    Grouped, Split, chosen_split, exchange_unit, gather, publish)
from kskill.agents.recipes.templates.fused_io import FusedIO, adopted_channels_last
from kskill.agents.recipes.templates.unit import KernelUnit

def norm_region(node: Node, graph: Graph) -> Region | None:
    if not is_float(node) or node.shape is None or node.module is None:
        return None
    shape, at = node.shape, node.attrs
    x = first_operand(node)
    w = Attr(f"{node.module}.weight") if at.get("has_weight") else None
    b = Attr(f"{node.module}.bias") if at.get("has_bias") else None
    extra: dict[str, Any] = {"prologue_operand": x, "eps": float(at.get("eps", 1e-5)), "weight": w, "bias": b}
    if node.op == "layer_norm":
        k = len(at["normalized_shape"])
        extra.update(view=(math.prod(shape[:-k]), math.prod(shape[-k:]), 1), affine_index="r")
        return Region("norm", "fused_normalization", node, extra=extra)
    if node.op == "group_norm" and len(shape) >= 2:
        n, c, inner = shape[0], shape[1], math.prod(shape[2:])
        g = at["num_groups"]
        extra.update(view=(n * g, (c // g) * inner, 1), affine_index=f"channel:{c // g}:{inner}:{g}")
        return Region("norm", "fused_normalization", node, extra=extra)
    if node.op == "instance_norm" and len(shape) >= 3:
        if at.get("track_running_stats"):
            return None  # running-statistics update of instance norm: left to PyTorch
        n, c, inner = shape[0], shape[1], math.prod(shape[2:])
        extra.update(view=(n * c, inner, 1), affine_index=f"row_channel:{c}")
        return Region("norm", "fused_normalization", node, extra=extra)
    if node.op == "batch_norm" and len(shape) >= 2:
        training = at.get("training", True) or not at.get("track_running_stats", True)
        if training and at.get("track_running_stats", True) and at.get("momentum") is None:
            return None  # cumulative averaging needs num_batches_tracked on the host: left to PyTorch
        extra.update(training=training, momentum=at.get("momentum"), module=node.module,
                     track=bool(at.get("track_running_stats", True)))
        conv = adoptable_conv(x, graph)
        if conv is not None:
            extra.update(conv=conv, covers=[conv.name])
        return Region("batch_norm", "fused_normalization", node, extra=extra)
    return None


def adoptable_conv(x: Any, graph: Graph) -> Node | None:
    """The convolution module whose only use is this norm: the norm's kernels take it over (cuDNN
    without its bias, which the batch statistics absorb). Grouped and depthwise convolutions are left
    to depthwise_convolution's stencil kernel."""
    if not isinstance(x, Ref):
        return None
    conv = graph.by_name[x.name]
    if (conv.op not in GEMM_OPS or not conv.op.startswith("conv") or conv.module is None or not is_float(conv)
            or conv.attrs.get("padding_mode", "zeros") != "zeros" or not isinstance(conv.args[0], Ref)
            or conv.attrs.get("groups", 1) != 1):
        return None
    if len(graph.users(conv.name)) != 1 or graph.is_output(conv.name):
        return None
    return conv


# --- row norms: layer, group, instance

MAX_PERSISTENT = 8192
SPLIT_BLOCK = 4096  # a split row's tile, over 16 warps
SPLIT_MIN = 16384  # the fewest elements of a row worth a program of its own
SPLIT_PER_SM = 16  # programs a multiprocessor is given when rows are split
# Long rows split over programs that exchange statistics: two rows a program in chunks of 8192 over 4 warps.
# On the H200 (eval/runs/push-h200-s39/NOTES.md) an instance norm over 7168 x 262144 ran in 3.92-3.95 ms,
# against 4.17-4.18 in chunks of 2048 over one warp (the choice while the kernel carried its fallback, at
# 239 registers a thread), 4.21 with one row a program and 3.97-4.61 with other groups; group norms of
# 27 and 16 chunks a row, fused with conv and pooling work, 2.27 against 2.33 and 1.15 against 1.26 ms.
GROUPED = Grouped(2, 8192, 4)
# A group norm walking a channels-last product (row_walk) takes one row a program: on the H200 level2/19 ran in
# 8.19 ms so, against 12.04 at two rows and 9.44 at four; level2/83 in 1.83 against 2.31 and 2.04
# (eval/runs/push-h200-s44/NOTES.md, call 1).
GROUPED_NHWC = Grouped(1, 8192, 4)


def row_params(p: int, r: int) -> dict[str, Any]:
    """Tile and warps for P rows of R. Rows longer than a tile, too few to give each multiprocessor 4
    programs, are split as batch norm's channels are (statistics, then a normalising sweep), into
    SPLIT_PER_SM programs a multiprocessor: on the H200, layer norm over 16 rows of 4M ran in 0.244 ms
    at 132 parts of 4096-element tiles against 0.291 ms at 33 of 2048 (eval/runs/push-h200-s37/NOTES.md)."""
    block = min(next_pow2(r), MAX_PERSISTENT)
    if r > block and min(-(-4 * SMS // p), r // SPLIT_MIN) > 1:
        split = min(-(-SPLIT_PER_SM * SMS // p), r // SPLIT_MIN, 256)
        return {"BLOCK_R": SPLIT_BLOCK, "num_warps": 16, "SPLIT": split}
    return {"BLOCK_R": block, "num_warps": 4 if block <= 1024 else (8 if block <= 4096 else 16), "SPLIT": 1}


# A group norm over an adopted convolution product whose channels-last runs (the group's channels at one
# position) are shorter than this reads NCHW: each program would fetch sectors of which it uses a fraction.
# Runs of two fp32 channels still paid on the H200: level2/83 (a 3-d convolution, which cuDNN runs far faster
# channels-last) in 1.83 ms against 2.27 NCHW (eval/runs/push-h200-s44/NOTES.md, call 1).
MIN_RUN_BYTES = 8


def channels_last_norm(region: Region, graph: Graph) -> tuple[int, ...] | None:
    """The memory order to read an adopted convolution product in (fused_io.adopted_channels_last) for a group
    norm: cuDNN then writes the product channels-last and converts neither its input nor its output (on the
    H200 those conversions took 2.4 of level2/19's 7.46 ms, eval/runs/push-h200-s42/NOTES.md). The norm walks
    each row position by position (row_walk). None for other norms (an instance norm's run is one channel) and
    for groups of fewer than MIN_RUN_BYTES of channels."""
    perm = adopted_channels_last(region, graph) if region.kind == "norm" else None
    kind, *rest = region.extra.get("affine_index", "").split(":")
    if perm is None or kind != "channel":
        return None
    itemsize = (region.extra["adopted"].dtype or torch.float32).itemsize
    return perm if int(rest[0]) * itemsize >= MIN_RUN_BYTES else None


def row_walk(region: Region, nhwc: bool) -> tuple[list[str], list[str], str]:
    """Where element `cols` of row `row` lies: (lines giving the offset the input is read at, lines giving `offs`,
    where the result is stored, the read offset's name). An NCHW row is contiguous: `offs` for both. A group
    norm reading a channels-last product (channels_last_norm) walks its row position by position, the group's
    CG channels of a position contiguous (element r = s * CG + cc), and stores the result in NCHW order."""
    if not nhwc:
        return ["offs = row * R + cols"], [], "offs"
    per_group, inner, groups = (int(v) for v in region.extra["affine_index"].split(":")[1:])
    # the element's position n * S + s (64-bit where `row` is), times C, plus its channel
    read = (f"offs_in = ((row // {groups}) * {inner} + cols // {per_group}) * {groups * per_group} + "
            f"(row % {groups}) * {per_group} + cols % {per_group}")
    return [read], [f"offs = row * R + (cols % {per_group}) * {inner} + cols // {per_group}"], "offs_in"


def channel_expr(affine_index: str, nhwc: bool = False) -> str:
    """Index into weight/bias for element `cols` of row `row` (walked as row_walk says)."""
    if affine_index == "r":
        return "cols"
    kind, *rest = affine_index.split(":")
    if kind == "channel":
        per_group, inner, groups = (int(v) for v in rest)
        within = f"cols % {per_group}" if nhwc else f"cols // {inner}"
        return f"(row % {groups}) * {per_group} + {within}"
    return f"(row % {int(rest[0])}) + cols * 0"


def _affine(io: FusedIO, region: Region, y: str) -> list[str]:
    lines = []
    ch = channel_expr(region.extra["affine_index"], io.perm is not None)
    for key, op in (("weight", "*"), ("bias", "+")):
        operand = region.extra.get(key)
        if operand is not None:
            ptr = io.add(operand)
            lines.append(f"{y} = {y} {op} tl.load({ptr} + {ch}, mask=mask, other=0.0).to(tl.float32)")
    return lines


def norm_unit(name: str, region: Region, graph: Graph, params: dict[str, Any],
              perm: tuple[int, ...] | None = None) -> KernelUnit:
    """`perm`: read the input in that memory order (channels_last_norm)."""
    p_, r_, _ = region.extra["view"]
    eps = region.extra["eps"]
    p = {**row_params(p_, r_), **{k: v for k, v in params.items() if k in ("BLOCK_R", "num_warps", "SPLIT")}}
    io = FusedIO(region, graph, perm=perm, perm_out=False)
    read, store, at = row_walk(region, perm is not None)
    for key in ("weight", "bias"):
        if region.extra.get(key) is not None:
            io.add(region.extra[key])
    exchange = None
    if r_ > MAX_PERSISTENT:  # rows of many programs pipelined (templates/exchange.py)
        grouped = GROUPED if perm is None else GROUPED_NHWC
        exchange = chosen_split(p_, r_, params, ("BLOCK_R", "SPLIT"), grouped, pipeline=True)
    if exchange is not None:
        return _exchange_unit(name, region, io, exchange)
    if p["SPLIT"] > 1 and r_ > p["BLOCK_R"]:
        return _split_rows_unit(name, region, io, p)
    pid = program_id(0, io.wide)
    if r_ <= p["BLOCK_R"]:
        load, x = io.load_input(at, "mask")
        body = [f"row = {pid}", "cols = tl.arange(0, BLOCK_R)", *read, "mask = cols < R"] + load + [
            f"x = tl.where(mask, {x}, 0.0)", "mean = tl.sum(x, axis=0) / R",
            "xc = tl.where(mask, x - mean, 0.0)", "var = tl.sum(xc * xc, axis=0) / R",
            f"y = xc * tl.math.rsqrt(var + {eps!r})"] + _affine(io, region, "y")
        body += store + io.store_result("y", "offs", "mask", loaded="x")
        doc = "row in registers: the mean, then the centred variance, from one read; one write"
    else:
        load1, x1 = io.load_input(at, "mask")
        load2, x2 = io.load_input(at, "mask")
        body = [f"row = {pid}", "count = 0.0", "mean = 0.0", "m2 = 0.0",
                "for start in range(0, R, BLOCK_R):", "    cols = start + tl.arange(0, BLOCK_R)"]
        body += ["    " + ln for ln in read] + ["    mask = cols < R"]
        body += ["    " + ln for ln in load1] + [
            f"    x = tl.where(mask, {x1}, 0.0)",
            "    n_t = tl.sum(mask.to(tl.float32), axis=0)",
            "    mean_t = tl.sum(x, axis=0) / n_t",
            "    m2_t = tl.sum(tl.where(mask, (x - mean_t) * (x - mean_t), 0.0), axis=0)",
            "    total = count + n_t", "    delta = mean_t - mean",
            "    mean = mean + delta * (n_t / total)",
            "    m2 = m2 + m2_t + delta * delta * (count * n_t / total)", "    count = total",
            f"rstd = tl.math.rsqrt(m2 / R + {eps!r})",
            "for start in range(0, R, BLOCK_R):", "    cols = start + tl.arange(0, BLOCK_R)"]
        body += ["    " + ln for ln in read + store] + ["    mask = cols < R"]
        body += ["    " + ln for ln in load2] + [f"    y = ({x2} - mean) * rstd"]
        body += ["    " + ln for ln in _affine(io, region, "y")]
        body += ["    " + ln for ln in io.store_result("y", "offs", "mask", loaded=x2)]
        doc = "long rows: Chan-merged tile statistics in one read, then a normalising read"
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, R: tl.constexpr, BLOCK_R: tl.constexpr):\n"
              f'    """{region.anchor.op}: {doc}."""\n{indent(body, 4)}\n')
    launcher = io.launcher(name, f"({p_},)", f"R={r_}", launch_opts=f"BLOCK_R={p['BLOCK_R']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {"BLOCK_R": p["BLOCK_R"], "num_warps": p["num_warps"]})


def _exchange_unit(name: str, region: Region, io: FusedIO, split: Split) -> KernelUnit:
    """A long row split over SPLIT adjacent programs, each holding its chunk in registers: chunk mean and
    M2 exchanged (templates/exchange.py) and Chan-merged, then each program normalises its chunk. One read."""
    p_, r_, _ = region.extra["view"]
    read, store, at = row_walk(region, io.perm is not None)
    load, x = io.load_input(at, "mask")
    merge = gather() + ["n_k = tl.where(ok, tl.minimum(R - ks * BLOCK_R, BLOCK_R).to(tl.float32), 0.0)",
                        "mean_k = tl.where(ok, a_k, 0.0)", "m2_k = tl.where(ok, b_k, 0.0)"] + PARTS_MERGE
    rstd = f"tl.math.rsqrt(m2 / R + {region.extra['eps']!r})"
    write = _affine(io, region, "y") + io.store_result("y", "offs", "mask", loaded="x")
    first = load + [f"x = tl.where(mask, {x}, 0.0)"] + TILE_STATS + publish("mean_t", "m2_t")
    body = merge + [f"y = (x - mean) * {rstd}"] + write
    doc = f"{region.anchor.op}: a row over SPLIT programs, chunk statistics exchanged; one read."
    if io.perm is None:
        return exchange_unit(name, io, p_, r_, split, first, body, doc)
    return exchange_unit(name, io, p_, r_, split, read + first, store + body, doc + " Channels-last input.",
                         contiguous_rows=False)


def _split_rows_unit(name: str, region: Region, io: FusedIO, p: dict[str, Any]) -> KernelUnit:
    """Rows split SPLIT ways: each program Chan-merges the statistics of its chunk of a row; then each
    merges its row's SPLIT partials (a few dozen numbers) and normalises its chunk. Two launches, the
    row read twice, as in the long-row kernel, with SPLIT times the programs."""
    p_, r_, _ = region.extra["view"]
    wide = io.wide
    read, store, at = row_walk(region, io.perm is not None)
    head = [f"row = {program_id(0, wide)}", f"s = {program_id(1, wide)}", "count = 0.0", "mean = 0.0", "m2 = 0.0"]
    loop = ["for start in range(s * CHUNK, tl.minimum(s * CHUNK + CHUNK, R), BLOCK_R):",
            "    cols = start + tl.arange(0, BLOCK_R)", "    mask = cols < R"]
    load, x = io.load_input(at, "mask")
    stats = head + loop + ["    " + ln for ln in read + load + [f"x = tl.where(mask, {x}, 0.0)"] + TILE_STATS + CHAN_MERGE]
    stats += [f"tl.store(ws_ptr + (row * SPLIT + s) * 3 + {k}, {v})" for k, v in enumerate(("count", "mean", "m2"))]
    load, x = io.load_input(at, "mask")
    place = head[:2]  # row and s, without the running statistics the stats kernel starts from
    apply = place + load_parts("ws_ptr", "row * SPLIT") + PARTS_MERGE
    apply += [f"rstd = tl.math.rsqrt(m2 / R + {region.extra['eps']!r})"] + loop
    apply += ["    " + ln for ln in read + store + load] + [f"    y = ({x} - mean) * rstd"]
    apply += ["    " + ln for ln in _affine(io, region, "y") + io.store_result("y", "offs", "mask", loaded=x)]
    sizes = "R: tl.constexpr, CHUNK: tl.constexpr, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, BLOCK_R: tl.constexpr"
    kernel = (f"@triton.jit\ndef {name}_stats({io.input_ptrs()}, ws_ptr, {sizes}):\n"
              f'    """{region.anchor.op} statistics: Chan-merged (count, mean, M2) of one chunk of a row."""\n'
              f"{indent(stats, 4)}\n\n"
              f"@triton.jit\ndef {name}_kernel({io.kernel_args(['ws_ptr'])}, {sizes}):\n"
              f'    """{region.anchor.op}: the row\'s partial statistics merged, then one chunk normalised."""\n'
              f"{indent(apply, 4)}\n")
    names = io.operand_names()
    consts = (f"R={r_}, CHUNK={split_chunk(r_, p['SPLIT'], p['BLOCK_R'])}, SPLIT={p['SPLIT']}, "
              f"SPLIT_P2={next_pow2(p['SPLIT'])}, BLOCK_R={p['BLOCK_R']}")
    grid = f"({p_}, {p['SPLIT']})"
    before = [f"ws = torch.empty(({p_ * p['SPLIT'] * 3},), device={names[0]}.device, dtype=torch.float32)",
              f"{name}_stats[{grid}]({', '.join(names)}, ws, {consts}, num_warps={p['num_warps']})"]
    launcher = io.launcher(name, grid, consts, body_before=before, extra_args=["ws"],
                           launch_opts=f"num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {k: p[k] for k in ("BLOCK_R", "num_warps", "SPLIT")})


def lower_rows(name: str, region: Region, how: Lowering) -> KernelUnit:
    perm = channels_last_norm(region, how.graph) if how.nhwc else None
    return norm_unit(name, region, how.graph, how.params, perm)


def lower_batch(name: str, region: Region, how: Lowering) -> KernelUnit:
    return batch_norm_unit(name, region, how.graph, how.params, nhwc=how.nhwc)


class FusedNormalization(AnchorRecipe):
    id = "fused_normalization"
    summary = "layer/group/instance/batch norm (batch statistics in training mode) as Triton kernels"
    templates = {"norm": lower_rows, "batch_norm": lower_batch}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return norm_region(node, graph)

    def without(self, region: Region, taken: set[str]) -> Region | None:
        """A batch norm whose convolution another technique already claimed reads that one's result."""
        conv = region.extra.get("conv")
        if conv is None or conv.name not in taken:
            return None
        extra = {k: v for k, v in region.extra.items() if k not in ("conv", "covers")}
        return Region(region.kind, region.technique, region.anchor, extra=extra)

    def absent_reason(self) -> str:
        return "no layer/group/instance/batch norm with supported settings"


RECIPE = FusedNormalization()
