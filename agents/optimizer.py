"""The Optimizer: applies the technique the Planner selected to a parent candidate.

It gathers from the graph what the brain should know about the technique (its playbook and
the evidence quotes with their sources) and hands the brain one OptimizeTask.
"""

from __future__ import annotations

from kskill.agents.brains.base import Brain, Draft, OptimizeTask, TrajectoryStep
from kskill.agents.planner import Plan
from kskill.agents.problem import Problem
from kskill.graph_schema import queries
from kskill.graph_schema.store import GraphStore

MAX_EVIDENCE = 6


class Optimizer:
    def __init__(self, brain: Brain, store: GraphStore):
        self.brain = brain
        self.store = store

    def apply(self, problem: Problem, parent: Draft, plan: Plan, trajectory: tuple[TrajectoryStep, ...] = (),
              latest_review: str = "") -> Draft:
        """A child of `parent` with `plan.selected` applied; brain errors pass through."""
        if plan.selected is None:
            raise ValueError("the plan selected no technique")
        return self.brain.optimize(self.task(problem, parent, plan, trajectory, latest_review))

    def task(self, problem: Problem, parent: Draft, plan: Plan, trajectory: tuple[TrajectoryStep, ...] = (),
             latest_review: str = "") -> OptimizeTask:
        technique = plan.selected or ""
        return OptimizeTask(
            problem_source=problem.source, problem_name=problem.name, parent=parent, technique=technique,
            bottleneck=plan.bottleneck, case=plan.case, playbook=self.playbook(technique),
            evidence=self.evidence([technique, *([plan.bottleneck] if plan.bottleneck else [])]),
            trajectory=trajectory, latest_review=latest_review)

    def playbook(self, technique: str) -> str:
        rows = self.store.run(queries.NODE_BY_ID, {"id": technique})
        props = rows[0]["props"] if rows else {}
        return "\n".join(p for p in (props.get("description", ""), props.get("playbook", "")) if p)

    def evidence(self, node_ids: list[str]) -> tuple[str, ...]:
        quotes = []
        for node_id in node_ids:
            for row in self.store.run(queries.NODE_EVIDENCE, {"id": node_id}):
                where = f", {row['location']}" if row.get("location") else ""
                quotes.append(f"\"{row['quote']}\" ({row.get('source') or row.get('source_id')}{where})")
        return tuple(quotes[:MAX_EVIDENCE])
