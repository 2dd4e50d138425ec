"""depthwise_convolution: depthwise and narrowly grouped 2-d convolutions as one Triton stencil kernel.

    y[n, oc, oh, ow] = b[oc] + sum_{ci < CIN_G, kh < KH, kw < KW}
                       x[n, g * CIN_G + ci, oh * SH - PH + kh * DH, ow * SW - PW + kw * DW] * w[oc, ci, kh, kw]

with g = oc // COUT_G the group of output channel oc (CIN_G input and COUT_G output channels per
group; a depthwise convolution has CIN_G = 1). Taps that fall in the zero padding are masked.

One program computes a BLOCK_H x BLOCK_W tile of one (n, oc) output plane, with fp32 multiply-adds
and no TF32: exact fp32 like cuDNN's CUDA-core path. Neighbouring taps read the same cache lines,
so DRAM sees each input element about once and each output element once, which is the roofline of a
stencil this thin. The input is read through its strides, so a channels-last input needs no layout
copy. The bias, and the pointwise epilogue the builder attaches, are applied before the one store.
Where the window slides by one row, the rolled form (_rolled_taps) walks a strip of ROLL output rows
instead, loading each input row once into the KH output rows it feeds.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import int_tuple, is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.columns import VECTOR, column, column_groups, group_columns, put_together, take_apart
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit, alloc, arg_name, prepare

# Input channels per group up to which a direct stencil beats cuDNN's GEMM-shaped kernels; the skill
# base's condition (conv_min_group_width <= 4) says the same.
MAX_GROUP_WIDTH = 4


def conv_geometry(node: Node, graph: Graph) -> dict[str, Any] | None:
    """Groups, channels, kernel, stride, padding and dilation of a conv2d module call, or None when
    the call has settings the template does not cover (string or non-zero padding modes)."""
    at = node.attrs
    x = node.args[0] if node.args else None
    if not isinstance(x, Ref) or len(graph.shape_of(x) or ()) != 4 or at.get("padding_mode", "zeros") != "zeros":
        return None
    padding = (0, 0) if at.get("padding") == "valid" else int_tuple(at.get("padding"), 2)
    kernel, stride, dilation = (int_tuple(at.get(k), 2) for k in ("kernel_size", "stride", "dilation"))
    groups = at.get("groups", 1)
    if None in (padding, kernel, stride, dilation) or not isinstance(groups, int):
        return None
    n, c_in, h, w = graph.shape_of(x)
    _, c_out, oh, ow = node.shape
    return {"x": x, "groups": groups, "cin_g": c_in // groups, "cout_g": c_out // groups, "n": n, "c_in": c_in,
            "h": h, "w": w, "c_out": c_out, "oh": oh, "ow": ow, "kernel": kernel, "stride": stride,
            "padding": padding, "dilation": dilation}


def depthwise_region(node: Node, graph: Graph) -> Region | None:
    if node.op != "conv2d" or node.module is None or not is_float(node) or node.shape is None:
        return None
    geometry = conv_geometry(node, graph)
    if geometry is None or geometry["groups"] <= 1 or geometry["cin_g"] > MAX_GROUP_WIDTH:
        return None
    return Region("depthwise_conv", "depthwise_convolution", node,
                  extra={"output": node.name, "geometry": geometry})


# Output rows at least this wide take the vector form of the loads (templates/columns.py) in tiles of 2 rows by
# up to 256 columns, a warp per 128 outputs (a lane's 4 columns one aligned load). On the H200 (development
# timings, eval/runs/push-h200-s41/NOTES.md), L1/84 (3 x 3 over 510-wide rows) and L1/85 (3 x 7 over 250):
# 2 x 256 3.56 and 0.457 ms, 2 x 128 3.75 and 0.469, 4 x 128 4.28 and 0.72, 1 x 512 4.19 and 0.53, against the
# column form's 4.59 and 1.06 (8 x 64; 4.24 and 1.06 at 4 x 128); taller tiles lost, every 64-wide vector tile
# (4 to 32 rows) by up to 3.7x, so narrower rows keep the column form.
VECTOR_MIN_WIDTH = 128


# The rolled form (_rolled_taps), the default for rows of the vector form where the window is wider than a column
# and slides by one row. On the H200 (development timings, eval/runs/push-h200-s46/NOTES.md, calls 1-2), 256 columns
# over 2 warps, against the direct form's 2.69, 0.454 and 1.58 ms: L1/84 (3 x 3) 2.15 ms in strips of 4 rows loading
# 2 rows a step, 2.20 one a step, 2.33-2.45 in strips of 8 to 32; L1/85 (3 x 7) 0.281-0.291 over strips of 4 to 32
# at 2 or 4 rows a step, 0.31-0.32 at one; L1/86 (3 x 3 before a 1 x 1 conv) 1.365 in strips of 4 at 2 a step,
# 1.39-1.44 otherwise. A (3, 1) window (L1/83) kept the direct form: 0.270 against 0.271-0.302 rolled.
ROLL = 4  # output rows a program walks
UNROLL = 2  # input rows a step, their loads in flight together


def rolled_by_default(g: dict[str, Any]) -> bool:
    """Rows of the vector form, a window wider than one column, sliding by one row."""
    return g["ow"] >= VECTOR_MIN_WIDTH and g["kernel"][1] > 1 and rolls(g)


def default_params(g: dict[str, Any], rolled: bool) -> dict[str, Any]:
    """About 512 outputs per program in the direct form, the tile as wide as the row allows so loads stay
    contiguous; strips of ROLL rows 256 columns wide in the rolled form."""
    oh, ow = g["oh"], g["ow"]
    if ow >= VECTOR_MIN_WIDTH or rolled:
        block_w = min(256, next_pow2(ow))
        if rolled:
            return {"ROLL": ROLL, "UNROLL": UNROLL, "BLOCK_W": block_w, "num_warps": max(1, block_w // 128),
                    "vector": True}
        return {"BLOCK_H": min(next_pow2(oh), 2), "BLOCK_W": block_w, "num_warps": block_w * 2 // 128, "vector": True}
    block_w = min(64, next_pow2(ow))
    block_h = min(next_pow2(oh), max(1, 512 // block_w))
    return {"BLOCK_H": block_h, "BLOCK_W": block_w, "num_warps": 4, "vector": False}


def _tap_loop(x_ptr: str, w_ptr: str) -> list[str]:
    """The taps one offset at a time: a [BLOCK_H, BLOCK_W] load and multiply-add for each (ci, kh, kw)."""
    return ["ow = (tile % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W)",
            "acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)",
            f"x_group = {x_ptr} + n * sxn + (oc // COUT_G) * CIN_G * sxc",
            "for ci in tl.static_range(CIN_G):",
            "    for kh in tl.static_range(KH):",
            "        ih = oh * SH - PH + kh * DH",
            "        rows = (ih >= 0) & (ih < H)",
            "        for kw in tl.static_range(KW):",
            "            iw = ow * SW - PW + kw * DW",
            "            inside = rows[:, None] & ((iw >= 0) & (iw < W))[None, :]",
            "            v = tl.load(x_group + ci * sxc + ih[:, None] * sxh + iw[None, :] * sxw, mask=inside, other=0.0)",
            f"            tap = tl.load({w_ptr} + ((oc * CIN_G + ci) * KH + kh) * KW + kw)",
            "            acc += v.to(tl.float32) * tap.to(tl.float32)"]


def _vector_taps(x_ptr: str, w_ptr: str, groups: list[int], kw: int, sw: int, pw: int, dw: int) -> list[str]:
    """The taps in the vector form: for each (ci, kh), one load of each aligned group of 4 input columns
    ([BLOCK_H, BLOCK_W // 4, 4]), taken apart, and each lane's 4 outputs accumulated apart (acc0..acc3),
    joined into `acc` at the end."""
    lead = f"BLOCK_H, BLOCK_W // {VECTOR}"
    lines = [f"q = (tile % tiles_w) * (BLOCK_W // {VECTOR}) + tl.arange(0, BLOCK_W // {VECTOR})",
             f"cg = tl.arange(0, {VECTOR})", f"ow = tl.reshape((q * {VECTOR})[:, None] + cg[None, :], [BLOCK_W])"]
    lines += group_columns(groups, sw) + [f"gv{i} = (ig{i} >= 0) & (ig{i} < W)" for i in range(len(groups))]
    lines += [f"acc{m} = tl.zeros(({lead}), dtype=tl.float32)" for m in range(VECTOR)]
    lines += [f"x_group = {x_ptr} + n * sxn + (oc // COUT_G) * CIN_G * sxc",
              "for ci in tl.static_range(CIN_G):", "    for kh in tl.static_range(KH):",
              "        ih = oh * SH - PH + kh * DH", "        rows = (ih >= 0) & (ih < H)"]
    inner = []
    for i in range(len(groups)):
        inner += [f"v{i} = tl.load(x_group + ci * sxc + ih[:, None, None] * sxh + ig{i}[None, :, :] * sxw, "
                  f"mask=rows[:, None, None] & gv{i}[None, :, :], other=0.0).to(tl.float32)"]
        inner += take_apart(f"v{i}", i, lead)
    for k in range(kw):
        inner.append(f"tap = tl.load({w_ptr} + ((oc * CIN_G + ci) * KH + kh) * KW + {k}).to(tl.float32)")
        inner += [f"acc{m} += {column(groups, m, sw, pw, k, dw)} * tap" for m in range(VECTOR)]
    lines += ["        " + ln for ln in inner]
    return lines + ["acc = " + put_together([f"acc{m}" for m in range(VECTOR)], "[BLOCK_H, BLOCK_W]")]


def _rolled_taps(x_ptr: str, w_ptr: str, g: dict[str, Any], groups: list[int], vector: bool, rows: int, unroll: int,
                 io: FusedIO, b_ptr: str | None) -> list[str]:
    """The rolled form (stride and dilation 1 along H): a program walks ROLL output rows of its strip, one input
    row a step, each row loaded once (as the direct form's taps, one offset at a time or in aligned groups of 4) and
    added, times the weights of its KH row offsets, into the KH output rows it belongs to (slot j: output row
    oh0 + t - (KH - 1) + j); slot 0 is then finished and stored, and the slots move down. An output row costs
    KW loads (CIN_G * KW) where the direct form makes KH * KW, and a strip reads its KH - 1 halo rows once."""
    (kh, kw), (_, sw), (_, pw), (_, dw) = g["kernel"], g["stride"], g["padding"], g["dilation"]
    parts = range(VECTOR) if vector else [None]
    lead = f"BLOCK_W // {VECTOR}" if vector else "BLOCK_W"

    def slot(j: int, m: int | None) -> str:
        return f"s{j}" if m is None else f"s{j}_{m}"

    if vector:
        lines = [f"q = (tile % tiles_w) * (BLOCK_W // {VECTOR}) + tl.arange(0, BLOCK_W // {VECTOR})",
                 f"cg = tl.arange(0, {VECTOR})", f"ow = tl.reshape((q * {VECTOR})[:, None] + cg[None, :], [BLOCK_W])"]
        lines += group_columns(groups, sw) + [f"gv{i} = (ig{i} >= 0) & (ig{i} < W)" for i in range(len(groups))]
        lanes = "(ig0 * 0)"
    else:
        lines = ["ow = (tile % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W)"]
        lines += [f"iw{k} = ow * {sw} - PW + {k * dw}" for k in range(kw)]
        lines += [f"wv{k} = (iw{k} >= 0) & (iw{k} < W)" for k in range(kw)]
        lanes = "(ow * 0)"
    lines += ["oh0 = (tile // tiles_w) * ROLL", f"lanes = {lanes}",
              f"x_group = {x_ptr} + n * sxn + (oc // COUT_G) * CIN_G * sxc"]
    lines += [f"w{ci}_{r}_{k} = tl.load({w_ptr} + ((oc * CIN_G + {ci}) * KH + {r}) * KW + {k}).to(tl.float32)"
              for ci in range(g["cin_g"]) for r in range(kh) for k in range(kw)]
    lines += [f"{slot(j, m)} = tl.zeros(({lead},), dtype=tl.float32)" for j in range(kh) for m in parts]
    unroll = max(1, int(unroll))
    loads, finish = [], []
    for u in range(unroll):  # the rows' loads first, so that they are in flight together
        loads += [f"ih = oh0 - PH + t + {u}", "hv = (lanes + ih >= 0) & (lanes + ih < H)"]
        for ci in range(g["cin_g"]):
            row = f"x_group + {ci} * sxc + ih * sxh"
            for i in range(len(groups) if vector else kw):
                name = f"v{ci}_{i}_{u}"
                if vector:
                    loads.append(f"{name} = tl.load({row} + ig{i} * sxw, mask=hv & gv{i}, other=0.0).to(tl.float32)")
                    loads += take_apart(name, i, lead, suffix=f"_{ci}_{u}")
                else:
                    loads.append(f"{name} = tl.load({row} + iw{i} * sxw, mask=hv & wv{i}, other=0.0).to(tl.float32)")
    for u in range(unroll):  # then each row into its output rows, the first of them finished and stored
        for ci in range(g["cin_g"]):
            for m in parts:
                for k in range(kw):
                    value = column(groups, m, sw, pw, k, dw, f"_{ci}_{u}") if vector else f"v{ci}_{k}_{u}"
                    finish += [f"{slot(j, m)} += {value} * w{ci}_{kh - 1 - j}_{k}" for j in range(kh)]
        done = put_together([slot(0, m) for m in parts], "[BLOCK_W]") if vector else slot(0, None)
        finish += [f"oh = oh0 + t + {u - (kh - 1)}", f"acc = {done}"]
        if b_ptr is not None:
            finish.append(f"acc += tl.load({b_ptr} + oc).to(tl.float32)")
        finish += ["offs = plane * (OH * OW) + oh * OW + ow",
                   f"mask = (ow * 0 + t + {u} >= {kh - 1}) & (ow * 0 + oh < tl.minimum(OH, oh0 + ROLL)) & (ow < OW)"]
        finish += io.store_result("acc", "offs", "mask")
        for m in parts:
            finish += [f"{slot(j, m)} = {slot(j + 1, m)}" for j in range(kh - 1)]
            finish.append(f"{slot(kh - 1, m)} = tl.zeros(({lead},), dtype=tl.float32)")
    steps = -(-(rows + kh - 1) // unroll) * unroll  # a strip's input rows, rounded up to whole steps
    return lines + [f"for t in range(0, {steps}, {unroll}):"] + ["    " + ln for ln in loads + finish]


def rolls(g: dict[str, Any]) -> bool:
    """Whether the rolled form can apply: stride and dilation 1 along H."""
    return g["stride"][0] == 1 and g["dilation"][0] == 1


def depthwise_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    g = region.extra["geometry"]
    anchor = region.anchor
    # a plane's tiles consecutive on one grid axis: on the H200, L1/84 (2 x 256, the vector form) 3.57 -> 2.73 ms,
    # its column form (8 x 64) 4.58 -> 3.71, L1/85 the same (eval/runs/push-h200-s42/NOTES.md)
    asked = {k: v for k, v in params.items()
             if k in ("BLOCK_H", "BLOCK_W", "num_warps", "vector", "tile_major", "ROLL", "UNROLL")}
    # rolled where asked (a ROLL), or by default unless the direct form's tile or grid is asked for
    direct_asked = "BLOCK_H" in asked or asked.get("tile_major") is False or asked.get("ROLL") == 0
    rolled = rolls(g) and (bool(asked.get("ROLL")) or (rolled_by_default(g) and not direct_asked))
    p = {**default_params(g, rolled), "tile_major": True, **asked}
    if rolled:  # a strip of ROLL rows a program, its tiles consecutive
        p.update(BLOCK_H=p["ROLL"], tile_major=True)
    else:
        for key in ("ROLL", "UNROLL"):
            p.pop(key, None)
    io = FusedIO(region, graph)
    x_ptr = io.add(g["x"])
    w_ptr = io.add(Attr(f"{anchor.module}.weight"))
    bias = Attr(f"{anchor.module}.bias") if anchor.attrs.get("has_bias") else None
    b_ptr = io.add(bias) if bias is not None else None
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = g["kernel"], g["stride"], g["padding"], g["dilation"]
    groups = column_groups(kw, sw, pw, dw)
    p["vector"] = bool(p["vector"] and groups) and p["BLOCK_W"] % VECTOR == 0
    if p["tile_major"]:  # one grid axis, a plane's tiles consecutive: neighbouring tiles share their halo rows in L2
        place = [f"job = {program_id(0, io.wide)}", "plane = job // TILES", "tile = job % TILES"]
    else:  # planes on axis 0: the programs in flight together hold the same tile of different planes, and a
        # tile's halo rows come from DRAM again when the plane's next tile runs
        place = [f"plane = {program_id(0, io.wide)}", f"tile = {program_id(1, io.wide)}"]
    body = place + ["n = plane // C_OUT", "oc = plane % C_OUT", "tiles_w = tl.cdiv(OW, BLOCK_W)"]
    if rolled:
        body += _rolled_taps(x_ptr, w_ptr, g, groups, p["vector"], p["ROLL"], p.get("UNROLL", 1), io, b_ptr)
    else:
        body.append("oh = (tile // tiles_w) * BLOCK_H + tl.arange(0, BLOCK_H)")
        body += _vector_taps(x_ptr, w_ptr, groups, kw, sw, pw, dw) if p["vector"] else _tap_loop(x_ptr, w_ptr)
        if b_ptr is not None:
            body.append(f"acc += tl.load({b_ptr} + oc).to(tl.float32)")
        body += ["offs = plane * (OH * OW) + oh[:, None] * OW + ow[None, :]",
                 "mask = (oh[:, None] < OH) & (ow[None, :] < OW)"]
        body += io.store_result("acc", "offs", "mask")
    sizes = {"C_OUT": g["c_out"], "CIN_G": g["cin_g"], "COUT_G": g["cout_g"], "H": g["h"], "W": g["w"],
             "OH": g["oh"], "OW": g["ow"], "KH": kh, "KW": kw, "SH": sh, "SW": sw, "PH": ph, "PW": pw,
             "DH": dh, "DW": dw, **({"TILES": _tiles(g, p)} if p["tile_major"] else {})}
    if rolled:
        sizes["ROLL"] = p["ROLL"]
    constexprs = ", ".join(f"{k}: tl.constexpr" for k in (*sizes, "BLOCK_H", "BLOCK_W"))
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['sxn', 'sxc', 'sxh', 'sxw'])}, {constexprs}):\n"
              f'    """{anchor.name}: {"depthwise" if g["cin_g"] == 1 else "grouped"} 2-d convolution, '
              f'{g["cin_g"]} input channel(s) per group, as a direct stencil in fp32."""\n{indent(body, 4)}\n')
    return io.unit(name, kernel, _launcher(name, io, g, sizes, p),
                   {k: p[k] for k in ("BLOCK_H", "BLOCK_W", "num_warps", "vector", "tile_major", "ROLL", "UNROLL") if k in p})


def _tiles(g: dict[str, Any], p: dict[str, Any]) -> int:
    """Output tiles of one (n, oc) plane."""
    return -(-g["oh"] // p["BLOCK_H"]) * -(-g["ow"] // p["BLOCK_W"])


def _launcher(name: str, io: FusedIO, g: dict[str, Any], sizes: dict[str, int], p: dict[str, Any]) -> str:
    """The input is passed as it is (its strides go to the kernel); every other operand contiguous."""
    x = arg_name(g["x"])
    src = [f"def {name}({', '.join(arg_name(o) for o in io.operands)}):"]
    src += [f"    {arg_name(o)} = {prepare(o, io.graph)}" for o in io.operands if o != g["x"]]
    outs = io.outputs()
    src += [f"    out{i} = {alloc(tuple(node.shape), node.dtype, x)}" for i, node in enumerate(outs)]
    planes, tiles = g["n"] * g["c_out"], _tiles(g, p)
    grid = f"({planes * tiles},)" if p["tile_major"] else f"({planes}, {tiles})"
    args = [arg_name(o) for o in io.operands] + [f"{x}.stride({d})" for d in range(4)] + [f"out{i}" for i in range(len(outs))]
    consts = ", ".join(f"{k}={v}" for k, v in sizes.items())
    src.append(f"    {name}_kernel[{grid}]({', '.join(args)}, {consts}, "
               f"BLOCK_H={p['BLOCK_H']}, BLOCK_W={p['BLOCK_W']}, num_warps={p['num_warps']})")
    src.append(f"    return {', '.join(f'out{i}' for i in range(len(outs)))}")
    return "\n".join(src) + "\n"


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return depthwise_unit(name, region, how.graph, how.params)


class DepthwiseConvolution(AnchorRecipe):
    id = "depthwise_convolution"
    summary = "depthwise and narrowly grouped 2-d convolutions as a direct Triton stencil (exact fp32)"
    templates = {"depthwise_conv": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return depthwise_region(node, graph)

    def absent_reason(self) -> str:
        return f"no conv2d module with groups > 1 and at most {MAX_GROUP_WIDTH} input channels per group"


RECIPE = DepthwiseConvolution()
