"""fused_pooling: 1-d, 2-d and 3-d max / average pooling with a fused prologue and epilogue.

One program computes BLOCK consecutive outputs of the flattened (N*C, *spatial) output, so its
loads for one window offset are consecutive input elements (coalesced at stride 1, and the
window's overlap is served from L1/L2: DRAM sees the input about once). The window is unrolled at
compile time (`tl.static_range`); padding, dilation and ceil_mode are masks: -inf for max, zero
for average. The average's divisor follows PyTorch's kernels exactly: the window clipped to the
padded input when count_include_pad (the default), clipped to the input otherwise, or
divisor_override. A pointwise producer of the input (the activation after a convolution, say) is
recomputed on the loads, so its output never goes through device memory. Global pooling is a
reduction over the innermost dims and is lowered by triton_reduction's template.

A pooling that adopted the convolution before it (builder._adopt_products) reads the product
channels-last where channels_last applies (nhwc_pool_unit): cuDNN then neither converts its input to
NHWC nor its output back to NCHW, which cost more than the convolution itself on some rows.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Graph, Node
from kskill.agents.recipes.matching import arg, first_operand, int_tuple, is_float, pool_window
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.columns import VECTOR, column, column_groups, group_columns, put_together, take_apart
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id
from kskill.agents.recipes.templates.fused_io import FusedIO, adopted_channels_last
from kskill.agents.recipes.templates.unit import KernelUnit

POOL_OPS = {f"{kind}_pool{d}d": (kind, d) for kind in ("max", "avg") for d in (1, 2, 3)}
GLOBAL_POOL_OPS = {f"adaptive_{kind}_pool{d}d": (kind, d) for kind in ("max", "avg") for d in (1, 2, 3)}


def pool_region(node: Node, graph: Graph) -> Region | None:
    """Max / average pooling over 1-3 trailing spatial dims (exact PyTorch semantics: padding,
    dilation, ceil_mode, count_include_pad, divisor_override), and adaptive pooling whose windows
    are all alike: a global pool is a row reduction over the spatial dims; an output size that
    divides the input is a pooling window of input / output."""
    if not is_float(node) or node.shape is None:
        return None
    x = first_operand(node)
    xshape = graph.shape_of(x)
    if node.op in GLOBAL_POOL_OPS:
        kind, dims = GLOBAL_POOL_OPS[node.op]
        size = int_tuple(arg(node, "output_size", 1), dims)
        if xshape is None or size is None or len(xshape) < dims + 1 or node.multi:
            return None
        spatial = tuple(xshape[-dims:])
        if size == (1,) * dims:  # one window over everything: a reduction over the innermost dims
            rows = math.prod(xshape[:-dims])
            return Region("reduce", "fused_pooling", node,
                          extra={"view": (rows, math.prod(spatial), 1), "reduce": "mean" if kind == "avg" else "amax",
                                 "output": node.name, "covers": [], "out_shape": tuple(node.shape),
                                 "prologue_operand": x})
        if any(i % o for i, o in zip(spatial, size)):
            return None  # uneven adaptive windows overlap and vary in size: left to PyTorch
        kernel = tuple(i // o for i, o in zip(spatial, size))
        return _window_region(node, x, kind, kernel, kernel, (0,) * dims, (1,) * dims, True, None)
    if node.op not in POOL_OPS or xshape is None:
        return None
    kind, dims = POOL_OPS[node.op]
    if len(xshape) < dims + 1 or arg(node, "return_indices", 99, False):
        return None
    window = pool_window(node, dims)
    dilation = int_tuple(arg(node, "dilation", 4, 1), dims) if kind == "max" else (1,) * dims
    if window is None or dilation is None:
        return None
    kernel, stride, pad = window
    include_pad = bool(arg(node, "count_include_pad", 5, True)) if kind == "avg" else True
    override = arg(node, "divisor_override", 6, None) if kind == "avg" else None
    if override is not None and (not isinstance(override, int) or override == 0):
        return None
    return _window_region(node, x, kind, kernel, stride, pad, dilation, include_pad, override)


def _window_region(node: Node, x: Any, kind: str, kernel: tuple[int, ...], stride: tuple[int, ...],
                   pad: tuple[int, ...], dilation: tuple[int, ...], include_pad: bool,
                   override: int | None) -> Region | None:
    if math.prod(kernel) > 512:
        return None  # a window this large unrolls into a kernel too big to compile quickly
    return Region("pool", "fused_pooling", node,
                  extra={"kernel": kernel, "stride": stride, "pad": pad, "dilation": dilation, "mode": kind,
                         "count_include_pad": include_pad, "divisor_override": override, "prologue_operand": x})


AXES = "dhw"  # names of up to three spatial axes, innermost last
ROLL_MIN_WIDTH = 32  # output rows narrower than this leave most of a row block's lanes idle


def default_params(outputs: int) -> dict[str, Any]:
    return {"BLOCK": 512 if outputs >= 1 << 20 else 256, "num_warps": 4}


def rolls(region: Region, out_shape: tuple[int, ...]) -> bool:
    """Whether the window overlaps along the second-innermost axis (2-d and 3-d pooling) and the output
    rows are long enough to fill a block: then each input row's reduction is shared by the output
    rows whose windows hold it."""
    kernel, stride, dilation = (region.extra[k] for k in ("kernel", "stride", "dilation"))
    if len(kernel) < 2 or out_shape[-1] < ROLL_MIN_WIDTH:
        return False
    return stride[-2] < (kernel[-2] - 1) * dilation[-2] + 1


def window_loops(axes: str, kernel: tuple[int, ...], stride: tuple[int, ...], pad: tuple[int, ...],
                 dilation: tuple[int, ...], base: str) -> tuple[list[str], int, str, list[str], list[str]]:
    """The statically unrolled loops over a window's offsets, outermost axis first, for outputs at `o<axis>`:
    their lines, how deep they nest, the input position (`base`, then each axis's index `i<axis>`), and per
    axis the index's validity and whether it lies within the padded input (the average's divisor)."""
    lines, depth, pos, valid, padded = [], 0, base, [], []
    for a, k, s, pd, dl in zip(axes, kernel, stride, pad, dilation):
        A = a.upper()
        lines.append("    " * depth + f"for k{a} in tl.static_range({k}):")
        depth += 1
        lines.append("    " * depth + f"i{a} = o{a} * {s} - {pd} + k{a} * {dl}")
        pos = f"({pos}) * {A} + i{a}"
        valid.append(f"(i{a} >= 0) & (i{a} < {A})")
        padded.append(f"(i{a} < {A} + {pd})")
    return lines, depth, pos, valid, padded


def _window_step(region: Region, value: str, lanes: str, padded: list[str]) -> list[str]:
    """One window offset's `value` folded into `acc`: the max, or the sum and, in `counted`, whether the offset
    counts in the average's divisor (inside the input, or inside the padded input for the live `lanes`)."""
    if region.extra["mode"] == "max":
        return [f"acc = tl.maximum(acc, {value})"]
    counts = "valid" if not region.extra["count_include_pad"] else f"{lanes} & {' & '.join(padded)}"
    return [f"acc = acc + {value}", f"counted = counted + tl.where({counts}, 1.0, 0.0)"]


