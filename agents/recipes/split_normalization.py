"""split_normalization: layer, group and instance norm as a statistics kernel and a pointwise pass.

The norm node is rewritten into `mean, rstd = statistics(x)`, one Triton kernel (Chan-merged row
statistics, split across programs when rows are few and long), and `(x - mean) * rstd [* weight]
[+ bias]` as plain pointwise nodes. The statistics are written once per channel, shaped so they
broadcast against x: (N, C, 1, ...) for group and instance norm, (rows, 1, ...) for layer norm.
The pointwise nodes are then what kernel_fusion groups with the work around the norm, and what a
reduction, pooling or softmax kernel computes as it loads its input: when the norm's result only
feeds such an operator (a group norm, activations, then a logsumexp over the channels), the
normalized tensor is never written, and the norm's input is read twice (statistics, then the fused
rest) instead of two or three times plus a write and a read back. Without kernel_fusion the
pointwise pass is a kernel of its own. float32 only: the statistics are fp32, as the pass computes.
"""

from __future__ import annotations

from typing import Any

import torch

from kskill.agents.recipes.base import Lowering, Recipe
from kskill.agents.recipes.fused_normalization import SPLIT_MIN, norm_region
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.batch_norm import CHAN_MERGE, PARTS_MERGE, TILE_STATS, load_parts
from kskill.agents.recipes.templates.common import (
    TARGET_SMS as SMS, Body, indent, next_pow2, program_id, split_chunk, wide_index)
from kskill.agents.recipes.templates.unit import KernelUnit, arg_name

STATS_OP = "norm_statistics"
STATS_BLOCK = 2048  # a statistics tile


def split_site(node: Node, graph: Graph) -> dict[str, Any] | None:
    """How the norm splits: its (rows, row length) view (fused_normalization's, which also settles which norm
    modules are supported), statistics written per row (`per_row`), their broadcast shape, and the shape the
    affine parameters broadcast as; None where it does not split. A norm called as a function is left alone:
    its weight and bias are operands, not the module's parameters the pass reads."""
    if node.dtype != torch.float32 or node.op not in ("layer_norm", "group_norm", "instance_norm"):
        return None
    region = norm_region(node, graph)
    shape = tuple(node.shape or ())
    if region is None or not isinstance(node.args[0], (Ref, Attr)) or (node.op != "layer_norm" and len(shape) < 3):
        return None
    rows, length, _ = region.extra["view"]
    site = {"rows": rows, "length": length, "eps": region.extra["eps"]}
    if node.op == "layer_norm":
        k = len(node.attrs["normalized_shape"])
        return {**site, "per_row": 1, "stats_shape": shape[:-k] + (1,) * k, "affine_shape": shape[-k:]}
    spatial = (1,) * (len(shape) - 2)
    return {**site, "per_row": shape[0] * shape[1] // rows, "stats_shape": shape[:2] + spatial,
            "affine_shape": (shape[1],) + spatial}


def _fresh(graph: Graph, base: str) -> str:
    name, i = base, 1
    while name in graph.by_name:
        name, i = f"{base}_{i}", i + 1
    return name


def split(graph: Graph, norm: Node, site: dict[str, Any]) -> list[Node]:
    """The nodes that replace `norm`: statistics, rstd (the statistics kernel's second output), then
    the pointwise pass, whose last node keeps the norm's name so later code reads it unchanged."""
    x, shape, stats_shape = norm.args[0], tuple(norm.shape), site["stats_shape"]
    mean_name, rstd_name = _fresh(graph, f"{norm.name}_mean"), _fresh(graph, f"{norm.name}_rstd")
    attrs = {"rstd": rstd_name, **site}
    stats = Node(mean_name, STATS_OP, (x,), attrs, stats_shape, torch.float32)
    rstd = Node(rstd_name, STATS_OP + "_rstd", (Ref(mean_name),), {}, stats_shape, torch.float32)
    x_text = x.name if isinstance(x, Ref) else x.code
    steps: list[tuple[str, Any, tuple[int, ...] | None]] = [("sub", Ref(mean_name), stats_shape),
                                                            ("mul", Ref(rstd_name), stats_shape)]
    for key, op in (("weight", "mul"), ("bias", "add")):
        if norm.attrs.get(f"has_{key}"):
            steps.append((op, Attr(f"{norm.module}.{key}"), site["affine_shape"]))
    nodes, value = [stats, rstd], x
    for i, (op, operand, operand_shape) in enumerate(steps):
        last = i == len(steps) - 1
        name = norm.name if last else _fresh(graph, f"{norm.name}_{op}{i}")
        operand_text = operand.name if isinstance(operand, Ref) else f"{operand.code}.reshape{operand_shape}"
        value_text = value.name if isinstance(value, Ref) else x_text
        symbol = {"sub": "-", "mul": "*", "add": "+"}[op]
        nodes.append(Node(name, op, (value, operand), {"arg_shapes": {1: operand_shape}}, shape, norm.dtype,
                          f"{value_text} {symbol} {operand_text}"))
        value = Ref(name)
    stats.attrs["pass"] = [n.name for n in nodes[2:]]
    return nodes


