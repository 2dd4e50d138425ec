"""The Repairer: asks the brain to fix a failed candidate, with the Diagnoser's findings.

How many repairs a branch gets, and when the same failure twice ends it, is the loop's
decision (kskill/loop.py); the Repairer turns one diagnosis into one repaired draft.
"""

from __future__ import annotations

from kskill.agents.brains.base import Brain, Draft, RepairTask, TrajectoryStep
from kskill.agents.diagnoser import Diagnosis
from kskill.agents.problem import Problem

class Repairer:
    def __init__(self, brain: Brain):
        self.brain = brain

    def repair(self, problem: Problem, draft: Draft, diagnosis: Diagnosis, log: str, attempt: int,
               trajectory: tuple[TrajectoryStep, ...] = ()) -> Draft:
        """A repaired draft; CannotRepair and other brain errors pass through."""
        task = RepairTask(
            problem_source=problem.source, problem_name=problem.name, draft=draft,
            failure_class=diagnosis.failure_class, message=diagnosis.message, log=log,
            remedies=tuple(f"{m.name}: {m.remedy}" for m in diagnosis.patterns),
            remedy_techniques=diagnosis.remedy_techniques, trajectory=trajectory, attempt=attempt)
        return self.brain.repair(task)