def _divide(region: Region, counted: str) -> list[str]:
    """The average's division once the window is summed (none for the max)."""
    if region.extra["mode"] == "max":
        return []
    override = region.extra.get("divisor_override")
    return [f"acc = acc * {1.0 / override!r}" if override else f"acc = acc / tl.maximum({counted}, 1.0)"]


def pool_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    out_shape = tuple(region.anchor.shape)
    if rolls(region, out_shape):
        return rolling_pool_unit(name, region, graph, params)
    in_shape = tuple(graph.shape_of(region.extra["prologue_operand"]))
    dims = len(region.extra["kernel"])
    axes = AXES[-dims:]
    kernel, stride, pad, dilation = (region.extra[k] for k in ("kernel", "stride", "pad", "dilation"))
    is_max = region.extra["mode"] == "max"
    p = {**default_params(math.prod(out_shape)), **{k: v for k, v in params.items() if k in ("BLOCK", "num_warps")}}
    io = FusedIO(region, graph)
    fill = "float('-inf')" if is_max else "0.0"
    load, x = io.load_input("offs", "valid", fill)
    body = [f"o = {program_id(0, io.wide)} * BLOCK + tl.arange(0, BLOCK)", "omask = o < NUMEL", "rest = o"]
    for a in reversed(axes):  # the flat output index, innermost axis first
        body += [f"o{a} = rest % O{a.upper()}", f"rest = rest // O{a.upper()}"]
    body += ["plane = rest", f"acc = tl.full([BLOCK], {fill}, tl.float32)"]
    if not is_max:
        body += ["counted = tl.zeros([BLOCK], tl.float32)"]
    loops, depth, pos, valid, padded = window_loops(axes, kernel, stride, pad, dilation, "plane")
    ind = "    " * depth
    body += loops + [ind + f"valid = {' & '.join(['omask', *valid])}", ind + f"offs = {pos}"]
    body += [ind + ln for ln in load]
    body += [ind + ln for ln in _window_step(region, f"tl.where(valid, {x}, {fill})", "omask", padded)]
    body += _divide(region, "counted")
    body += io.store_result("acc", "o", "omask")
    sizes = {a.upper(): n for a, n in zip(axes, in_shape[-dims:])}
    sizes.update({f"O{a.upper()}": n for a, n in zip(axes, out_shape[-dims:])})
    sizes["NUMEL"] = math.prod(out_shape)
    signature = ", ".join(f"{k}: tl.constexpr" for k in sizes)
    doc = f"{region.extra['mode']} pooling over {dims}-d windows {tuple(kernel)}, unrolled; padding by masks."
    kernel_src = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, {signature}, BLOCK: tl.constexpr):\n"
                  f'    """{doc}"""\n{indent(body, 4)}\n')
    launcher = io.launcher(name, f"(triton.cdiv({sizes['NUMEL']}, {p['BLOCK']}),)",
                           ", ".join(f"{k}={v}" for k, v in sizes.items()),
                           launch_opts=f"BLOCK={p['BLOCK']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel_src, launcher, {"BLOCK": p["BLOCK"], "num_warps": p["num_warps"]})


def rolling_pool_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    """Pooling whose windows overlap along H, as separable row reductions rolled down the output rows.

    One program computes ROWS consecutive output rows of one (n, c[, od]) plane, BLOCK_W columns wide
    (grid axis 0: plane and strip of rows, which can number more than axis 1's limit of 65535).
    The window's reduction along W (and along D in 3-d pooling) of each input row is computed once and
    kept in registers while the output rows whose windows hold that row are finished: a row of the
    window span stays for span - SH output rows. An output row then costs SH row reductions of KW
    loads each, where the direct form makes KH * KW loads and their index arithmetic per output (at
    stride 1 and a 4 x 4 window, 4 loads instead of 16). Max and sum are both separable, so the result
    is the same reduction; the average's divisor is computed per axis as PyTorch's kernels do.
    """
    out_shape = tuple(region.anchor.shape)
    in_shape = tuple(graph.shape_of(region.extra["prologue_operand"]))
    dims = len(region.extra["kernel"])
    kernel, stride, pad, dilation = (region.extra[k] for k in ("kernel", "stride", "pad", "dilation"))
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (t[-2:] for t in (kernel, stride, pad, dilation))
    span = (kh - 1) * dh + 1
    kept = span - sh  # rows a step hands on to the next output row
    is_max = region.extra["mode"] == "max"
    ow_n, oh_n = out_shape[-1], out_shape[-2]
    block_w = min(512, next_pow2(ow_n))
    groups = column_groups(kw, sw, pw, dw)
    vector = bool(params.get("vector", True) and groups) and params.get("BLOCK_W", block_w) % VECTOR == 0
    # 32 rows and a warp per 64 columns: the fastest of 33 settings on L1/42 (eval/runs/push-h200-s36/NOTES.md);
    # 4 output rows a step, their input rows' loads in flight together: 1.57 -> 1.49 ms there (push-h200-s37).
    # 8 rows a step in 2-d pooling: L1/42 1.144 -> 1.109-1.112 ms in two calls; in 3-d pooling, whose every row
    # loads once per depth offset of the window, 8 lost (L1/46 2.510 -> 2.778 ms; push-h200-s48, calls 1 and 2).
    # The vector form: a warp per 128 columns, so that a lane's 4 columns are one aligned load.
    p = {"BLOCK_W": block_w, "ROWS": min(32, oh_n), "num_warps": max(1, min(8, block_w // (128 if vector else 64))),
         "UNROLL": 8 if dims == 2 else 4}
    p.update({k: v for k, v in params.items() if k in p})
    p["vector"] = vector
    io = FusedIO(region, graph)
    fill = "float('-inf')" if is_max else "0.0"
    load, x = io.load_input("offs", "valid", fill)
    planes = math.prod(out_shape[:-2])  # (n, c) pairs, times the output depth in 3-d pooling
    strips = -(-oh_n // p["ROWS"])
    if p["vector"]:  # lane i holds output columns 4i..4i+3 of the block, in the order of a flat [BLOCK_W]
        body = [f"q = {program_id(1, io.wide)} * (BLOCK_W // {VECTOR}) + tl.arange(0, BLOCK_W // {VECTOR})",
                f"cg = tl.arange(0, {VECTOR})", f"ow = tl.reshape((q * {VECTOR})[:, None] + cg[None, :], [BLOCK_W])"]
    else:
        body = [f"ow = {program_id(1, io.wide)} * BLOCK_W + tl.arange(0, BLOCK_W)"]
    body += ["wmask = ow < OW", f"job = {program_id(0, io.wide)}", "oh0 = (job % STRIPS) * ROWS",
             "plane = job // STRIPS", "lanes = ow * 0"]  # row conditions as vectors: the interpreter cannot mask with scalar & vector
    if p["vector"]:
        body += group_columns(groups, sw) + [f"gv{i} = (ig{i} >= 0) & (ig{i} < W)" for i in range(len(groups))]
    row_lanes = "(ig0 * 0)" if p["vector"] else "lanes"  # the shape of a row's loads, for its conditions
    for k in range(kw if not p["vector"] else 0):
        body += [f"iw{k} = ow * {sw} - {pw} + {k * dw}", f"wv{k} = wmask & (iw{k} >= 0) & (iw{k} < W)"]
    if dims == 3:  # (the row index before H, its validity) per depth offset of the window
        kd, sd, pd_, dd = kernel[0], stride[0], pad[0], dilation[0]
        body += ["od = plane % OD", "nc = plane // OD"]
        depth_windows = []
        for k in range(kd):
            body += [f"id{k} = od * {sd} - {pd_} + {k * dd}", f"dv{k} = ({row_lanes} + id{k} >= 0) & ({row_lanes} + id{k} < D)"]
            depth_windows.append((f"(nc * D + id{k})", f"dv{k}"))
    else:
        depth_windows = [("plane", "")]
    combine = "tl.maximum({a}, {b})" if is_max else "{a} + {b}"

    def row(target: str, ih: str) -> list[str]:
        """Statements reducing input row `ih` over the window's W (and D) offsets into `target`."""
        if p["vector"]:
            return vector_row(target, ih)
        lines = [f"ih = {ih}", "hv = (lanes + ih >= 0) & (lanes + ih < H)",
                 f"{target} = tl.full([BLOCK_W], {fill}, tl.float32)"]
        for base, dvalid in depth_windows:
            for k in range(kw):
                valid = f"wv{k} & hv" + (f" & {dvalid}" if dvalid else "")
                lines += [f"offs = ({base} * H + ih) * W + iw{k}", f"valid = {valid}"]
                lines += load
                lines.append(f"{target} = " + combine.format(a=target, b=f"tl.where(valid, {x}, {fill})"))
        return lines

    def vector_row(target: str, ih: str) -> list[str]:
        """The vector form of `row`: the aligned groups of input columns a lane's window span covers, one load
        each (reduced over the D offsets), taken apart into columns, reduced along W for each of the lane's
        VECTOR outputs, and put back together in the flat order of `ow`."""
        lines = [f"ih = {ih}", f"hv = ({row_lanes} + ih >= 0) & ({row_lanes} + ih < H)"]
        for i in range(len(groups)):
            for d, (base, dvalid) in enumerate(depth_windows):
                valid = f"gv{i} & hv" + (f" & {dvalid}" if dvalid else "")
                lines += [f"offs = ({base} * H + ih) * W + ig{i}", f"valid = {valid}"] + load
                # a prologue's value at a masked-off offset is not the fill (the load's `other` is)
                value = f"tl.where(valid, {x}, {fill})" if region.prologue is not None else x
                lines.append(f"g{i} = {value}" if d == 0 else f"g{i} = " + combine.format(a=f"g{i}", b=value))
            lines += take_apart(f"g{i}", i, f"BLOCK_W // {VECTOR}")
        for m in range(VECTOR):
            cols = [column(groups, m, sw, pw, k, dw) for k in range(kw)]
            acc = cols[0]
            for c in cols[1:]:
                acc = combine.format(a=acc, b=c)
            lines.append(f"h{m} = {acc}")
        return lines + [f"{target} = " + put_together([f"h{m}" for m in range(VECTOR)], "[BLOCK_W]")]

    unroll = p["UNROLL"] if p["ROWS"] % p["UNROLL"] == 0 else 1  # output rows a step: their loads go out together
    for i in range(kept):
        body += row(f"r{i}", f"oh0 * {sh} - {ph} + {i}")
    step = ["oh = oh0 + t"]
    for i in range(kept, span + (unroll - 1) * sh):
        step += row(f"r{i}", f"oh * {sh} - {ph} + {i}")
    for u in range(unroll):
        acc = f"r{u * sh}"
        for j in range(1, kh):
            acc = combine.format(a=acc, b=f"r{u * sh + j * dh}")
        step += ([f"oh = oh0 + t + {u}"] if u else []) + [f"acc = {acc}"]
        if not is_max:
            step += _divisor_lines(region, dims, kernel, stride, pad)
        step += ["omask = wmask & (lanes + oh < OH)", "o = (plane * OH + oh) * OW + ow"]
        step += io.store_result("acc", "o", "omask")
    step += [f"r{i} = r{i + unroll * sh}" for i in range(kept)]
    body += [f"for t in range(0, ROWS, {unroll}):" if unroll > 1 else "for t in range(ROWS):"]
    body += [f"    {ln}" for ln in step]
    sizes = {a.upper(): n for a, n in zip(AXES[-dims:], in_shape[-dims:])}
    sizes.update({"OD": out_shape[-3]} if dims == 3 else {})
    sizes.update({"OH": oh_n, "OW": ow_n, "STRIPS": strips})
    signature = ", ".join(f"{k}: tl.constexpr" for k in sizes)
    doc = (f"{region.extra['mode']} pooling over {dims}-d windows {tuple(kernel)}: row reductions along W "
           f"rolled down ROWS output rows, {kept} of every {span} window rows handed on.")
    kernel_src = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, {signature}, BLOCK_W: tl.constexpr, "
                  f"ROWS: tl.constexpr):\n    \"\"\"{doc}\"\"\"\n{indent(body, 4)}\n")
    grid = f"({planes * strips}, triton.cdiv({ow_n}, {p['BLOCK_W']}))"  # axis 0: no 65535 limit
    launcher = io.launcher(name, grid, ", ".join(f"{k}={v}" for k, v in sizes.items()),
                           launch_opts=f"BLOCK_W={p['BLOCK_W']}, ROWS={p['ROWS']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel_src, launcher, p)


def _divisor_lines(region: Region, dims: int, kernel: tuple[int, ...], stride: tuple[int, ...],
                   pad: tuple[int, ...]) -> list[str]:
    """Statements dividing `acc` by the average's divisor, per axis as PyTorch's kernels count it: the
    window clipped to the padded input (count_include_pad), or to the input itself."""
    override = region.extra.get("divisor_override")
    if override:
        return [f"acc = acc * {1.0 / override!r}"]
    include = region.extra["count_include_pad"]
    out_index = {"d": "od", "h": "oh", "w": "ow"}
    lines, factors = [], []
    for a, k, s, pd in zip(AXES[-dims:], kernel, stride, pad):
        A, o = a.upper(), out_index[a]
        lines += [f"s{a} = {o} * {s} - {pd}", f"e{a} = tl.minimum(s{a} + {k}, {A} + {pd})"]
        factors.append(f"(e{a} - s{a})" if include else f"(tl.minimum(e{a}, {A}) - tl.maximum(s{a}, 0))")
    # at least 1: the lanes past the output's end (masked at the store) would divide by zero
    return lines + [f"acc = acc / tl.maximum({' * '.join(factors)}, 1).to(tl.float32)"]


def channels_last_pool(region: Region, graph: Graph) -> tuple[int, ...] | None:
    """The memory order to read a pooled convolution product in (fused_io.adopted_channels_last), for a
    pooling over all of the product's spatial dims; None otherwise."""
    perm = adopted_channels_last(region, graph) if region.kind == "pool" else None
    if perm is None or len(region.extra["kernel"]) != len(perm) - 2:
        return None
    return perm


def nhwc_pool_unit(name: str, region: Region, graph: Graph, params: dict[str, Any],
                   perm: tuple[int, ...]) -> KernelUnit:
    """Pooling of a channels-last convolution product (channels_last_pool): one program computes a
    [BLOCK_S, BLOCK_C] tile of one image's outputs, BLOCK_S output positions by BLOCK_C channels, so each
    window offset's load is BLOCK_S runs of BLOCK_C consecutive channels. The tile is stored in NCHW order
    (Triton moves it through shared memory to keep the store coalesced too), so what follows reads the
    result as before."""
    out_shape = tuple(region.anchor.shape)
    in_shape = tuple(graph.shape_of(region.extra["prologue_operand"]))
    dims = len(region.extra["kernel"])
    axes = AXES[-dims:]
    kernel, stride, pad, dilation = (region.extra[k] for k in ("kernel", "stride", "pad", "dilation"))
    is_max = region.extra["mode"] == "max"
    images, channels, positions = out_shape[0], out_shape[1], math.prod(out_shape[2:])
    block_c = min(64, next_pow2(channels))
    p = {"BLOCK_C": block_c, "BLOCK_S": min(next_pow2(positions), max(16, 4096 // block_c)), "num_warps": 4}
    p.update({k: v for k, v in params.items() if k in p})
    io = FusedIO(region, graph, perm=perm, perm_out=False)
    fill = "float('-inf')" if is_max else "0.0"
    load, x = io.load_input("offs", "mask", fill)
    blocks = -(-positions // p["BLOCK_S"])
    body = [f"job = {program_id(0, io.wide)}", "img = job // BLOCKS",
            "s = (job % BLOCKS) * BLOCK_S + tl.arange(0, BLOCK_S)",
            f"c = {program_id(1, io.wide)} * BLOCK_C + tl.arange(0, BLOCK_C)",
            "smask = s < OS", "cmask = c < C", "rest = s"]
    for a in reversed(axes):  # the output position's coordinates, innermost axis first
        body += [f"o{a} = rest % O{a.upper()}", f"rest = rest // O{a.upper()}"]
    body.append(f"acc = tl.full([BLOCK_S, BLOCK_C], {fill}, tl.float32)")
    if not is_max:
        body.append("counted = tl.zeros([BLOCK_S], tl.float32)")
    loops, depth, pos, valid, padded = window_loops(axes, kernel, stride, pad, dilation, "img")
    ind = "    " * depth
    body += loops + [ind + f"valid = {' & '.join(['smask', *valid])}", ind + f"offs = ({pos})[:, None] * C + c[None, :]",
                     ind + "mask = valid[:, None] & cmask[None, :]"]
    body += [ind + ln for ln in load]
    # the prologue's value at a masked-off offset is not the fill (the load's `other` is)
    body += [ind + ln for ln in _window_step(region, f"tl.where(mask, {x}, {fill})", "smask", padded)]
    body += _divide(region, "counted[:, None]")
    body += ["o = (img * C + c[None, :]) * OS + s[:, None]", "omask = smask[:, None] & cmask[None, :]"]
    body += io.store_result("acc", "o", "omask")
    sizes = {"C": channels, **{a.upper(): n for a, n in zip(axes, in_shape[-dims:])}}
    sizes.update({f"O{a.upper()}": n for a, n in zip(axes, out_shape[-dims:])})
    sizes.update({"OS": positions, "BLOCKS": blocks})
    signature = ", ".join(f"{k}: tl.constexpr" for k in sizes)
    doc = (f"{region.extra['mode']} pooling over {dims}-d windows {tuple(kernel)} of a channels-last product, "
           "[BLOCK_S positions, BLOCK_C channels] a program; stored in NCHW order.")
    kernel_src = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, {signature}, BLOCK_S: tl.constexpr, "
                  f"BLOCK_C: tl.constexpr):\n    \"\"\"{doc}\"\"\"\n{indent(body, 4)}\n")
    grid = f"({images * blocks}, {-(-channels // p['BLOCK_C'])})"
    launcher = io.launcher(name, grid, ", ".join(f"{k}={v}" for k, v in sizes.items()),
                           launch_opts=f"BLOCK_S={p['BLOCK_S']}, BLOCK_C={p['BLOCK_C']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel_src, launcher, p)


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    perm = channels_last_pool(region, how.graph) if how.nhwc else None
    if perm is not None:
        return nhwc_pool_unit(name, region, how.graph, how.params, perm)
    return pool_unit(name, region, how.graph, how.params)


class FusedPooling(AnchorRecipe):
    id = "fused_pooling"
    summary = "max / average pooling (1-3 spatial dims, adaptive) with the producer's pointwise ops folded into the loads"
    templates = {"pool": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return pool_region(node, graph)

    def absent_reason(self) -> str:
        return "no max/avg pooling with supported settings (return_indices, uneven adaptive windows, huge windows)"


RECIPE = FusedPooling()
