"""Batch norm as Triton kernels, training mode included (the KernelBench default: problems are not
switched to eval mode), with nn.BatchNorm's exact semantics.

Per-channel batch statistics over N and the spatial dims, the biased variance for normalising and
the unbiased one for the running-statistics update (running = (1 - momentum) * running + momentum
* batch), num_batches_tracked incremented. Three launches:

1. statistics: Chan-merged (count, mean, M2) partials, SPLIT programs per channel so that few
   channels still fill the GPU. In NCHW a program walks its channel in contiguous runs of H*W; in
   channels-last (NHWC) memory a program reads [BLOCK_R, BLOCK_C] tiles of rows, contiguous along C,
   and keeps BLOCK_C channels' partials at once, so the tensor is read as it lies, never transposed;
2. finalize: per channel, the partials merged into mean and 1/std, the running buffers updated in
   place (eval mode reads them instead);
3. apply: one sweep in the tensor's memory order normalising, scaling and applying the fused epilogue.

A convolution whose only use is the norm is adopted: cuDNN computes it without its bias, since a
per-channel constant cancels in the normalised output ((y + b) - mean(y + b) = y - mean(y)); the
bias enters the running-mean update alone. That saves the bias kernel eager launches after cuDNN.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.graph import Attr, Graph, Ref
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import (
    MEMORY_FORMATS, TARGET_SMS as SMS, channels_last_order, indent, next_pow2, program_id, split_chunk,
    to_channels_last)
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit, alloc, arg_name, prepare

def tile_stats(x: str = "x", mask: str = "mask") -> list[str]:
    """A tile's (n_t, mean_t, m2_t) from `x` (zeros where masked) and `mask`, before CHAN_MERGE folds it in."""
    return [f"n_t = tl.sum({mask}.to(tl.float32), axis=0)", f"mean_t = tl.sum({x}, axis=0) / tl.maximum(n_t, 1.0)",
            f"m2_t = tl.sum(tl.where({mask}, ({x} - mean_t) * ({x} - mean_t), 0.0), axis=0)"]


TILE_STATS = tile_stats()
CHAN_MERGE = ["total = count + n_t", "delta = mean_t - mean",
              "mean = mean + delta * (n_t / tl.maximum(total, 1.0))",
              "m2 = m2 + m2_t + delta * delta * (count * n_t / tl.maximum(total, 1.0))", "count = total"]
PARTS_MERGE = ["count = tl.sum(n_k, axis=0)", "mean = tl.sum(n_k * mean_k, axis=0) / tl.maximum(count, 1.0)",
               "m2 = tl.sum(m2_k + n_k * (mean_k - mean) * (mean_k - mean), axis=0)"]
"""Vectors of parts' statistics (`n_k`, zero for no part, `mean_k`, `m2_k`) merged at once into (count, mean,
m2): the count-weighted mean, then each part's M2 plus its count times its squared offset from that mean
(Chan et al.'s pairwise update, summed). All parts' loads go out together, where a loop of CHAN_MERGE waits
for each part in turn: a few hundred parts cost one memory latency instead of a few hundred."""


def load_parts(ws: str, base: str) -> list[str]:
    """Kernel lines loading the SPLIT parts (count, mean, M2) stored as triples from `ws` + `base` * 3 into
    `n_k`, `mean_k`, `m2_k` (SPLIT_P2 lanes, zero past SPLIT), for PARTS_MERGE."""
    return ["ks = tl.arange(0, SPLIT_P2)"] + [
        f"{v}_k = tl.load({ws} + ({base} + ks) * 3 + {i}, mask=ks < SPLIT, other=0.0)"
        for i, v in enumerate(("n", "mean", "m2"))]


