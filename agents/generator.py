"""The Generator: the first candidate (the seed) for a problem, written by a brain.

With the recipe brain the seed is the reference re-emitted op by op in PyTorch, faithful by
construction; with the LLM brain it is the model's first correct-first rewrite. When no brain
can write one, the reference itself stands in (`reference_candidate`), so the loop always has
a verified parent to plan from.
"""

from __future__ import annotations

from kskill.agents.brains.base import Brain, Draft, SeedTask
from kskill.agents.problem import Problem


class Generator:
    def __init__(self, brain: Brain):
        self.brain = brain

    def seed(self, problem: Problem) -> Draft:
        """A seed candidate; the brain's errors (BrainError: CannotApply, NoUsableCode, ...) pass through."""
        return self.brain.seed(SeedTask(problem_source=problem.source, problem_name=problem.name))


def reference_candidate(problem: Problem) -> Draft:
    """The reference as a candidate: its own source with ModelNew bound to Model."""
    return Draft(source=problem.source.rstrip() + "\n\n\nModelNew = Model\n", techniques=(),
                 notes=("the reference itself",))
