"""Build a candidate: capture the reference, let each technique claim its regions, emit ModelNew.

The order of work is fixed so that a candidate depends only on (reference, techniques, params):
graph rewrites (algebraic_simplification) first, then anchor regions claimed technique by
technique in the order given, then pointwise chains grouped and attached as prologues and
epilogues, then framework switches (channels_last, tf32, cuda_graph) around the forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kskill.agents.recipes.base import Lowering
from kskill.agents.recipes.capture import capture
from kskill.agents.recipes.emit import ForwardPlan, render
from kskill.agents.recipes.errors import RecipeNotApplicable
from kskill.agents.recipes.graph import Graph, Node, Ref
from kskill.agents.recipes.regions import (
    ADOPTING_KINDS, ROW_MAJOR_KINDS, Region, body_feeding, group_pointwise, is_pointwise, placement_ok,
    reshapes_after, reshapes_before, single_consumer_body)
from kskill.agents.recipes.templates.common import Body
from kskill.agents.recipes.templates.unit import KernelUnit


@dataclass
class GeneratedCandidate:
    """A standalone ModelNew file and what went into it."""

    source: str
    applied: list[str]
    params: dict[str, Any]
    notes: list[str]


@dataclass
class BuildContext:
    """Shared state while recipes claim regions of one graph."""

    graph: Graph
    techniques: list[str]
    params: dict[str, Any]
    regions: list[Region] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    chosen: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)

    def claimed(self) -> set[str]:
        out: set[str] = set()
        for r in self.regions:
            out |= r.names()
        return out

    def mark(self, technique: str) -> None:
        if technique not in self.applied:
            self.applied.append(technique)

    def uses(self, technique: str) -> bool:
        return technique in self.techniques


def build_candidate(problem_source: str, techniques: Sequence[str],
                    params: Mapping[str, Any] | None = None) -> GeneratedCandidate:
    """A ModelNew for the reference with `techniques` applied in order (see RECIPES)."""
    from kskill.agents.recipes.registry import RECIPES

    ordered = list(dict.fromkeys(techniques))
    unknown = [t for t in ordered if t not in RECIPES]
    if unknown:
        raise RecipeNotApplicable(f"unknown technique(s) {unknown}; known: {sorted(RECIPES)}")
    graph = capture(problem_source)
    ctx = BuildContext(graph, ordered, dict(params or {}))
    for technique in ordered:
        RECIPES[technique].rewrite(ctx)
    for technique in ordered:
        RECIPES[technique].claim(ctx)
    _group_and_attach(ctx)
    for technique in ordered:
        RECIPES[technique].configure(ctx)
    plan = _forward_plan(ctx)
    applied = [t for t in ordered if t in ctx.applied]
    declined = [t for t in ordered if t not in ctx.applied]
    notes = list(ctx.notes)
    if declined:
        notes.append(f"not applied (nothing to do here): {', '.join(declined)}")
    source = render(problem_source, ctx.graph, plan, applied, notes)
    return GeneratedCandidate(source, applied, dict(ctx.chosen), notes)


def _group_and_attach(ctx: BuildContext) -> None:
    """Pointwise chains: attached to a region as epilogue/prologue, or their own kernel."""
    graph = ctx.graph
    fuse = ctx.uses("kernel_fusion")
    attaching = fuse or any(r.kind == "gemm" for r in ctx.regions)  # a gemm region takes its epilogue
    claimed = ctx.claimed()
    allowed = {n.name for n in graph.nodes if n.name not in claimed and is_pointwise(n, graph)}
    bodies = group_pointwise(graph, allowed) if attaching else []  # chains only where something takes them
    used: set[int] = set()
    _adopt_products(ctx, bodies, used, fuse)
    if attaching:
        _attach(ctx, bodies, used, fuse)
    if "gemm_epilogue_fusion" in ctx.applied:  # marked when it claimed; applied only where a product keeps work
        ctx.applied.remove("gemm_epilogue_fusion")
    for region in ctx.regions:
        if region.kind == "gemm" and (region.epilogue is not None or region.extra.get("has_bias_work")):
            ctx.mark("gemm_epilogue_fusion")
        if fuse and region.kind != "gemm" and (region.prologue is not None or region.epilogue is not None):
            ctx.mark("kernel_fusion")
    ctx.regions = [r for r in ctx.regions
                   if not (r.kind == "gemm" and r.epilogue is None and not r.extra.get("has_bias_work"))]


def _attach(ctx: BuildContext, bodies: list[Body], used: set[int], fuse: bool) -> None:
    """Each region takes the chain after it as its epilogue, and (with kernel_fusion) the chain that
    computes its input as its prologue; the chains left over become kernels of their own."""
    graph = ctx.graph
    for region in list(ctx.regions):
        anchor = region.anchor
        if anchor is None:
            continue
        can_epilogue = fuse or region.kind == "gemm"
        row_major = region.kind in ROW_MAJOR_KINDS  # reached through reshapes too (x.view(b, c, -1), ...)
        if can_epilogue and region.extra.get("epilogue_ok", True) and region.epilogue is None:
            out_name = region.extra.get("output", anchor.name)
            views = reshapes_after(graph, out_name) if row_major else []
            end = views[-1] if views else out_name
            body = single_consumer_body(bodies, end, graph)
            if body is not None and id(body) not in used and body.domain == tuple(graph.by_name[end].shape):
                if _fits(graph, region, epilogue=body, views=views):
                    region.epilogue = body
                    used.add(id(body))
                    _cover(region, views)
                    if views:
                        region.extra["epilogue_input"] = end
        operand = region.extra.get("prologue_operand")
        if fuse and operand is not None and region.prologue is None:
            views, source, consumer = reshapes_before(graph, operand, anchor) if row_major else ([], operand, anchor)
            body = body_feeding(bodies, consumer, source, graph)
            if body is not None and id(body) not in used and body.domain == tuple(graph.shape_of(source) or ()):
                if _fits(graph, region, prologue=body, views=views):
                    region.prologue = body
                    used.add(id(body))
                    _cover(region, views)
    if fuse:
        for body in bodies:
            if id(body) not in used and body.outputs:
                ctx.regions.append(Region("pointwise", "kernel_fusion", body=body))
                ctx.mark("kernel_fusion")


def _adopt_products(ctx: BuildContext, bodies: list[Body], used: set[int], fuse: bool) -> None:
    """A library product (cuBLAS/cuDNN) read only by a row-major region, directly or through reshapes
    and (with kernel_fusion) a pointwise chain, is computed without its bias, and the region reads
    the raw product: bias and chain become its prologue. The product is then written once and read
    by the region, instead of written, read and written again by a bias or epilogue pass first."""
    from kskill.agents.recipes.gemm_epilogue_fusion import epilogue_body, gemm_region

    graph = ctx.graph
    if ctx.params.get("gemm_backend", "cublas") != "cublas":  # a Triton GEMM keeps its epilogue in registers
        return
    claimed = ctx.claimed()
    gemms = {r.anchor.name: r for r in ctx.regions if r.kind == "gemm"}
    products = {n.name for n in graph.nodes if n.name not in claimed and gemm_region(n, graph) is not None}
    products |= {name for name, r in gemms.items() if r.epilogue is None}
    for region in list(ctx.regions):
        operand = region.extra.get("prologue_operand")
        if region.kind not in ADOPTING_KINDS or operand is None or region.prologue is not None:
            continue
        views, source, consumer = reshapes_before(graph, operand, region.anchor)
        chain = body_feeding(bodies, consumer, source, graph) if fuse else None
        tail = None
        if chain is not None:
            read = [o.name for o in chain.external(graph) if isinstance(o, Ref) and o.name in products]
            product = read[0] if len(read) == 1 else None
            if id(chain) in used or product is None or chain.domain != tuple(graph.by_name[product].shape) \
                    or not set(graph.users(product)) <= chain.names():
                continue
        elif isinstance(source, Ref) and source.name in products and graph.users(source.name) == [consumer.name]:
            product = source.name
        elif fuse and isinstance(source, Ref) and source.name in products and \
                (tail := _reread_tail(region, source.name, views, bodies, used, graph)) is not None:
            product = source.name
        else:
            continue
        anchor = graph.by_name[product]
        conv_bias = anchor.op.startswith("conv") and anchor.attrs.get("has_bias")
        if graph.is_output(product) or not (chain is not None or conv_bias):
            continue  # nothing the region saves by reading the product raw
        prologue = epilogue_body(anchor, graph, chain)
        if not _fits(graph, region, prologue=prologue, epilogue=tail, views=views):
            continue
        if tail is not None:
            region.extra["reread"] = product  # _attach gives the region `tail` as its epilogue next
        region.prologue = prologue
        region.extra["adopted"] = anchor
        _cover(region, views)
        products.discard(product)
        if product in gemms:
            ctx.regions.remove(gemms.pop(product))
        if chain is not None:
            used.add(id(chain))


def _reread_tail(region: Region, product: str, views: list[str], bodies: list[Body], used: set[int],
                 graph: Graph) -> Body | None:
    """The chain that will be a row norm's epilogue, when the product the norm reads directly has its other
    users all in it (a residual `conv + f(norm(conv))`): then the norm can adopt the product all the same, and
    the epilogue reads the product's value from the registers the norm loaded it into (the raw product plus
    its bias). The product is written once, by cuBLAS/cuDNN, and read once. None where that does not hold."""
    if region.kind != "norm" or views:
        return None
    users = set(graph.users(product))
    tail = single_consumer_body(bodies, region.extra.get("output", region.anchor.name), graph)
    if (region.anchor.name in users and tail is not None and id(tail) not in used
            and users - {region.anchor.name} <= tail.names() and tail.domain == tuple(graph.by_name[product].shape)):
        return tail
    return None


def _cover(region: Region, views: list[str]) -> None:
    """The reshapes between a region and its prologue or epilogue are inside its kernel now."""
    if views:
        region.extra["covers"] = (*region.extra.get("covers", ()), *views)


def _fits(graph: Graph, region: Region, prologue: Body | None = None, epilogue: Body | None = None,
          views: Sequence[str] = ()) -> bool:
    covered = region.names() | set(views)
    for b in (prologue, epilogue):
        if b is not None:
            covered |= b.names()
    outputs = set(epilogue.outputs) if epilogue is not None else set(region.extra.get("outputs", []))
    if epilogue is None and region.epilogue is not None:
        outputs = set(region.epilogue.outputs)
    if not outputs:
        outputs = {region.extra.get("output", region.anchor.name)}
    return placement_ok(graph, covered, outputs)


def _forward_plan(ctx: BuildContext) -> ForwardPlan:
    graph = ctx.graph
    plan = ForwardPlan(lines=[], units=[])
    owner: dict[str, Region] = {}
    for region in ctx.regions:
        for name in region.names():
            owner[name] = region
    placed: dict[int, int] = {}
    for region in ctx.regions:
        placed[id(region)] = max(graph.position[n] for n in region.names() if n in graph.position)
    counter = 0
    for node in graph.nodes:
        if node.op == "input":
            continue
        region = owner.get(node.name)
        if region is None:
            plan.lines.extend(_torch_lines(node, ctx))
            continue
        if placed[id(region)] != graph.position[node.name]:
            continue
        unit = _lower(f"_{region.kind}_{counter}", region, ctx)
        counter += 1
        ctx.chosen[unit.name] = unit.params
        plan.units.append(unit)
        plan.lines.append(unit.call_line())
    plan.cuda_graph = bool(ctx.flags.get("cuda_graph"))
    plan.tf32_matmul = bool(ctx.flags.get("tf32_nodes"))
    plan.helpers = list(ctx.flags.get("helpers", []))
    return plan


def _lower(name: str, region: Region, ctx: BuildContext) -> KernelUnit:
    """The region's kernels, by the template registered for its kind, with the params chosen for
    this unit (`params["launch"][name]`, e.g. from an earlier build or a repair) on top of the
    global ones (`gemm_backend`, ...) on top of the template's defaults."""
    from kskill.agents.recipes.registry import TEMPLATES

    if region.kind not in TEMPLATES:
        raise ValueError(f"no template for region kind {region.kind!r}")
    params = {k: v for k, v in ctx.params.items() if k not in ("launch", "rtol")}
    params.update(ctx.params.get("launch", {}).get(name, {}))
    how = Lowering(ctx.graph, params, nhwc=bool(ctx.flags.get("nhwc")), vectorized=bool(ctx.flags.get("vectorized")),
                   autotune=bool(ctx.flags.get("autotune")))
    return TEMPLATES[region.kind](name, region, how)


def _torch_lines(node: Node, ctx: BuildContext) -> list[str]:
    code = ctx.flags.get("code_override", {}).get(node.name, node.code)
    if node.name in ctx.flags.get("tf32_nodes", set()):
        return ["with _tf32_matmuls():", f"    {node.name} = {code}"]
    return [f"{node.name} = {code}"]