def stats_unit(name: str, region: Region, how: Lowering) -> KernelUnit:
    """mean and rstd of each (rows, length) row, each written `per_row` times: one program per row,
    or SPLIT programs per row and a merging launch when rows are too few to fill the GPU."""
    node = region.anchor
    at, x = node.attrs, node.args[0]
    rows, length, per_row = at["rows"], at["length"], at["per_row"]
    block = min(next_pow2(length), STATS_BLOCK)
    default_split = max(1, min(-(-4 * SMS // rows), length // SPLIT_MIN, 256)) if length > block else 1
    p = {"BLOCK_R": block, "SPLIT": default_split, "num_warps": 8 if block >= 2048 else 4}
    p.update({k: v for k, v in how.params.items() if k in p})
    wide = wide_index(how.graph.shape_of(x))
    chunk = split_chunk(length, p["SPLIT"], p["BLOCK_R"])
    head = [f"row = {program_id(0, wide)}", f"s = {program_id(1, wide)}", "count = 0.0", "mean = 0.0", "m2 = 0.0"]
    loop = ["for start in range(s * CHUNK, tl.minimum(s * CHUNK + CHUNK, R), BLOCK_R):",
            "    cols = start + tl.arange(0, BLOCK_R)", "    mask = cols < R",
            "    x = tl.load(x_ptr + row * R + cols, mask=mask, other=0.0).to(tl.float32)"]
    loop += ["    " + ln for ln in TILE_STATS + CHAN_MERGE]
    write = [f"rstd = tl.math.rsqrt(m2 / R + {at['eps']!r})", "e = tl.arange(0, BLOCK_E)",
             "tl.store(mean_ptr + row * E + e, mean + tl.zeros([BLOCK_E], tl.float32), mask=e < E)",
             "tl.store(rstd_ptr + row * E + e, rstd + tl.zeros([BLOCK_E], tl.float32), mask=e < E)"]
    sizes = "R: tl.constexpr, CHUNK: tl.constexpr, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, E: tl.constexpr, " \
            "BLOCK_R: tl.constexpr, BLOCK_E: tl.constexpr"
    consts = f"R={length}, CHUNK={chunk}, SPLIT={p['SPLIT']}, SPLIT_P2={next_pow2(p['SPLIT'])}, E={per_row}, " \
             f"BLOCK_R={p['BLOCK_R']}, BLOCK_E={next_pow2(per_row)}"
    shape, xa = tuple(node.shape), arg_name(x)
    src = [f"def {name}({xa}):", f"    {xa} = {xa}.contiguous()",
           f"    mean = torch.empty({shape!r}, device={xa}.device, dtype=torch.float32)",
           f"    rstd = torch.empty({shape!r}, device={xa}.device, dtype=torch.float32)"]
    if p["SPLIT"] == 1:
        kernel = (f"@triton.jit\ndef {name}_kernel(x_ptr, mean_ptr, rstd_ptr, {sizes}):\n"
                  f'    """{node.name}: Chan-merged statistics of one row, written once per channel."""\n'
                  f"{indent(head + loop + write, 4)}\n")
        src.append(f"    {name}_kernel[({rows}, 1)]({xa}, mean, rstd, {consts}, num_warps={p['num_warps']})")
    else:
        partial = head + loop + [f"tl.store(ws_ptr + (row * SPLIT + s) * 3 + {k}, {v})"
                                 for k, v in enumerate(("count", "mean", "m2"))]
        merge = head[:1] + load_parts("ws_ptr", "row * SPLIT") + PARTS_MERGE + write
        kernel = (f"@triton.jit\ndef {name}_partial(x_ptr, ws_ptr, {sizes}):\n"
                  f'    """{node.name}: Chan-merged (count, mean, M2) of one chunk of a row."""\n'
                  f"{indent(partial, 4)}\n\n"
                  f"@triton.jit\ndef {name}_kernel(ws_ptr, mean_ptr, rstd_ptr, {sizes}):\n"
                  f'    """{node.name}: a row\'s partial statistics merged and written once per channel."""\n'
                  f"{indent(merge, 4)}\n")
        src += [f"    ws = torch.empty(({rows * p['SPLIT'] * 3},), device={xa}.device, dtype=torch.float32)",
                f"    {name}_partial[({rows}, {p['SPLIT']})]({xa}, ws, {consts}, num_warps={p['num_warps']})",
                f"    {name}_kernel[({rows}, 1)](ws, mean, rstd, {consts}, num_warps=1)"]
    src.append("    return mean, rstd")
    return KernelUnit(name, kernel, "\n".join(src) + "\n", [x], [node.name, at["rstd"]], p, "split_normalization")


class SplitNormalization(Recipe):
    id = "split_normalization"
    summary = ("layer/group/instance norm as a statistics kernel and a pointwise affine pass, which fuses into the "
               "pointwise, reduction or pooling work around it")
    templates = {"norm_statistics": stats_unit}

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if split_site(n, graph) is not None]

    def absent_reason(self) -> str:
        return "no float32 layer, group or instance norm (without running statistics)"

    def rewrite(self, ctx: Any) -> None:
        graph = ctx.graph
        for norm in list(graph.nodes):
            site = split_site(norm, graph)
            if site is None:
                continue
            at = graph.nodes.index(norm)
            graph.nodes[at:at + 1] = split(graph, norm, site)
            graph.reindex()
            ctx.mark(self.id)

    def claim(self, ctx: Any) -> None:
        """The statistics kernels; without kernel_fusion, also each pointwise pass as a kernel of its own."""
        graph = ctx.graph
        for node in graph.nodes:
            if node.op != STATS_OP:
                continue
            ctx.regions.append(Region("norm_statistics", self.id, node, extra={"covers": [node.attrs["rstd"]]}))
            if not ctx.uses("kernel_fusion"):
                members = [graph.by_name[name] for name in node.attrs["pass"]]
                body = Body(members, tuple(members[0].shape), [members[-1].name])
                ctx.regions.append(Region("pointwise", self.id, body=body))


RECIPE = SplitNormalization()
