"""What every recipe is: the hooks the builder calls, and how a claimed region becomes kernels.

A recipe implements one Technique of the skill base (its id is the technique's `recipe` key).
The builder calls its hooks in fixed phases: `applicable(graph)` (cheap and static), `rewrite(ctx)`
(graph rewrites), `claim(ctx)` (anchor regions that become Triton kernels) and `configure(ctx)`
(framework-level switches). A recipe that claims regions names, in `templates`, the function
that lowers each kind of region it creates into a KernelUnit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kskill.agents.recipes.graph import Graph, Node
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.unit import KernelUnit


@dataclass(frozen=True)
class Applicability:
    """Whether a technique can be applied to a reference, and why (not)."""

    ok: bool
    reason: str


@dataclass(frozen=True)
class Lowering:
    """What a template needs beside its region: the graph, the launch params chosen for this unit,
    and the framework switches in force."""

    graph: Graph
    params: dict[str, Any]
    nhwc: bool = False
    vectorized: bool = False
    autotune: bool = False


Template = Callable[[str, Region, Lowering], KernelUnit]


class Recipe:
    """Base recipe: applies nowhere, changes nothing."""

    id = ""
    summary = ""
    templates: dict[str, Template] = {}

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        """`rtol`: the run's relative tolerance, for recipes whose error depends on it."""
        sites = self.sites(graph)
        if sites:
            return Applicability(True, f"{len(sites)} site(s): {', '.join(sites[:6])}")
        return Applicability(False, self.absent_reason())

    def sites(self, graph: Graph) -> list[str]:
        return []

    def absent_reason(self) -> str:
        return "nothing in the reference this technique applies to"

    def rewrite(self, ctx: Any) -> None:
        return None

    def claim(self, ctx: Any) -> None:
        return None

    def configure(self, ctx: Any) -> None:
        return None


class AnchorRecipe(Recipe):
    """A recipe that turns matching nodes into Triton regions."""

    def match(self, node: Node, graph: Graph) -> Region | None:
        raise NotImplementedError

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if self.match(n, graph) is not None]

    def without(self, region: Region, taken: set[str]) -> Region | None:
        """A smaller form of `region` that leaves alone the nodes another technique claimed first, or None."""
        return None

    def claim(self, ctx: Any) -> None:
        taken = ctx.claimed()
        for node in ctx.graph.nodes:
            if node.name in taken:
                continue
            region = self.match(node, ctx.graph)
            if region is not None and region.names() & taken:
                region = self.without(region, taken)
            if region is not None and not (region.names() & taken):
                ctx.regions.append(region)
                taken |= region.names()
                ctx.mark(self.id)