def batch_params(n: int, c: int, inner: int, nhwc: bool = False) -> dict[str, Any]:
    per_channel = n * inner
    if nhwc:  # a program covers BLOCK_C channels, so SPLIT alone must fill the GPU
        block_c = min(next_pow2(c), 64)
        split = max(1, min(-(-4 * SMS // -(-c // block_c)), per_channel // 1024, 1024))
        return {"SPLIT": split, "BLOCK": max(1, 2048 // block_c), "BLOCK_C": block_c, "num_warps": 4,
                "APPLY_BLOCK": 1024}
    split = max(1, min(-(-4 * SMS // c), per_channel // 4096, 256))
    return {"SPLIT": split, "BLOCK": 1024 if per_channel >= 1024 else next_pow2(per_channel),
            "num_warps": 4, "APPLY_BLOCK": 1024}


def _stats_nchw(name: str, io: FusedIO, wide: bool) -> str:
    load, x = io.load_input("offs", "mask")
    body = [f"c = {program_id(0, wide)}", f"s = {program_id(1, wide)}", "count = 0.0", "mean = 0.0", "m2 = 0.0",
            "for start in range(s * CHUNK, tl.minimum(s * CHUNK + CHUNK, PER_CHANNEL), BLOCK):",
            "    j = start + tl.arange(0, BLOCK)", "    mask = (j < PER_CHANNEL) & (j < s * CHUNK + CHUNK)",
            "    offs = (j // INNER) * (C * INNER) + c * INNER + j % INNER"]
    body += ["    " + ln for ln in load + [f"x = tl.where(mask, {x}, 0.0)"] + TILE_STATS + CHAN_MERGE]
    body += [f"tl.store(ws_ptr + (c * SPLIT + s) * 3 + {k}, {v})" for k, v in enumerate(("count", "mean", "m2"))]
    return (f"@triton.jit\ndef {name}_stats({io.input_ptrs()}, ws_ptr, C: tl.constexpr, INNER: tl.constexpr, "
            "PER_CHANNEL: tl.constexpr, CHUNK: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr):\n"
            '    """Batch-norm statistics: Chan-merged partial (count, mean, M2) of one chunk of a channel."""\n'
            f"{indent(body, 4)}\n")


def _stats_nhwc(name: str, io: FusedIO, wide: bool) -> str:
    load, x = io.load_input("offs", "mask")
    body = [f"cs = {program_id(0, wide)} * BLOCK_C + tl.arange(0, BLOCK_C)", "cmask = cs < C",
            f"s = {program_id(1, wide)}", "count = tl.zeros([BLOCK_C], tl.float32)",
            "mean = tl.zeros([BLOCK_C], tl.float32)", "m2 = tl.zeros([BLOCK_C], tl.float32)",
            "for start in range(s * CHUNK, tl.minimum(s * CHUNK + CHUNK, ROWS), BLOCK):",
            "    r = start + tl.arange(0, BLOCK)", "    rmask = (r < ROWS) & (r < s * CHUNK + CHUNK)",
            "    offs = r[:, None] * C + cs[None, :]", "    mask = rmask[:, None] & cmask[None, :]"]
    body += ["    " + ln for ln in load] + [
        f"    x = tl.where(mask, {x}, 0.0)", "    n_t = tl.sum(mask.to(tl.float32), axis=0)",
        "    mean_t = tl.sum(x, axis=0) / tl.maximum(n_t, 1.0)",
        "    m2_t = tl.sum(tl.where(mask, (x - mean_t[None, :]) * (x - mean_t[None, :]), 0.0), axis=0)"]
    body += ["    " + ln for ln in CHAN_MERGE]
    body += [f"tl.store(ws_ptr + (cs * SPLIT + s) * 3 + {k}, {v}, mask=cmask)"
             for k, v in enumerate(("count", "mean", "m2"))]
    return (f"@triton.jit\ndef {name}_stats({io.input_ptrs()}, ws_ptr, C: tl.constexpr, ROWS: tl.constexpr, "
            "CHUNK: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr):\n"
            '    """Batch-norm statistics over channels-last memory: Chan-merged partials of BLOCK_C channels\n'
            '    from [BLOCK, BLOCK_C] tiles of rows, read contiguously along C."""\n'
            f"{indent(body, 4)}\n")


def _finalize(name: str, region: Region, wide: bool, folded_bias: bool) -> str:
    training, track, momentum, eps = (region.extra[k] for k in ("training", "track", "momentum", "eps"))
    fin = [f"cs = {program_id(0, wide)} * BLOCK_C + tl.arange(0, BLOCK_C)", "cmask = cs < C"]
    if training:
        fin += ["count = tl.zeros([BLOCK_C], tl.float32)", "mean = tl.zeros([BLOCK_C], tl.float32)",
                "m2 = tl.zeros([BLOCK_C], tl.float32)", "for s in range(0, SPLIT):"]
        fin += [f"    {v} = tl.load(ws_ptr + (cs * SPLIT + s) * 3 + {k}, mask=cmask, other=0.0)"
                for k, v in enumerate(("n_t", "mean_t", "m2_t"))]
        fin += ["    " + ln for ln in CHAN_MERGE] + ["var = m2 / tl.maximum(count, 1.0)"]
        if track:
            # the adopted convolution's bias shifts the batch mean it would have had, nothing else
            shift = " + tl.load(shift_ptr + cs, mask=cmask, other=0.0)" if folded_bias else ""
            fin += ["rm = tl.load(rm_ptr + cs, mask=cmask, other=0.0)", "rv = tl.load(rv_ptr + cs, mask=cmask, other=0.0)",
                    f"tl.store(rm_ptr + cs, (1.0 - {momentum!r}) * rm + {momentum!r} * (mean{shift}), mask=cmask)",
                    f"tl.store(rv_ptr + cs, (1.0 - {momentum!r}) * rv + {momentum!r} * (m2 / (count - 1.0)), mask=cmask)"]
    else:
        fin += ["mean = tl.load(rm_ptr + cs, mask=cmask, other=0.0)", "var = tl.load(rv_ptr + cs, mask=cmask, other=1.0)"]
        if folded_bias:  # the running mean includes the bias the adopted product was computed without
            fin.append("mean = mean - tl.load(shift_ptr + cs, mask=cmask, other=0.0)")
    fin += ["tl.store(mean_ptr + cs, mean, mask=cmask)", f"tl.store(rstd_ptr + cs, tl.math.rsqrt(var + {eps!r}), mask=cmask)"]
    return (f"@triton.jit\ndef {name}_finalize(ws_ptr, rm_ptr, rv_ptr, shift_ptr, mean_ptr, rstd_ptr, C: tl.constexpr, "
            "SPLIT: tl.constexpr, BLOCK_C: tl.constexpr):\n"
            '    """Per-channel mean and 1/std; running statistics updated in place as nn.BatchNorm does."""\n'
            f"{indent(fin, 4)}\n")


def _apply(name: str, region: Region, io: FusedIO, wide: bool, nhwc: bool) -> str:
    load, x = io.load_input("offs", "mask")
    channel = "offs % C" if nhwc else "(offs // INNER) % C"
    lines = [f"offs = {program_id(0, wide)} * BLOCK + tl.arange(0, BLOCK)", "mask = offs < NUMEL", f"ch = {channel}"]
    lines += load + [f"y = ({x} - tl.load(mean_ptr + ch, mask=mask, other=0.0)) * "
                     "tl.load(rstd_ptr + ch, mask=mask, other=0.0)"]
    for key, op in (("weight", "*"), ("bias", "+")):
        operand = region.extra.get(key)
        if operand is not None:
            lines.append(f"y = y {op} tl.load({io.ptrs[f'self.{operand.path}']} + ch, mask=mask, other=0.0)")
    lines += io.store_result("y", "offs", "mask")
    return (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['mean_ptr', 'rstd_ptr'])}, C: tl.constexpr, "
            "INNER: tl.constexpr, NUMEL: tl.constexpr, BLOCK: tl.constexpr):\n"
            '    """Batch-norm normalisation with the fused epilogue, in the memory order of the tensor."""\n'
            f"{indent(lines, 4)}\n")


def batch_norm_unit(name: str, region: Region, graph: Graph, params: dict[str, Any], nhwc: bool = False) -> KernelUnit:
    shape = tuple(region.anchor.shape)
    n, c, inner = shape[0], shape[1], math.prod(shape[2:])
    perm = channels_last_order(len(shape), nhwc)
    p = {**batch_params(n, c, inner, perm is not None),
         **{k: v for k, v in params.items() if k in ("SPLIT", "BLOCK", "BLOCK_C", "num_warps", "APPLY_BLOCK")}}
    io = FusedIO(region, graph, perm=perm)
    for key in ("weight", "bias"):
        if region.extra.get(key) is not None:
            io.add(region.extra[key])
    wide = io.wide
    conv = region.extra.get("conv")
    folded_bias = conv is not None and conv.attrs.get("has_bias")
    kernels = [_stats_nhwc(name, io, wide) if perm is not None else _stats_nchw(name, io, wide),
               _finalize(name, region, wide, bool(folded_bias)), _apply(name, region, io, wide, perm is not None)]
    return KernelUnit(name, "\n".join(kernels), _launcher(name, region, graph, io, p, perm, shape),
                      _launcher_inputs(region, io), [o.name for o in io.outputs()],
                      {k: p[k] for k in ("SPLIT", "BLOCK", "num_warps", "APPLY_BLOCK", "BLOCK_C") if k in p},
                      region.technique)


def _buffers(region: Region) -> tuple[Attr, Attr, Attr]:
    module = region.extra["module"]
    return Attr(f"{module}.running_mean"), Attr(f"{module}.running_var"), Attr(f"{module}.num_batches_tracked")


def _launcher_inputs(region: Region, io: FusedIO) -> list[Any]:
    """The kernels' operands with an adopted convolution's product replaced by what computes it."""
    rm, rv, nbt = _buffers(region)
    conv = region.extra.get("conv")
    operands = list(io.operands)
    if conv is not None:
        own = [conv.args[0], Attr(f"{conv.module}.weight")]
        if conv.attrs.get("has_bias"):
            own.append(Attr(f"{conv.module}.bias"))
        operands = own + [o for o in operands if not (isinstance(o, Ref) and o.name == conv.name)]
    tracked = [nbt] if region.extra["training"] and region.extra["track"] else []
    return operands + [rm, rv] + tracked


def _launcher(name: str, region: Region, graph: Graph, io: FusedIO, p: dict[str, Any],
              perm: tuple[int, ...] | None, shape: tuple[int, ...]) -> str:
    from kskill.agents.recipes.gemm_epilogue_fusion import product_text  # the same cuDNN call its recipe emits

    n, c, inner = shape[0], shape[1], math.prod(shape[2:])
    training, conv = region.extra["training"], region.extra.get("conv")
    rm, rv, nbt = _buffers(region)
    src = [f"def {name}({', '.join(arg_name(o) for o in _launcher_inputs(region, io))}):"]
    if conv is not None:
        x, w = arg_name(conv.args[0]), arg_name(Attr(f"{conv.module}.weight"))
        if perm is not None:  # cuDNN's channels-last kernels, read by the statistics as they lie
            fmt = MEMORY_FORMATS[len(perm)]
            src += [f"    {x} = {to_channels_last(x)}", f"    {w} = {w}.contiguous(memory_format={fmt})"]
        src.append(f"    {conv.name} = {product_text(conv, x, w)}  # cuDNN, its bias folded into the statistics")
    src += [f"    {arg_name(o)} = {prepare(o, graph, shape if _full(o, graph, shape) else None, perm is not None)}"
            for o in io.operands]
    like = arg_name(io.operands[0])
    names = io.operand_names()
    shift = arg_name(Attr(f"{conv.module}.bias")) if conv is not None and conv.attrs.get("has_bias") else "mean"
    src += [f"    mean = torch.empty(({c},), device={like}.device, dtype=torch.float32)",
            f"    rstd = torch.empty(({c},), device={like}.device, dtype=torch.float32)"]
    if training and perm is not None:
        rows = n * inner
        src += [f"    ws = torch.empty(({c * p['SPLIT'] * 3},), device={like}.device, dtype=torch.float32)",
                f"    {name}_stats[(triton.cdiv({c}, {p['BLOCK_C']}), {p['SPLIT']})]({', '.join(names)}, ws, C={c}, "
                f"ROWS={rows}, CHUNK={split_chunk(rows, p['SPLIT'], p['BLOCK'])}, SPLIT={p['SPLIT']}, "
                f"BLOCK={p['BLOCK']}, BLOCK_C={p['BLOCK_C']}, num_warps={p['num_warps']})"]
    elif training:
        src += [f"    ws = torch.empty(({c * p['SPLIT'] * 3},), device={like}.device, dtype=torch.float32)",
                f"    {name}_stats[({c}, {p['SPLIT']})]({', '.join(names)}, ws, C={c}, INNER={inner}, "
                f"PER_CHANNEL={n * inner}, CHUNK={split_chunk(n * inner, p['SPLIT'], p['BLOCK'])}, SPLIT={p['SPLIT']}, "
                f"BLOCK={p['BLOCK']}, num_warps={p['num_warps']})"]
    else:
        src.append("    ws = mean")
    block_c = min(next_pow2(c), 1024)
    src.append(f"    {name}_finalize[(triton.cdiv({c}, {block_c}),)](ws, {arg_name(rm)}, {arg_name(rv)}, {shift}, mean, "
               f"rstd, C={c}, SPLIT={p['SPLIT']}, BLOCK_C={block_c})")
    if training and region.extra["track"]:
        src.append(f"    {arg_name(nbt)}.add_(1)")
    outs = io.outputs()
    src += [f"    out{i} = {alloc(tuple(node.shape), node.dtype, like, perm is not None)}" for i, node in enumerate(outs)]
    out_names = [f"out{i}" for i in range(len(outs))]
    total = n * c * inner
    src.append(f"    {name}_kernel[(triton.cdiv({total}, {p['APPLY_BLOCK']}),)]({', '.join(names + ['mean', 'rstd'] + out_names)}, "
               f"C={c}, INNER={inner}, NUMEL={total}, BLOCK={p['APPLY_BLOCK']}, num_warps=4)")
    src.append(f"    return {', '.join(out_names)}")
    return "\n".join(src) + "\n"


def _full(operand: Any, graph: Graph, shape: tuple[int, ...]) -> bool:
    """Whether an operand spans the normalised tensor's dims (a per-channel one stays as it is)."""
    return len(graph.shape_of(operand) or ()) == len(shape)
