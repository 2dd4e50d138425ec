"""triton_reduction: sum / mean / amax / amin / prod / argmax / argmin / logsumexp over a contiguous range of dims.

The input is viewed as (P, R, Q) and reduced over R. Q == 1 (innermost dims): one program per
row, 1-d tiles along the contiguous row. Q > 1: tiles of (BLOCK_R, BLOCK_Q) with q contiguous so
loads stay coalesced. When P * Q leaves most of the GPU idle and R is long (a full reduction to a
scalar, say), the rows are split SPLIT ways into partials and a second launch combines them
(split-K for reductions); arg-reductions and logsumexp are never split. logsumexp keeps a running
maximum and a running sum of exponentials per lane (the online softmax's rescaling), so its input is
read once, against the max, subtract, exp, sum and log passes of PyTorch's. The prologue (e.g. (a - b) ** 2 of an
MSE) is computed on the fly from the loads; the epilogue is applied to the reduced value. Under
channels_last, a reduction over the spatial dims or the channels of a convolution product it adopted
reads cuDNN's channels-last output as it lies.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import FLOATS, REDUCE_OPS, first_operand, normalise_dims, prq
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import (
    TARGET_SMS as SMS, channels_last_order, indent, next_pow2, program_id, split_chunk)
from kskill.agents.recipes.templates.fused_io import FusedIO, adopted_channels_last
from kskill.agents.recipes.templates.unit import KernelUnit

def reduce_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in REDUCE_OPS or node.shape is None and not node.multi:
        return None
    x = first_operand(node)
    xshape = graph.shape_of(x)
    if not isinstance(x, (Ref, Attr)) or xshape is None or str(graph.dtype_of(x)) not in FLOATS:
        return None
    dim = node.attrs.get("dim", node.args[1] if len(node.args) > 1 and isinstance(node.args[1], (int, tuple, list)) else None)
    if node.attrs.get("dtype") is not None:
        return None
    dims = normalise_dims(dim, len(xshape))
    view = prq(tuple(xshape), dims) if dims is not None else None
    if view is None:
        return None
    op, output = node.op, node.name
    covers: list[str] = []
    if node.multi:  # torch.max(x, dim) -> (values, indices): only the values may be used
        users = [graph.by_name[u] for u in graph.users(node.name)]
        if not users or any(u.op != "getitem" or u.args[1] != 0 for u in users) or len(users) != 1:
            return None
        output = users[0].name
        covers = [output]
    elif op in ("max", "min") and dim is not None:
        return None
    op = {"max": "amax", "min": "amin"}.get(op, op)
    out_node = graph.by_name[output]
    return Region("reduce", "triton_reduction", node,
                  extra={"view": view, "reduce": op, "output": output, "covers": covers,
                         "out_shape": tuple(out_node.shape or ()), "prologue_operand": x})


INIT = {"sum": "0.0", "mean": "0.0", "prod": "1.0", "amax": "float('-inf')", "amin": "float('inf')",
        "argmax": "float('-inf')", "argmin": "float('inf')", "logsumexp": "float('-inf')"}
COMBINE = {"sum": "acc + x", "mean": "acc + x", "prod": "acc * x", "amax": "tl.maximum(acc, x)",
           "amin": "tl.minimum(acc, x)"}
FINAL = {"sum": "tl.sum(acc, axis={a})", "mean": "tl.sum(acc, axis={a})", "amax": "tl.max(acc, axis={a})",
         "amin": "tl.min(acc, axis={a})", "prod": "tl.reduce(acc, {a}, _multiply)"}
STAGE2_OP = {"sum": "sum", "mean": "sum", "prod": "prod", "amax": "amax", "amin": "amin"}
# logsumexp: `acc` is each lane's running maximum, `s` its sum of exp(x - acc); a lane that has seen
# only -inf keeps s = 0 (its shift is taken as 0, so no inf - inf appears)
ONLINE_LSE = ["    m_new = tl.maximum(acc, x)", "    shift = tl.where(m_new == float('-inf'), 0.0, m_new)",
              "    s = s * tl.exp(acc - shift) + tl.exp(x - shift)", "    acc = m_new"]
FINISH_LSE = ["m = tl.max(acc, axis=0)", "m = tl.where(m == float('-inf'), 0.0, m)",
              "result = m + tl.log(tl.sum(s * tl.exp(acc - m), axis=0))"]

MULTIPLY_HELPER = '''
@triton.jit
def _multiply(a, b):
    return a * b
'''


MULTI_ROW_MAX = 1024  # rows this short are reduced BLOCK_P at a time, one tile each
# Programs a multiprocessor for a split reduction's first stage: on the H200 the reductions over the channels-last
# products of level2/44 and level2/42 ran in 0.444 and 3.053 ms at 8, against 0.466 and 3.160 at 4
# (eval/runs/push-h200-s44/NOTES.md, call 1).
SPLIT_PER_SM = 8


def default_params(view: tuple[int, int, int], op: str) -> dict[str, Any]:
    p, r, q = view
    if q == 1 and r <= MULTI_ROW_MAX and op not in ("argmax", "argmin"):
        block_r = next_pow2(r)
        params = {"BLOCK_R": block_r, "BLOCK_Q": 1, "BLOCK_P": max(1, min(next_pow2(p), 4096 // block_r)),
                  "num_warps": 4}
    elif q == 1:
        block_r = min(next_pow2(r), 2048)
        params = {"BLOCK_R": block_r, "BLOCK_Q": 1, "num_warps": 8 if block_r >= 2048 else 4}
    else:
        block_q = min(next_pow2(q), 64)
        params = {"BLOCK_R": max(1, min(next_pow2(r), 4096 // block_q)), "BLOCK_Q": block_q, "num_warps": 4}
    programs = p * -(-q // params["BLOCK_Q"])
    split = 1
    if op in STAGE2_OP and programs < 2 * SMS and r >= 8192:
        split = max(2, min(-(-SPLIT_PER_SM * SMS // programs), r // 2048, 1024))
    params["SPLIT"] = split
    return params


def _loop(io: FusedIO, op: str, rows_1d: bool, load_input: bool) -> list[str]:
    """The streaming loop over this program's share of R."""
    is_arg = op in ("argmax", "argmin")
    if rows_1d:
        rs, offs, mask, shape = "rs", "base + rs", "(rs < R)", "[BLOCK_R]"
        head = ["for start in range(r_begin, r_end, BLOCK_R):", "    rs = start + tl.arange(0, BLOCK_R)"]
    else:
        rs, offs, mask, shape = "rs[:, None]", "base + rs[:, None] * Q + qs[None, :]", \
            "(rs[:, None] < R) & (qs[None, :] < Q)", "[BLOCK_R, BLOCK_Q]"
        head = ["for start in range(r_begin, r_end, BLOCK_R):", "    rs = start + tl.arange(0, BLOCK_R)"]
    lines = [f"acc = tl.full({shape}, {INIT[op]}, tl.float32)"]
    if is_arg:  # int32 positions (R < 2**31): half the registers of int64, widened once at the store
        lines.append(f"idx = tl.zeros({shape}, tl.int32)")
    if op == "logsumexp":
        lines.append(f"s = tl.zeros({shape}, tl.float32)")
    lines += head
    lines.append(f"    offs = {offs}")
    lines.append(f"    mask = {mask} & ({rs} < r_end)")
    if load_input:
        load_lines, value = io.load_input("offs", "mask")
    else:
        load_lines, value = ["x = tl.load(in_ptr + offs, mask=mask, other=0.0).to(tl.float32)"], "x"
    lines += ["    " + ln for ln in load_lines]
    lines.append(f"    x = tl.where(mask, {value}, {INIT[op]})")
    if is_arg:
        cmp = ">" if op == "argmax" else "<"
        lines += [f"    better = x {cmp} acc", "    acc = tl.where(better, x, acc)",
                  f"    idx = tl.where(better, {rs} + tl.zeros({shape}, tl.int32), idx)"]
    elif op == "logsumexp":
        lines += ONLINE_LSE
    else:
        lines.append(f"    acc = {COMBINE[op]}")
    return lines


