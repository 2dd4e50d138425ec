"""The deterministic brain: the recipe generator (agents/recipes) behind the Brain interface.

A candidate is determined by the ordered recipes and the params, so the seed is the reference
re-emitted op by op, an optimization appends the Planner's technique (its recipe key) to the
parent's list with the chosen variant's params on top of the parent's, and a repair changes
launch params only (the recipes' kernels are exact by construction, so what can go wrong is a
launch that does not fit: too large blocks). A recipe with nothing to do raises CannotApply.
"""

from __future__ import annotations

import logging
from typing import Any

from kskill.agents.brains.base import CannotApply, CannotRepair, Draft, OptimizeTask, RepairTask, SeedTask, Usage
from kskill.agents.recipes import RecipeNotApplicable, applicable, build_candidate

# Failure classes a smaller launch can cure, and remedies (technique ids) that say "smaller launch".
RESIZABLE_FAILURES = ("compile", "runtime", "timeout", "memory")
RESIZE_REMEDIES = ("reduce_block_size", "autotune_launch", "increase_occupancy")
MIN_BLOCK = 16
log = logging.getLogger(__name__)


class RecipeBrain:
    name = "recipes"
    used = Usage()  # no model, no tokens

    def __init__(self, rtol: float | None = None):
        self.rtol = rtol  # the run's relative tolerance; None: fp32's default, as the Reviewer's

    def seed(self, task: SeedTask) -> Draft:
        return self._build(task.problem_source, (), {})

    def optimize(self, task: OptimizeTask) -> Draft:
        recipe = task.recipe or task.technique
        techniques = (*task.parent.techniques, recipe)
        params = {**task.parent.params, **task.variant_params}
        if self.rtol is not None:
            params["rtol"] = self.rtol
        draft = self._build(task.problem_source, techniques, params)
        if recipe not in draft.techniques:
            raise CannotApply(f"{task.technique} found nothing to do on top of "
                              f"{', '.join(task.parent.techniques) or 'the seed'}")
        return draft

    def repair(self, task: RepairTask) -> Draft:
        resizable = task.failure_class in RESIZABLE_FAILURES or set(task.remedy_techniques) & set(RESIZE_REMEDIES)
        if not resizable:
            raise CannotRepair(f"the recipe brain cannot repair a {task.failure_class} failure: its kernels are "
                               "exact by construction and only launch sizes can change")
        try:
            built = build_candidate(task.problem_source, task.draft.techniques, task.draft.params)
        except RecipeNotApplicable as exc:
            raise CannotRepair(str(exc)) from exc
        launch = {unit: _halved(p) for unit, p in built.params.items()}
        if launch == built.params:
            raise CannotRepair("every block is already at its smallest size")
        draft = self._build(task.problem_source, task.draft.techniques, {**task.draft.params, "launch": launch})
        if draft.source == task.draft.source:
            raise CannotRepair("smaller launch params give the same code")
        return draft

    def can_apply(self, problem_source: str, technique: str) -> tuple[bool, str]:
        """`technique`: a recipe key (the Optimizer maps a technique to its recipe)."""
        verdict = applicable(problem_source, technique, **({} if self.rtol is None else {"rtol": self.rtol}))
        return verdict.ok, verdict.reason

    @staticmethod
    def _build(source: str, techniques: tuple[str, ...], params: dict[str, Any]) -> Draft:
        try:
            built = build_candidate(source, list(techniques), params)
        except RecipeNotApplicable as exc:
            raise CannotApply(str(exc)) from exc
        except (ValueError, KeyError, TypeError) as exc:
            # A template that cannot take these params (a variant's, on a region it was not written
            # for) declines this candidate; the search goes on and the Decision records why.
            log.warning("the recipes could not write %s with %s: %s", "+".join(techniques), params, exc)
            raise CannotApply(f"the recipes could not write it: {type(exc).__name__}: {exc}") from exc
        return Draft(source=built.source, techniques=tuple(built.applied), params=dict(params),
                     notes=tuple(built.notes))


def _halved(params: dict[str, Any]) -> dict[str, Any]:
    """Block sizes and warps halved, down to a floor: what a too-large launch needs."""
    out = dict(params)
    for key, value in params.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if key.startswith("BLOCK") and value > MIN_BLOCK:
            out[key] = value // 2
        elif key == "num_warps" and value > 1:
            out[key] = value // 2
    return out
