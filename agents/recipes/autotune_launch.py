"""autotune_launch: fused kernels carry a small `triton.autotune` sweep instead of fixed launch params.

With this technique the kernel carries a handful of configurations that Triton times on the GPU
at the first call for each key (the sizes); under the CPU interpreter only the first
configuration is kept, since timing there means nothing. The launch-parameter text of every
template (fixed or tuned) is written here.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import Recipe
from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.matching import ROW_OPS
from kskill.agents.recipes.regions import is_pointwise

# name -> list of (meta-parameters, num_warps); small on purpose: every entry is one compile
SPACES: dict[str, list[tuple[dict[str, int], int]]] = {
    "pointwise": [({"BLOCK": 1024}, 4), ({"BLOCK": 2048}, 8), ({"BLOCK": 4096}, 8), ({"BLOCK": 512}, 4)],
}


def autotune_decorator(space: str, key: list[str]) -> str:
    configs = ", ".join(f"triton.Config({meta!r}, num_warps={warps})" for meta, warps in SPACES[space])
    return (f"@triton.autotune(configs=_configs([{configs}]), key={key!r})\n")


AUTOTUNE_HELPER = '''
def _configs(configs):
    """Autotuning candidates: all of them on a GPU, the first under the CPU interpreter."""
    return configs if torch.cuda.is_available() else configs[:1]
'''


def launch_options(params: dict[str, Any], autotune: bool, tuned: list[str], fixed: list[str]) -> str:
    """Keyword arguments for a kernel launch: sizes always, tuned meta-parameters unless autotuned."""
    parts = list(fixed)
    if not autotune:
        parts += [f"{k}={params[k]}" for k in tuned]
        parts.append(f"num_warps={params['num_warps']}")
        if "num_stages" in params:
            parts.append(f"num_stages={params['num_stages']}")
    return ", ".join(parts)


class AutotuneLaunch(Recipe):
    id = "autotune_launch"
    summary = "fused pointwise kernels carry a small triton.autotune sweep timed on the GPU"

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if is_pointwise(n, graph) or n.op in ROW_OPS]

    def absent_reason(self) -> str:
        return "no pointwise or row kernel to tune"

    def configure(self, ctx: Any) -> None:
        if any(r.kind == "pointwise" for r in ctx.regions):
            ctx.flags["autotune"] = True
            ctx.mark(self.id)


RECIPE = AutotuneLaunch()