def _finish(op: str, rows_1d: bool) -> list[str]:
    if op in ("argmax", "argmin"):
        pick = "tl.max" if op == "argmax" else "tl.min"
        best = "best" if rows_1d else "best[None, :]"
        return [f"best = {pick}(acc, axis=0)",
                f"ties = tl.where(acc == {best}, idx, 2147483647)",
                "result = tl.min(ties, axis=0)"]
    if op == "logsumexp":
        return FINISH_LSE
    return [f"result = {FINAL[op].format(a=0)}"]


def channels_last_view(region: Region, graph: Graph) -> tuple[int, int, int] | None:
    """The (P, R, Q) view of cuDNN's channels-last output when the reduction runs over the spatial dims
    (N, spatial, C) or over the channels (N * spatial, C, 1) of a convolution product it adopted
    (fused_io.adopted_channels_last): the kernel reads the product as it lies, C contiguous, instead of
    having cuDNN transpose it to NCHW first. Either way the results come out in the order of the NCHW result."""
    if region.kind != "reduce" or adopted_channels_last(region, graph) is None:
        return None
    shape = tuple(region.extra["adopted"].shape)
    n, c, inner = shape[0], shape[1], math.prod(shape[2:])
    views = {(n * c, inner, 1): (n, inner, c), (n, c, inner): (n * inner, c, 1)}  # spatial dims; channels
    if region.extra["view"] not in views or region.extra["reduce"] not in (*STAGE2_OP, "logsumexp"):
        return None
    return views[region.extra["view"]]


