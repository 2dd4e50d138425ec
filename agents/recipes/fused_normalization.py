"""fused_normalization: layer, group, instance and batch norm as Triton kernels, exact PyTorch semantics.

Row norms (layer, group, instance) over rows of a (P, R) view: y = (x - mean) / sqrt(var + eps) *
w[c] + b[c], biased variance as PyTorch computes it. A row that fits in registers is read once
(the mean, then the centred variance); a longer row merges per-tile statistics with Chan's formula
in one read, then normalises in a second read. The affine channel of an element depends on the
norm: the column (layer norm), the group's channel (group norm) or the row's channel (instance).

Batch norm, training mode included (the KernelBench default, since problems are not switched to
eval mode): per-channel batch statistics over N and the spatial dims, biased variance for
normalising and unbiased variance for the running-statistics update (running = (1 - momentum) *
running + momentum * batch), num_batches_tracked incremented, as nn.BatchNorm does. Three
launches: split partial statistics (Chan-merged tiles, SPLIT programs per channel so that few
channels still fill the GPU), a per-channel finalize that also updates the running buffers in
place, and one normalising sweep with the epilogue (e.g. ReLU) fused. Eval mode skips the
statistics.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Attr, Graph, Node
from kskill.agents.recipes.matching import first_operand, is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import TARGET_SMS as SMS, indent, next_pow2, program_id, split_chunk
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit, alloc, arg_name, prepare

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
        return Region("batch_norm", "fused_normalization", node, extra=extra)
    return None


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


# --- batch norm

def batch_params(n: int, c: int, inner: int) -> dict[str, Any]:
    per_channel = n * inner
    split = max(1, min(-(-4 * SMS // c), per_channel // 4096, 256))
    return {"SPLIT": split, "BLOCK": 1024 if per_channel >= 1024 else next_pow2(per_channel),
            "num_warps": 4, "APPLY_BLOCK": 1024}


def batch_norm_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    shape = tuple(region.anchor.shape)
    n, c, inner = shape[0], shape[1], math.prod(shape[2:])
    total = n * c * inner
    p = {**batch_params(n, c, inner), **{k: v for k, v in params.items() if k in ("SPLIT", "BLOCK", "num_warps", "APPLY_BLOCK")}}
    training, track, module = region.extra["training"], region.extra["track"], region.extra["module"]
    momentum = region.extra.get("momentum")
    eps = region.extra["eps"]
    io = FusedIO(region, graph)
    w, b = region.extra.get("weight"), region.extra.get("bias")
    rm, rv, nbt = Attr(f"{module}.running_mean"), Attr(f"{module}.running_var"), Attr(f"{module}.num_batches_tracked")
    for operand in (w, b):
        if operand is not None:
            io.add(operand)
    per_channel = n * inner
    chunk = split_chunk(per_channel, p["SPLIT"], p["BLOCK"])
    # --- stage 1: partial statistics per (channel, split)
    load1, x1 = io.load_input("offs", "mask")
    wide = io.wide
    stats = [f"c = {program_id(0, wide)}", f"s = {program_id(1, wide)}", "count = 0.0", "mean = 0.0", "m2 = 0.0",
             "for start in range(s * CHUNK, tl.minimum(s * CHUNK + CHUNK, PER_CHANNEL), BLOCK):",
             "    j = start + tl.arange(0, BLOCK)", "    mask = (j < PER_CHANNEL) & (j < s * CHUNK + CHUNK)",
             "    offs = (j // INNER) * (C * INNER) + c * INNER + j % INNER"]
    stats += ["    " + ln for ln in load1] + [
        f"    x = tl.where(mask, {x1}, 0.0)", "    n_t = tl.sum(mask.to(tl.float32), axis=0)",
        "    mean_t = tl.sum(x, axis=0) / tl.maximum(n_t, 1.0)",
        "    m2_t = tl.sum(tl.where(mask, (x - mean_t) * (x - mean_t), 0.0), axis=0)",
        "    total = count + n_t", "    delta = mean_t - mean",
        "    mean = mean + delta * (n_t / tl.maximum(total, 1.0))",
        "    m2 = m2 + m2_t + delta * delta * (count * n_t / tl.maximum(total, 1.0))", "    count = total",
        "tl.store(ws_ptr + (c * SPLIT + s) * 3 + 0, count)", "tl.store(ws_ptr + (c * SPLIT + s) * 3 + 1, mean)",
        "tl.store(ws_ptr + (c * SPLIT + s) * 3 + 2, m2)"]
    in_ptrs = ", ".join(io.ptrs[k] for k in list(io.ptrs))
    kernels = [f"@triton.jit\ndef {name}_stats({in_ptrs}, ws_ptr, C: tl.constexpr, INNER: tl.constexpr, "
               "PER_CHANNEL: tl.constexpr, CHUNK: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr):\n"
               '    """Batch-norm statistics: Chan-merged partial (count, mean, M2) of one chunk of a channel."""\n'
               f"{indent(stats, 4)}\n"]
    # --- stage 2: finalize per channel (+ running statistics)
    fin = [f"cs = {program_id(0, wide)} * BLOCK_C + tl.arange(0, BLOCK_C)", "cmask = cs < C"]
    if training:
        fin += ["count = tl.zeros([BLOCK_C], tl.float32)", "mean = tl.zeros([BLOCK_C], tl.float32)",
                "m2 = tl.zeros([BLOCK_C], tl.float32)",
                "for s in range(0, SPLIT):",
                "    n_t = tl.load(ws_ptr + (cs * SPLIT + s) * 3 + 0, mask=cmask, other=0.0)",
                "    mean_t = tl.load(ws_ptr + (cs * SPLIT + s) * 3 + 1, mask=cmask, other=0.0)",
                "    m2_t = tl.load(ws_ptr + (cs * SPLIT + s) * 3 + 2, mask=cmask, other=0.0)",
                "    total = count + n_t", "    delta = mean_t - mean",
                "    mean = mean + delta * (n_t / tl.maximum(total, 1.0))",
                "    m2 = m2 + m2_t + delta * delta * (count * n_t / tl.maximum(total, 1.0))", "    count = total",
                "var = m2 / tl.maximum(count, 1.0)"]
        if track:
            fin += [f"rm = tl.load(rm_ptr + cs, mask=cmask, other=0.0)", "rv = tl.load(rv_ptr + cs, mask=cmask, other=0.0)",
                    f"tl.store(rm_ptr + cs, (1.0 - {momentum!r}) * rm + {momentum!r} * mean, mask=cmask)",
                    f"tl.store(rv_ptr + cs, (1.0 - {momentum!r}) * rv + {momentum!r} * (m2 / (count - 1.0)), mask=cmask)"]
    else:
        fin += ["mean = tl.load(rm_ptr + cs, mask=cmask, other=0.0)", "var = tl.load(rv_ptr + cs, mask=cmask, other=1.0)"]
    fin += ["tl.store(mean_ptr + cs, mean, mask=cmask)", f"tl.store(rstd_ptr + cs, tl.math.rsqrt(var + {eps!r}), mask=cmask)"]
    kernels.append(f"@triton.jit\ndef {name}_finalize(ws_ptr, rm_ptr, rv_ptr, mean_ptr, rstd_ptr, C: tl.constexpr, "
                   "SPLIT: tl.constexpr, BLOCK_C: tl.constexpr):\n"
                   '    """Per-channel mean and 1/std; running statistics updated in place as nn.BatchNorm does."""\n'
                   f"{indent(fin, 4)}\n")
    # --- stage 3: normalise + affine + epilogue
    load3, x3 = io.load_input("offs", "mask")
    apply = [f"offs = {program_id(0, wide)} * BLOCK + tl.arange(0, BLOCK)", "mask = offs < NUMEL",
             "ch = (offs // INNER) % C"] + load3 + [
        f"y = ({x3} - tl.load(mean_ptr + ch, mask=mask, other=0.0)) * tl.load(rstd_ptr + ch, mask=mask, other=0.0)"]
    if w is not None:
        apply.append(f"y = y * tl.load({io.ptrs[f'self.{w.path}']} + ch, mask=mask, other=0.0)")
    if b is not None:
        apply.append(f"y = y + tl.load({io.ptrs[f'self.{b.path}']} + ch, mask=mask, other=0.0)")
    apply += io.store_result("y", "offs", "mask")
    kernels.append(f"@triton.jit\ndef {name}_kernel({io.kernel_args(['mean_ptr', 'rstd_ptr'])}, C: tl.constexpr, "
                   "INNER: tl.constexpr, NUMEL: tl.constexpr, BLOCK: tl.constexpr):\n"
                   '    """Batch-norm normalisation with the fused epilogue."""\n'
                   f"{indent(apply, 4)}\n")
    # --- launcher
    names = [arg_name(o) for o in io.operands]
    launcher_inputs = list(io.operands) + [rm, rv] + ([nbt] if training and track else [])
    src = [f"def {name}({', '.join(arg_name(o) for o in launcher_inputs)}):"]
    src += [f"    {arg_name(o)} = {prepare(o, graph)}" for o in io.operands]
    like = names[0]
    src += [f"    mean = torch.empty(({c},), device={like}.device, dtype=torch.float32)",
            f"    rstd = torch.empty(({c},), device={like}.device, dtype=torch.float32)"]
    if training:
        src += [f"    ws = torch.empty(({c * p['SPLIT'] * 3},), device={like}.device, dtype=torch.float32)",
                f"    {name}_stats[({c}, {p['SPLIT']})]({', '.join(names)}, ws, C={c}, INNER={inner}, "
                f"PER_CHANNEL={per_channel}, CHUNK={chunk}, SPLIT={p['SPLIT']}, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})"]
    else:
        src.append(f"    ws = mean")
    block_c = min(next_pow2(c), 1024)
    src.append(f"    {name}_finalize[(triton.cdiv({c}, {block_c}),)](ws, {arg_name(rm)}, {arg_name(rv)}, mean, rstd, "
               f"C={c}, SPLIT={p['SPLIT']}, BLOCK_C={block_c})")
    if training and track:
        src.append(f"    {arg_name(nbt)}.add_(1)")
    outs = io.outputs()
    for i, node in enumerate(outs):
        src.append(f"    out{i} = {alloc(tuple(node.shape), node.dtype, like)}")
    out_names = [f"out{i}" for i in range(len(outs))]
    src.append(f"    {name}_kernel[(triton.cdiv({total}, {p['APPLY_BLOCK']}),)]({', '.join(names + ['mean', 'rstd'] + out_names)}, "
               f"C={c}, INNER={inner}, NUMEL={total}, BLOCK={p['APPLY_BLOCK']}, num_warps=4)")
    src.append(f"    return {', '.join(out_names)}")
    return KernelUnit(name, "\n".join(kernels), "\n".join(src) + "\n", launcher_inputs, [o.name for o in outs],
                      {k: p[k] for k in ("SPLIT", "BLOCK", "num_warps", "APPLY_BLOCK")}, region.technique)


def lower_rows(name: str, region: Region, how: Lowering) -> KernelUnit:
    return norm_unit(name, region, how.graph, how.params)


def lower_batch(name: str, region: Region, how: Lowering) -> KernelUnit:
    return batch_norm_unit(name, region, how.graph, how.params)


class FusedNormalization(AnchorRecipe):
    id = "fused_normalization"
    summary = "layer/group/instance/batch norm (batch statistics in training mode) as Triton kernels"
    templates = {"norm": lower_rows, "batch_norm": lower_batch}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return norm_region(node, graph)

    def absent_reason(self) -> str:
        return "no layer/group/instance/batch norm with supported settings"


RECIPE = FusedNormalization()
