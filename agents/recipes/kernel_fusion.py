"""kernel_fusion: a chain (a DAG) of pointwise ops as one Triton kernel over a flat domain.

One read of each input, one write of each output, no intermediates in device memory. With
vectorized access each thread handles contiguous runs (16-byte accesses for fp32); in NHWC
regions the flat domain is walked in channels_last memory order. The same recipe attaches
pointwise chains to other regions as their prologue (computing a reduction's input on the fly)
or epilogue (applied to a result still in registers), through reshapes too (a view keeps the
logical order); a cuBLAS/cuDNN product read only by such a region is computed without its bias,
which the region's prologue adds as it reads; see builder._group_and_attach and _adopt_products.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.autotune_launch import autotune_decorator, launch_options
from kskill.agents.recipes.base import Lowering, Recipe
from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.regions import Region, is_pointwise
from kskill.agents.recipes.templates.common import (
    Body, body_comment, channels_last_order, emit_body, indent, numel, program_id, wide_index)
from kskill.agents.recipes.templates.unit import (
    KernelUnit, alloc, arg_name, pointer_args, prepare, store_cast)


def default_params(domain: tuple[int, ...], vectorized: bool) -> dict[str, Any]:
    n = numel(domain)
    if vectorized:
        block = 4096 if n >= (1 << 22) else 1024
        return {"BLOCK": block, "num_warps": 8 if block >= 4096 else 4}
    return {"BLOCK": 1024, "num_warps": 4}


def pointwise_unit(name: str, body: Body, graph: Graph, params: dict[str, Any], *, nhwc: bool = False,
                   vectorized: bool = False, autotune: bool = False) -> KernelUnit:
    """One kernel computing every output of `body` (all of shape body.domain)."""
    params = {**default_params(body.domain, vectorized), **params}
    inputs = body.external(graph)
    ptrs = pointer_args(inputs)
    out_nodes = [graph.by_name[o] for o in body.outputs]
    perm = channels_last_order(len(body.domain), nhwc)
    emitted = emit_body(body, graph, ptrs, "offs", "mask", perm=perm)
    n = numel(body.domain)
    lines = [f"offs = {program_id(0, wide_index(body.domain))} * BLOCK + tl.arange(0, BLOCK)"]
    if vectorized:
        lines.append("offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)")
    lines.append("mask = offs < NUMEL")
    lines += emitted.lines
    for i, node in enumerate(out_nodes):
        lines.append(f"tl.store(out{i}_ptr + offs, {emitted.var_of[node.name]}.to({store_cast(node.dtype)}), "
                     "mask=mask)")
    args = [ptrs[k] for k in ptrs] + [f"out{i}_ptr" for i in range(len(out_nodes))]
    decorator = autotune_decorator("pointwise", ["NUMEL"]) if autotune else ""
    kernel = (f"{decorator}@triton.jit\n"
              f"def {name}_kernel({', '.join(args)}, NUMEL: tl.constexpr, BLOCK: tl.constexpr):\n"
              f'    """Fused pointwise: {body_comment(body)}."""\n'
              f"{indent(lines, 4)}\n")
    like = arg_name(inputs[0])
    launch = [f"def {name}({', '.join(arg_name(op) for op in inputs)}):"]
    for op in inputs:
        launch.append(f"    {arg_name(op)} = {prepare(op, graph, body.domain, nhwc, body_shape(body, graph, op))}")
    for i, node in enumerate(out_nodes):
        launch.append(f"    out{i} = {alloc(node.shape, node.dtype, like, nhwc)}")
    call_args = [arg_name(op) for op in inputs] + [f"out{i}" for i in range(len(out_nodes))]
    opts = launch_options(params, autotune, ["BLOCK"], [f"NUMEL={n}"])
    grid = "lambda meta: (triton.cdiv(%d, meta['BLOCK']),)" % n if autotune else f"(triton.cdiv({n}, {params['BLOCK']}),)"
    launch.append(f"    {name}_kernel[{grid}]({', '.join(call_args)}, {opts})")
    launch.append(f"    return {', '.join(f'out{i}' for i in range(len(out_nodes)))}")
    used = {k: params[k] for k in ("BLOCK", "num_warps")} if not autotune else {"autotune": "pointwise"}
    return KernelUnit(name, kernel, "\n".join(launch) + "\n", inputs, list(body.outputs), used,
                      "kernel_fusion")


def body_shape(body: Body, graph: Graph, operand: Any) -> tuple[int, ...]:
    """The shape the body indexes an operand with (a bias may be viewed as C x 1 x 1)."""
    for node in body.nodes:
        for index, arg in enumerate(node.args):
            if arg == operand and index in node.attrs.get("arg_shapes", {}):
                return tuple(node.attrs["arg_shapes"][index])
    return tuple(graph.shape_of(operand) or ())


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return pointwise_unit(name, region.body, how.graph, how.params, vectorized=how.vectorized,
                          autotune=how.autotune)


class KernelFusion(Recipe):
    id = "kernel_fusion"
    summary = "fuse chains of pointwise ops (and prologues/epilogues of Triton regions) into one kernel"
    templates = {"pointwise": lower}

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if is_pointwise(n, graph)]

    def absent_reason(self) -> str:
        return "no fusible pointwise op (float dtype, broadcastable operands) in the reference"


RECIPE = KernelFusion()
