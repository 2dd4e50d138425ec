"""tf32_tensor_cores: TF32 tensor cores for fp32 matmuls whose error analysis fits the tolerance.

The cuBLAS calls of the chosen matmuls run with TF32 allowed inside a context that restores the
caller's setting; matmuls whose estimated TF32 error exceeds the run's relative tolerance keep
exact fp32.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import Applicability, Recipe
from kskill.agents.recipes.graph import Graph

TF32_UNIT_ROUNDOFF = 2.0 ** -11  # TF32 keeps 10 explicit mantissa bits


def tf32_verdicts(graph: Graph, rtol: float) -> dict[str, tuple[bool, str]]:
    """Per fp32 matmul: whether TF32 rounding fits `rtol`, with the estimate.

    Each product a*b picks up relative error about sqrt(2)*u (u = 2^-11, both inputs rounded);
    over K random-sign terms the error and the output both grow as sqrt(K), so the expected
    relative error of an output is about sqrt(2)*u ~ 6.9e-4 whatever K. A 4x margin covers the
    tail over millions of outputs; TF32 is used only if that fits rtol.
    """
    verdicts = {}
    for node in graph.nodes:
        if node.op not in ("linear", "matmul") or str(node.dtype) != "torch.float32":
            continue
        estimate = 4 * math.sqrt(2) * TF32_UNIT_ROUNDOFF
        fits = estimate <= rtol
        verdicts[node.name] = (fits, f"TF32 error ~{estimate:.1e} relative {'<=' if fits else '>'} rtol {rtol:g}")
    return verdicts

TF32_HELPER = '''
class _tf32_matmuls:
    """Lets cuBLAS use TF32 tensor cores inside the block only (restores the caller's setting)."""

    def __enter__(self):
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.saved
        return False
'''


class Tf32TensorCores(Recipe):
    id = "tf32_tensor_cores"
    summary = "TF32 tensor cores for matmuls whose error analysis fits the tolerance"

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        verdicts = tf32_verdicts(graph, rtol)
        if not verdicts:
            return Applicability(False, "no fp32 matmul / linear")
        ok = [n for n, (fits, _) in verdicts.items() if fits]
        if ok:
            return Applicability(True, f"TF32 error fits rtol={rtol} for {', '.join(ok)}")
        return Applicability(False, "; ".join(reason for _, reason in verdicts.values()))

    def configure(self, ctx: Any) -> None:
        rtol = float(ctx.params.get("rtol", 1e-4))
        verdicts = tf32_verdicts(ctx.graph, rtol)
        owned = ctx.claimed()
        nodes = {n for n, (fits, _) in verdicts.items() if fits and n not in owned}
        for name, (fits, reason) in verdicts.items():
            if not fits:
                ctx.notes.append(f"tf32 declined for {name}: {reason}")
        if nodes:
            ctx.flags["tf32_nodes"] = nodes
            ctx.mark(self.id)


RECIPE = Tf32TensorCores()
