"""One round of the search: which verified candidates to expand, and the children they get.

The frontier is every verified candidate nothing has been ruled out from yet. Each is planned
from its observations (the Feature Extractor's merge of its code, its review and the problem's
facts); the Planner returns the `width` best admissible techniques for it, each with the
variants the graph allows, and the short-term memory in the graph (the tabu) removes what was
tried from it before. The frontier is ranked best first by what the graph expects: the parent's
measured speedup times the expected gain of its best technique, then that technique's priority
and learned prior. The first `beam` parents are expanded: the Optimizer writes one child per
chosen technique and variant, and what it could not write (or wrote before) is kept so that
the next plan from the same parent skips it. The children of a round are reviewed as one batch.

Before the seed is reviewed the seed is the frontier: its children are planned from its static
features, so the first batch holds the seed and its children together. A seed whose code alone
admits nothing is not spent: once reviewed, it is planned again with what its review measured.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kskill import faults
from kskill.agents.brains.base import Draft, NoUsableCode, Usage
from kskill.agents.observations import Observations
from kskill.agents.planner import Plan
from kskill.agents.problem import code_hash
from kskill.graph_schema.model import stable_id
from kskill.run_state import AttemptRecord, RunState

if TYPE_CHECKING:
    from kskill.loop import Ctx

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewAttempt:
    """A child to submit: what it is, where it comes from, and the plan that chose it."""

    n: int
    kind: str  # seed | optimize | repair | no_code (an LLM reply without usable code)
    parent: int
    draft: Draft | None
    technique: str | None = None
    variant: str = ""
    bottleneck: str | None = None
    decision: str | None = None
    no_code: NoUsableCode | None = None
    usage: Usage = Usage()


@dataclass(frozen=True)
class Planned:
    parent: AttemptRecord
    plan: Plan

    @property
    def key(self) -> tuple:
        lead = self.plan.chosen[0]
        return (-(self.parent.speedup or 1.0) * lead.expected_gain, -lead.priority, -lead.prior, self.parent.n)


def observe(ctx: Ctx, record: AttemptRecord) -> Observations:
    """The Feature Extractor's observations of one attempt, with its review's measurements."""
    review = record.review
    source = None if record.kind == "reference" else record.source
    return ctx.extractor.observe(source, review.observations if review else None,
                                 review.unavailable if review else None)


def frontier(state: RunState) -> list[AttemptRecord]:
    """The candidates a round may expand: the verified ones not spent; the seed alone while it
    awaits its first review; the reference when no candidate was verified."""
    verified = [a for a in state.candidates() if a.n not in state.exhausted]
    if verified or state.candidates():
        return verified
    seeds = [a for a in state.attempts.values() if a.kind == "seed" and a.status == "pending" and a.review is None]
    if seeds:
        return [s for s in seeds if s.n not in state.exhausted]
    return [] if 0 in state.exhausted else [state.attempts[0]]


def plan_for(ctx: Ctx, parent: AttemptRecord) -> Plan:
    state, deps = ctx.state, ctx.deps
    obs = observe(ctx, parent)
    return deps.planner.plan(obs.to_params(), parent=state.id_of(parent.n),
                             capability=deps.optimizer.capability(state.problem), width=state.config.width,
                             declined=state.declined.get(parent.n, {}), derivations=obs.derivations,
                             reasons=obs.unavailable)


def expand_round(ctx: Ctx, first_n: int, room: int) -> list[NewAttempt]:
    """Plan the frontier, rank it, and write the children of the best `beam` parents (at most
    `room` children, numbered from `first_n`); parents with nothing left are marked spent."""
    state = ctx.state
    planned = []
    for parent in frontier(state):
        plan = plan_for(ctx, parent)
        if plan.chosen:
            planned.append(Planned(parent, plan))
        elif parent.kind == "seed" and parent.review is None:
            ctx.progress(f"nothing to try from attempt {parent.n} before its review: {plan.case}")
        else:
            state.exhausted.add(parent.n)
            ctx.progress(f"nothing left to try from attempt {parent.n}: {plan.case}")
    planned.sort(key=lambda p: p.key)
    batch: list[NewAttempt] = []
    expanded = 0
    for item in planned:
        if (state.config.beam and expanded >= state.config.beam) or len(batch) >= room or state.time_left() <= 0:
            break
        children = _expand(ctx, item, first_n + len(batch), room - len(batch), batch)
        if children:
            expanded += 1
            batch += children
    return batch


def _expand(ctx: Ctx, item: Planned, first_n: int, room: int, batch: list[NewAttempt]) -> list[NewAttempt]:
    """The children of one parent. A plan whose every choice the brain could not write (or wrote
    before) is planned again without those, until something new is written or nothing is left."""
    state, deps = ctx.state, ctx.deps
    parent, plan = item.parent, item.plan
    in_batch = {code_hash(b.draft.source): b.n for b in batch if b.draft is not None}
    while True:
        state.plans += 1
        # One Decision per round and parent: a later plan from the same parent is a new node.
        plan = replace(plan, id=stable_id("dec", state.run_id, parent.n, state.plans, plan.id))
        names = ", ".join(f"{c.technique}" + (f" ({len(c.variants)} forms)" if len(c.variants) > 1 else "")
                          for c in plan.chosen)
        ctx.progress(f"plan from attempt {parent.n}: {names}")
        expansion = deps.optimizer.expand(
            state.problem, parent.draft(), plan, known=lambda digest: _known(state, in_batch, digest),
            trajectory=state.trajectory(), latest_review=review_summary(parent), limit=room,
            go_on=lambda: state.time_left() > 0)
        children: list[NewAttempt] = []
        written: dict[str, int] = {}
        for child in expansion.children:
            n = first_n + len(children)
            written[child.variant.key or child.choice.technique] = n
            children.append(NewAttempt(
                n, "optimize" if child.draft is not None else "no_code", parent.n, child.draft,
                child.choice.technique, child.variant.key, child.choice.bottleneck, plan.id, child.no_code,
                child.usage))
            if child.draft is not None:
                in_batch[code_hash(child.draft.source)] = n
        state.usage = deps.brain.used
        faults.reach("decision")
        deps.planner.record(plan, written=written, not_written=expansion.not_written)
        declined = state.declined.setdefault(parent.n, {})
        fresh = {k: v for k, v in expansion.not_written.items() if k not in declined}
        declined.update(expansion.not_written)
        if children or not fresh or state.time_left() <= 0:
            if not children:
                ctx.progress(f"nothing new from attempt {parent.n}: "
                             f"{'; '.join(f'{k}: {v}' for k, v in sorted(expansion.not_written.items()))}")
            return children
        plan = plan_for(ctx, parent)
        if not plan.chosen:
            state.exhausted.add(parent.n)
            ctx.progress(f"nothing left to try from attempt {parent.n}: {plan.case}")
            return []


def _known(state: RunState, in_batch: dict[str, int], digest: str) -> int | None:
    """The attempt, submitted or about to be in this round, that already has this code."""
    same = state.by_hash(digest)
    return same.n if same is not None else in_batch.get(digest)


def review_summary(record: AttemptRecord) -> str:
    """A few lines on a candidate's review for the brain: verdict, timing and measurements."""
    review = record.review
    if review is None:
        return ""
    lines = [f"{'passed' if review.passed else 'failed: ' + str(review.failure_class)} on {review.device}"]
    if review.timing:
        t = review.timing
        lines.append(f"candidate {t.candidate.median_ms:.4f} ms vs reference {t.reference.median_ms:.4f} ms "
                     f"({t.speedup:.3f}x{'' if t.representative else ', not representative'})")
    measured: dict[str, Any] = {k: v for k, v in sorted(review.observations.items()) if not isinstance(v, str)}
    lines.append("measured: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in list(measured.items())[:30]))
    return "\n".join(lines)
