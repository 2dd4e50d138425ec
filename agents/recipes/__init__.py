"""Recipe brain: deterministic kernel generation, one recipe per Technique.

`build_candidate(problem_source, techniques, params)` captures a KernelBench-format reference
with torch.fx, lets each technique claim regions of its graph, and emits a standalone ModelNew
file (Triton kernels + PyTorch for the rest; it imports neither kskill nor anything but torch
and triton). `techniques=[]` gives the seed: the reference's forward re-emitted op by op in
PyTorch, which is faithful by construction and the parent of every later candidate.
`applicable(problem_source, technique)` answers cheaply whether a technique has anything to do.
Each technique is one module of this package (matcher, template, parameters), listed once in
registry.py.
The alternative launch and precision params worth timing (a Triton GEMM with "tf32x3" dots, say)
are the techniques' variants in the skill base (graph_schema/skills/techniques.yaml).
"""

from __future__ import annotations

from kskill.agents.recipes.builder import GeneratedCandidate, build_candidate
from kskill.agents.recipes.capture import capture
from kskill.agents.recipes.errors import CaptureError, RecipeNotApplicable
from kskill.agents.recipes.base import Applicability
from kskill.agents.recipes.registry import RECIPES


def applicable(problem_source: str, technique: str, rtol: float = 1e-4) -> Applicability:
    """Whether `technique` has anything to do on this reference under relative tolerance `rtol`,
    with the reason (static)."""
    if technique not in RECIPES:
        return Applicability(False, f"unknown technique {technique!r}; known: {', '.join(sorted(RECIPES))}")
    try:
        graph = capture(problem_source)
    except CaptureError as exc:
        return Applicability(False, str(exc))
    return RECIPES[technique].applicable(graph, rtol)


__all__ = ["Applicability", "CaptureError", "GeneratedCandidate", "RECIPES", "RecipeNotApplicable",
           "applicable", "build_candidate"]
