"""The kernels the losses share: the fixed-order sum that ends every loss (deterministic, no atomics)
and its launcher, and the row loss: one program per row sweeps the row's columns once, accumulating
a few sums (dot products, squared norms, distances), turns them into the row's value, applies the
pointwise work between that value and the final reduction, and stores one float per row.

What the sums and the row's value are is a `RowLoss`: fused_loss builds one for each loss it lowers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import Body, emit_body, indent, next_pow2, operand_key, program_id
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit, prepare

SUM_KERNEL = '''@triton.jit
def {name}_sum(values_ptr, counts_ptr, out_ptr, N: tl.constexpr, SCALE: tl.constexpr, COUNTED: tl.constexpr,
               BLOCK: tl.constexpr):
    """Adds the partials in a fixed order: SCALE * sum, or sum / sum(counts) when COUNTED."""
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        total += tl.load(values_ptr + offs, mask=offs < N, other=0.0)
        if COUNTED:
            count += tl.load(counts_ptr + offs, mask=offs < N, other=0.0)
    if COUNTED:
        tl.store(out_ptr, tl.sum(total, axis=0) / tl.sum(count, axis=0))
    else:
        tl.store(out_ptr, tl.sum(total, axis=0) * SCALE)
'''


@dataclass
class RowLoss:
    """One row loss: the (rows, D) operands read as x0, x1, ...; the sums accumulated over the row
    (Triton expressions of the loaded x's, zero on masked lanes); the statements turning the sums
    s0, s1, ... into the row's value `r`; the row-shaped operands those statements read (as y0, ...);
    and the pointwise work applied to `r` (with the node whose value `r` is) before the reduction."""

    operands: list[Any]
    sums: list[str]
    finish: list[str]
    row_operands: list[Any] = field(default_factory=list)
    body: Body | None = None
    value_of: str = ""
    scale: float = 1.0


def default_params(cols: int) -> dict[str, Any]:
    block = min(next_pow2(cols), 4096)
    return {"BLOCK_D": block, "num_warps": 8 if block >= 2048 else 4}


def row_loss_unit(name: str, region: Region, graph: Graph, spec: RowLoss, params: dict[str, Any]) -> KernelUnit:
    rows, cols = graph.shape_of(spec.operands[0])
    p = {**default_params(cols), **{k: v for k, v in params.items() if k in ("BLOCK_D", "num_warps")}}
    io = FusedIO(region, graph)
    xs = [io.add(o) for o in spec.operands]
    ys = [io.add(o) for o in spec.row_operands]
    lines = [f"row = {program_id(0, io.wide)}", "cols = tl.arange(0, BLOCK_D)"]
    lines += [f"acc{i} = tl.zeros([BLOCK_D], tl.float32)" for i in range(len(spec.sums))]
    lines += ["for start in range(0, D, BLOCK_D):", "    offs = start + cols", "    mask = offs < D"]
    lines += [f"    x{i} = tl.load({ptr} + row * D + offs, mask=mask, other=0.0).to(tl.float32)"
              for i, ptr in enumerate(xs)]
    lines += [f"    acc{i} += tl.where(mask, {expr}, 0.0)" for i, expr in enumerate(spec.sums)]
    lines += [f"s{i} = tl.sum(acc{i}, axis=0)" for i in range(len(spec.sums))]
    lines += [f"y{i} = tl.load({ptr} + row).to(tl.float32)" for i, ptr in enumerate(ys)]
    lines += spec.finish
    value = "r"
    if spec.body is not None:
        for operand in spec.body.external(graph):
            if not (hasattr(operand, "name") and operand.name == spec.value_of):
                io.add(operand)
        emitted = emit_body(spec.body, graph, io.ptrs, "row", "row < ROWS", provided={spec.value_of: "r"}, prefix="b")
        lines += emitted.lines
        value = emitted.var_of[spec.body.outputs[0]]
    lines.append(f"tl.store(loss_ptr + row, {value})")
    ptrs = [io.ptrs[operand_key(o)] for o in io.operands] + ["loss_ptr"]
    kernel = (f"@triton.jit\ndef {name}_rows({', '.join(ptrs)}, ROWS: tl.constexpr, D: tl.constexpr, "
              f"BLOCK_D: tl.constexpr):\n"
              f'    """{region.anchor.op}: the loss of one row from sums over its columns, read once."""\n'
              f"{indent(lines, 4)}\n\n" + SUM_KERNEL.format(name=name))
    launcher = partials_launcher(name, io, graph, "rows", rows, f"ROWS={rows}, D={cols}, BLOCK_D={p['BLOCK_D']}, "
                                 f"num_warps={p['num_warps']}", spec.scale, region.anchor.dtype)
    return KernelUnit(name, kernel, launcher, list(io.operands), [region.anchor.name],
                      {"BLOCK_D": p["BLOCK_D"], "num_warps": p["num_warps"]}, region.technique)


def partials_launcher(name: str, io: FusedIO, graph: Graph, stage: str, partials: int, sizes: str, scale: float,
                      dtype: Any) -> str:
    """def name(operands): the operands made contiguous, kernel `{name}_{stage}` writing `partials` floats
    (one per program), then the fixed-order sum scaled by `scale` into a scalar of `dtype`."""
    names = io.operand_names()
    src = [f"def {name}({', '.join(names)}):"]
    src += [f"    {n} = {prepare(o, graph)}" for n, o in zip(names, io.operands)]
    src += [f"    partial = torch.empty(({partials},), device={names[0]}.device, dtype=torch.float32)",
            f"    {name}_{stage}[({partials},)]({', '.join(names)}, partial, {sizes})",
            f"    out = torch.empty((), device={names[0]}.device, dtype={dtype})",
            f"    {name}_sum[(1,)](partial, partial, out, N={partials}, SCALE={scale!r}, COUNTED=False, "
            f"BLOCK={min(next_pow2(partials), 4096)}, num_warps=4)",
            "    return out"]
    return "\n".join(src) + "\n"