def reduce_unit(name: str, region: Region, graph: Graph, params: dict[str, Any], nhwc: bool = False) -> KernelUnit:
    view, op = region.extra["view"], region.extra["reduce"]
    nhwc_view = channels_last_view(region, graph) if nhwc else None
    perm = None
    if nhwc_view is not None:
        view, perm = nhwc_view, channels_last_order(len(region.prologue.domain))
    p_, r_, q_ = view
    p = {**default_params(view, op),
         **{k: v for k, v in params.items() if k in ("BLOCK_R", "BLOCK_Q", "BLOCK_P", "num_warps", "SPLIT")}}
    if op not in STAGE2_OP:
        p["SPLIT"] = 1
    io = FusedIO(region, graph, perm=perm, perm_out=False)
    if q_ == 1 and p.get("BLOCK_P", 1) > 1 and r_ <= p["BLOCK_R"]:
        return _rows_unit(name, region, io, op, (p_, r_), p)
    rows_1d = q_ == 1
    split = p["SPLIT"]
    chunk = split_chunk(r_, split, p["BLOCK_R"])
    wide = io.wide
    head = [f"pid_p = {program_id(0, wide)}", f"pid_q = {program_id(1, wide)}", f"pid_s = {program_id(2, wide)}",
            "r_begin = pid_s * CHUNK", "r_end = tl.minimum(r_begin + CHUNK, R)",
            "base = pid_p * R * Q"]
    if rows_1d:
        head.append("qs = tl.arange(0, 1)")
    else:
        head.append("qs = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)")
    body = head + _loop(io, op, rows_1d, True) + _finish(op, rows_1d)
    if op == "mean" and split == 1:
        body.append(f"result = result * {1.0 / r_!r}")
    sizes = f"R={r_}, Q={q_}, CHUNK={chunk}"
    meta = f"BLOCK_R={p['BLOCK_R']}, BLOCK_Q={p['BLOCK_Q']}, num_warps={p['num_warps']}"
    grid = f"({p_}, {-(-q_ // p['BLOCK_Q'])}, {split})"
    if rows_1d:
        body.append("result = result + tl.zeros([1], result.dtype)")
    if split == 1:
        body += io.store_result("result", "pid_p * Q + qs", "qs < Q")
        kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, R: tl.constexpr, Q: tl.constexpr, "
                  "CHUNK: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):\n"
                  f'    """{op} over R of a (P, R, Q) view, one (p, q-block) per program."""\n{indent(body, 4)}\n')
        if op == "prod":
            kernel = MULTIPLY_HELPER + "\n" + kernel
        launcher = io.launcher(name, grid, sizes, launch_opts=meta)
        return io.unit(name, kernel, launcher, {k: p[k] for k in ("BLOCK_R", "BLOCK_Q", "num_warps", "SPLIT")})
    # split: stage 1 writes partials (P, SPLIT, Q); stage 2 reduces them over SPLIT
    body.append("tl.store(ws_ptr + (pid_p * SPLIT + pid_s) * Q + qs, result, mask=qs < Q)")
    stage1 = (f"@triton.jit\ndef {name}_partial({io.input_ptrs()}, "
              "ws_ptr, R: tl.constexpr, Q: tl.constexpr, CHUNK: tl.constexpr, SPLIT: tl.constexpr, "
              "BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):\n"
              f'    """Stage 1 of a split {op}: partial results of one CHUNK of R each."""\n{indent(body, 4)}\n')
    op2 = STAGE2_OP[op]
    block_s = min(next_pow2(split), 1024) if rows_1d else max(1, min(next_pow2(split), 4096 // p["BLOCK_Q"]))
    body2 = [f"pid_p = {program_id(0, wide)}", f"pid_q = {program_id(1, wide)}", "r_begin = 0", "r_end = R", "base = pid_p * R * Q",
             "qs = tl.arange(0, 1)" if rows_1d else "qs = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)"]
    body2 += _loop(io, op2, rows_1d, False) + _finish(op2, rows_1d)
    if op == "mean":
        body2.append(f"result = result * {1.0 / r_!r}")
    if rows_1d:
        body2.append("result = result + tl.zeros([1], result.dtype)")
    body2 += io.store_result("result", "pid_p * Q + qs", "qs < Q")
    stage2 = (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['in_ptr'])}, R: tl.constexpr, Q: tl.constexpr, "
              "BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):\n"
              f'    """Stage 2 of a split {op}: combine the SPLIT partials of each output."""\n{indent(body2, 4)}\n')
    kernel = (MULTIPLY_HELPER + "\n" if op == "prod" else "") + stage1 + "\n" + stage2
    names = io.operand_names()
    before = [f"ws = torch.empty(({p_ * split * q_},), device={names[0]}.device, dtype=torch.float32)",
              f"{name}_partial[{grid}]({', '.join(names)}, ws, {sizes}, SPLIT={split}, {meta})"]
    launcher = io.launcher(name, f"({p_}, {-(-q_ // p['BLOCK_Q'])})", f"R={split}, Q={q_}", before,
                           extra_args=["ws"], launch_opts=f"BLOCK_R={block_s}, BLOCK_Q={p['BLOCK_Q']}, num_warps=4")
    return io.unit(name, kernel, launcher, {k: p[k] for k in ("BLOCK_R", "BLOCK_Q", "num_warps", "SPLIT")})


