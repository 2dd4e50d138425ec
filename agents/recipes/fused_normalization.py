"""fused_normalization: layer, group, instance and batch norm as Triton kernels, exact PyTorch semantics.

Row norms (layer, group, instance) over rows of a (P, R) view: y = (x - mean) / sqrt(var + eps) *
w[c] + b[c], biased variance as PyTorch computes it. A row that fits in registers is read once
(the mean, then the centred variance); a longer row merges per-tile statistics with Chan's formula
in one read, then normalises in a second read. The affine channel of an element depends on the
norm: the column (layer norm), the group's channel (group norm) or the row's channel (instance).

Batch norm, training mode included (the KernelBench default, since problems are not switched to
eval mode), with nn.BatchNorm's running-statistics update: statistics, finalize and one normalising
sweep with the epilogue (e.g. ReLU) fused, in NCHW or reading channels-last memory as it lies; a
convolution whose only use is the norm is taken over, its bias folded into the statistics
(templates/batch_norm.py).
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.gemm_epilogue_fusion import GEMM_OPS
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import first_operand, is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.batch_norm import batch_norm_unit
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id
from kskill.agents.recipes.templates.fused_io import FusedIO
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


def row_params(r: int) -> dict[str, Any]:
    block = min(next_pow2(r), MAX_PERSISTENT)
    return {"BLOCK_R": block, "num_warps": 4 if block <= 1024 else (8 if block <= 4096 else 16)}


def channel_expr(affine_index: str) -> str:
    """Index into weight/bias for element `cols` of row `row`."""
    if affine_index == "r":
        return "cols"
    kind, *rest = affine_index.split(":")
    if kind == "channel":
        per_group, inner, groups = (int(v) for v in rest)
        return f"(row % {groups}) * {per_group} + cols // {inner}"
    return f"(row % {int(rest[0])}) + cols * 0"


def _affine(io: FusedIO, region: Region, y: str) -> list[str]:
    lines = []
    ch = channel_expr(region.extra["affine_index"])
    for key, op in (("weight", "*"), ("bias", "+")):
        operand = region.extra.get(key)
        if operand is not None:
            ptr = io.add(operand)
            lines.append(f"{y} = {y} {op} tl.load({ptr} + {ch}, mask=mask, other=0.0).to(tl.float32)")
    return lines


def norm_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    p_, r_, _ = region.extra["view"]
    eps = region.extra["eps"]
    p = {**row_params(r_), **{k: v for k, v in params.items() if k in ("BLOCK_R", "num_warps")}}
    io = FusedIO(region, graph)
    for key in ("weight", "bias"):
        if region.extra.get(key) is not None:
            io.add(region.extra[key])
    pid = program_id(0, io.wide)
    if r_ <= p["BLOCK_R"]:
        load, x = io.load_input("offs", "mask")
        body = [f"row = {pid}", "cols = tl.arange(0, BLOCK_R)", "offs = row * R + cols", "mask = cols < R"] + load + [
            f"x = tl.where(mask, {x}, 0.0)", "mean = tl.sum(x, axis=0) / R",
            "xc = tl.where(mask, x - mean, 0.0)", "var = tl.sum(xc * xc, axis=0) / R",
            f"y = xc * tl.math.rsqrt(var + {eps!r})"] + _affine(io, region, "y")
        body += io.store_result("y", "offs", "mask")
        doc = "row in registers: the mean, then the centred variance, from one read; one write"
    else:
        load1, x1 = io.load_input("offs", "mask")
        load2, x2 = io.load_input("offs", "mask")
        body = [f"row = {pid}", "count = 0.0", "mean = 0.0", "m2 = 0.0",
                "for start in range(0, R, BLOCK_R):",
                "    cols = start + tl.arange(0, BLOCK_R)", "    offs = row * R + cols", "    mask = cols < R"]
        body += ["    " + ln for ln in load1] + [
            f"    x = tl.where(mask, {x1}, 0.0)",
            "    n_t = tl.sum(mask.to(tl.float32), axis=0)",
            "    mean_t = tl.sum(x, axis=0) / n_t",
            "    m2_t = tl.sum(tl.where(mask, (x - mean_t) * (x - mean_t), 0.0), axis=0)",
            "    total = count + n_t", "    delta = mean_t - mean",
            "    mean = mean + delta * (n_t / total)",
            "    m2 = m2 + m2_t + delta * delta * (count * n_t / total)", "    count = total",
            f"rstd = tl.math.rsqrt(m2 / R + {eps!r})",
            "for start in range(0, R, BLOCK_R):",
            "    cols = start + tl.arange(0, BLOCK_R)", "    offs = row * R + cols", "    mask = cols < R"]
        body += ["    " + ln for ln in load2] + [f"    y = ({x2} - mean) * rstd"]
        body += ["    " + ln for ln in _affine(io, region, "y")]
        body += ["    " + ln for ln in io.store_result("y", "offs", "mask")]
        doc = "long rows: Chan-merged tile statistics in one read, then a normalising read"
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, R: tl.constexpr, BLOCK_R: tl.constexpr):\n"
              f'    """{region.anchor.op}: {doc}."""\n{indent(body, 4)}\n')
    launcher = io.launcher(name, f"({p_},)", f"R={r_}", launch_opts=f"BLOCK_R={p['BLOCK_R']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {"BLOCK_R": p["BLOCK_R"], "num_warps": p["num_warps"]})


def lower_rows(name: str, region: Region, how: Lowering) -> KernelUnit:
    return norm_unit(name, region, how.graph, how.params)


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
