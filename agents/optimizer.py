"""The Optimizer: writes the children a plan asks for, one per chosen technique and variant.

It gathers from the graph what the brain should know about each technique (its playbook, its
recipe key, the evidence quotes with their sources), hands the brain one OptimizeTask per
variant, and keeps what is new: a draft whose code an attempt of the run already has, or that
another child of the same plan already gave, is not a child. What the brain could not write is
kept with its reason, so the Decision records it and the next plan from the same parent skips it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kskill.agents.brains.base import (
    Brain, BrainError, BrainUnavailable, BudgetExhausted, Draft, NoUsableCode, OptimizeTask, TrajectoryStep, Usage)
from kskill.agents.planner import Capability, Choice, Plan, VariantChoice
from kskill.agents.problem import Problem, code_hash
from kskill.graph_schema import queries
from kskill.graph_schema.store import GraphStore

MAX_EVIDENCE = 6
SAME_CODE = "gives the same code as"  # why a variant has no child: its code is another attempt's


@dataclass(frozen=True)
class Child:
    """One child a plan produced: the technique, the variant, and the draft (None with `no_code`)."""

    choice: Choice
    variant: VariantChoice
    draft: Draft | None
    no_code: NoUsableCode | None = None
    usage: Usage = Usage()  # what the brain spent writing it


@dataclass
class Expansion:
    children: list[Child] = field(default_factory=list)
    not_written: dict[str, str] = field(default_factory=dict)  # variant key -> why no (new) child


class Optimizer:
    def __init__(self, brain: Brain, store: GraphStore):
        self.brain = brain
        self.store = store
        self._props: dict[str, dict] = {}
        self._verdicts: dict[tuple[str, str], tuple[bool, str]] = {}

    def capability(self, problem: Problem) -> Capability:
        """What the brain can apply to this problem, asked with each technique's recipe key. The
        verdict depends on the problem alone, so it is asked once per run, not once per parent."""
        def capable(technique: str) -> tuple[bool, str]:
            key = (problem.source_hash, technique)
            if key not in self._verdicts:
                self._verdicts[key] = self.brain.can_apply(problem.source, self.recipe(technique) or technique)
            return self._verdicts[key]

        return capable

    def expand(self, problem: Problem, parent: Draft, plan: Plan, known: Callable[[str], int | None],
               trajectory: tuple[TrajectoryStep, ...] = (), latest_review: str = "", limit: int | None = None,
               go_on: Callable[[], bool] = lambda: True) -> Expansion:
        """The new children of `parent` for the chosen techniques and variants of `plan`, in plan
        order, at most `limit`. `known(code_hash)`: the attempt that already has this code, or None.
        `go_on()` is asked before each brain call (budgets). Budget and endpoint errors pass through."""
        out = Expansion()
        written: dict[str, str] = {}  # code hash -> variant key, within this plan
        for choice in plan.chosen:
            for variant in choice.variants:
                if (limit is not None and len(out.children) >= limit) or not go_on():
                    return out
                task = self.task(problem, parent, plan, choice, variant, trajectory, latest_review)
                before = self.brain.used
                try:
                    draft = self.brain.optimize(task)
                except (BudgetExhausted, BrainUnavailable):
                    raise
                except NoUsableCode as exc:
                    out.children.append(Child(choice, variant, None, exc, self.brain.used - before))
                    continue
                except BrainError as exc:
                    out.not_written[variant.key or choice.technique] = str(exc)
                    continue
                digest = code_hash(draft.source)
                same = known(digest)
                if same is not None or digest in written:
                    what = f"attempt {same}" if same is not None else f"the {written[digest]} child"
                    out.not_written[variant.key or choice.technique] = f"{SAME_CODE} {what}"
                    continue
                written[digest] = variant.key or choice.technique
                out.children.append(Child(choice, variant, draft, usage=self.brain.used - before))
        return out

    def task(self, problem: Problem, parent: Draft, plan: Plan, choice: Choice, variant: VariantChoice,
             trajectory: tuple[TrajectoryStep, ...] = (), latest_review: str = "") -> OptimizeTask:
        technique = choice.technique
        case = plan.case if choice.rank == 1 else f"{technique} ranked {choice.rank} in the plan: {plan.case}"
        if variant.id:
            case += f"; form: {variant.name}"
        return OptimizeTask(
            problem_source=problem.source, problem_name=problem.name, parent=parent, technique=technique,
            bottleneck=choice.bottleneck, case=case, playbook=self.playbook(technique),
            evidence=self.evidence([technique, *([choice.bottleneck] if choice.bottleneck else []),
                                    *([variant.id] if variant.id else [])]),
            trajectory=trajectory, latest_review=latest_review, recipe=self.recipe(technique),
            variant=variant.key, variant_params=dict(variant.params))

    def recipe(self, technique: str) -> str:
        return str(self._node(technique).get("recipe", ""))

    def playbook(self, technique: str) -> str:
        props = self._node(technique)
        return "\n".join(p for p in (props.get("description", ""), props.get("playbook", "")) if p)

    def evidence(self, node_ids: list[str]) -> tuple[str, ...]:
        quotes = []
        for node_id in node_ids:
            for row in self.store.run(queries.NODE_EVIDENCE, {"id": node_id}):
                where = f", {row['location']}" if row.get("location") else ""
                quotes.append(f"\"{row['quote']}\" ({row.get('source') or row.get('source_id')}{where})")
        return tuple(dict.fromkeys(quotes))[:MAX_EVIDENCE]

    def _node(self, node_id: str) -> dict:
        if node_id not in self._props:
            rows = self.store.run(queries.NODE_BY_ID, {"id": node_id})
            self._props[node_id] = rows[0]["props"] if rows else {}
        return self._props[node_id]