def _rows_unit(name: str, region: Region, io: FusedIO, op: str, view: tuple[int, int],
               p: dict[str, Any]) -> KernelUnit:
    """Short contiguous rows (a reduction over the channels of channels-last memory, over a last dim of a
    few hundred): BLOCK_P whole rows per program as one [BLOCK_P, BLOCK_R] tile, instead of a program per
    row that moves a few hundred bytes."""
    p_, r_ = view
    body = [f"rows = {program_id(0, io.wide)} * BLOCK_P + tl.arange(0, BLOCK_P)", "cols = tl.arange(0, BLOCK_R)",
            "offs = rows[:, None] * R + cols[None, :]", "mask = (rows[:, None] < P) & (cols[None, :] < R)"]
    load, value = io.load_input("offs", "mask")
    body += load + [f"x = tl.where(mask, {value}, {INIT[op]})"]
    if op == "logsumexp":
        body += ["m = tl.max(x, axis=1)", "m = tl.where(m == float('-inf'), 0.0, m)",
                 "result = m + tl.log(tl.sum(tl.exp(x - m[:, None]), axis=1))"]
    else:
        body += ["acc = x", f"result = {FINAL[op].format(a=1)}"]
    if op == "mean":
        body.append(f"result = result * {1.0 / r_!r}")
    body += io.store_result("result", "rows", "rows < P")
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, P: tl.constexpr, R: tl.constexpr, "
              "BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr):\n"
              f'    """{op} of BLOCK_P rows of R contiguous values each."""\n{indent(body, 4)}\n')
    if op == "prod":
        kernel = MULTIPLY_HELPER + "\n" + kernel
    launcher = io.launcher(name, f"({-(-p_ // p['BLOCK_P'])},)", f"P={p_}, R={r_}",
                           launch_opts=f"BLOCK_P={p['BLOCK_P']}, BLOCK_R={p['BLOCK_R']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {k: p[k] for k in ("BLOCK_P", "BLOCK_R", "num_warps")})


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return reduce_unit(name, region, how.graph, how.params, nhwc=how.nhwc)


class TritonReduction(AnchorRecipe):
    id = "triton_reduction"
    summary = ("sum/mean/max/min/amax/amin/argmax/argmin/prod/logsumexp over contiguous dims, split when rows "
               "are few")
    templates = {"reduce": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return reduce_region(node, graph)

    def absent_reason(self) -> str:
        return "no reduction over a contiguous range of dimensions"


RECIPE = TritonReduction()
