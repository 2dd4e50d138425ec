"""The closed loop as a visible state machine (ARCHITECTURE 5).

Each step is a node with one `run(ctx)` that returns the next node or `End`, over a typed
RunState and a Deps object holding the agents. The edges:

    Start -> Reference -> Seed -> Submit -> ReviewCandidate -> PlanNext -> Optimize -> Submit ...
                                            ReviewCandidate -> Diagnose -> Repair -> Submit ...
                   Seed, Submit, Diagnose, Repair, Optimize -> EndBranch -> PlanNext
    PlanNext, Repair -> Finish -> End   (budgets spent, early stop, or nothing left to try)

Every attempt, decision, review and failure is written to the graph when it happens, so the
Planner's tabu sees it at once and `--resume` can continue a killed run from the graph.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from kskill.agents.brains.base import (
    Brain, BrainError, BrainUnavailable, BudgetExhausted, Draft, NoUsableCode, OptimizeTask)
from kskill.agents.candidate_features import candidate_features
from kskill.agents.diagnoser import Diagnoser, Diagnosis, normalise
from kskill.agents.features import reference_features
from kskill.agents.generator import Generator, reference_candidate
from kskill.agents.observations import Observations
from kskill.agents.optimizer import Optimizer
from kskill.agents.planner import Plan, Planner
from kskill.agents.problem import code_hash
from kskill.agents.recipes import RecipeNotApplicable
from kskill.agents.repairer import Repairer
from kskill.agents.reviewer import Review
from kskill.graph_schema.migrations import now_iso
from kskill.graph_schema.model import Attempt, Run, stable_id
from kskill.report import write_artifacts
from kskill.run_state import AttemptRecord, RunState, release_lock, save_candidate, save_review, take_lock
from kskill.trajectory import Trajectory

log = logging.getLogger(__name__)
ReviewFn = Callable[[Any, str], Review]  # (problem, candidate source) -> Review


class CannotWrite(BrainError):
    """Any brain error that ends a branch but not the run (CannotRepair, a refused request)."""


@dataclass(frozen=True)
class Progress:
    """One step as the progress display shows it."""

    iteration: int
    budget: int
    action: str
    best_speedup: float
    best_n: int
    run_id: str = ""
    representative: bool | None = None  # whether the timings so far came from a GPU; None before any


@dataclass
class Deps:
    trajectory: Trajectory
    planner: Planner
    generator: Generator
    optimizer: Optimizer
    diagnoser: Diagnoser
    repairer: Repairer
    brain: Brain
    review: ReviewFn
    on_progress: Callable[[Progress], None] = lambda p: None
    confirm: ReviewFn | None = None  # a timing-only review for the re-timing at the end; None skips it


@dataclass
class Ctx:
    state: RunState
    deps: Deps

    def progress(self, action: str) -> None:
        best = self.state.best()
        timed = any(a.representative is not None for a in self.state.attempts.values())
        self.deps.on_progress(Progress(self.state.reviewed, self.state.config.iterations, action,
                                       best.speedup or 1.0, best.n, self.state.run_id,
                                       self.state.timings_representative if timed else None))


@dataclass(frozen=True)
class End:
    state: RunState


class Node:
    def run(self, ctx: Ctx) -> Node | End:
        raise NotImplementedError


# --- the nodes --------------------------------------------------------------------------------

@dataclass
class Start(Node):
    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        if not state.attempts:
            return Reference()
        pending = [a.n for a in state.attempts.values() if a.status == "pending"]
        if pending:
            ctx.progress(f"resume: review attempt {pending[0]} again")
            return ReviewCandidate(pending[0])
        if not any(a.kind == "seed" for a in state.attempts.values()):
            return Seed()
        return PlanNext()


@dataclass
class Reference(Node):
    """Attempt 0 is the reference itself: verified by definition, speedup 1."""

    def run(self, ctx: Ctx) -> Node:
        draft = reference_candidate(ctx.state.problem)
        record = AttemptRecord(n=0, kind="reference", code_hash=ctx.state.problem.source_hash, source=draft.source,
                               status="verified", correct=True, speedup=1.0)
        ctx.state.attempts[0] = record
        _write(ctx, record)
        return Seed()


@dataclass
class Seed(Node):
    def run(self, ctx: Ctx) -> Node:
        try:
            draft = _spent(ctx, lambda: ctx.deps.generator.seed(ctx.state.problem))
        except (RecipeNotApplicable, CannotWrite) as exc:
            return EndBranch(f"no seed: {exc}")
        except NoUsableCode as exc:
            return _no_code(ctx, exc, kind="seed", parent=0)
        return Submit(draft, kind="seed", parent=0)


@dataclass
class Submit(Node):
    """A new candidate becomes a pending attempt in the graph and on disk, unless it repeats one."""

    draft: Draft
    kind: str
    parent: int
    plan: Plan | None = None

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        digest = code_hash(self.draft.source)
        same = state.by_hash(digest)
        if same is not None:
            return EndBranch(f"the {self.kind} gave the same code as attempt {same.n}")
        record = AttemptRecord(
            n=state.next_n(), kind=self.kind, code_hash=digest, source=self.draft.source,
            techniques=self.draft.techniques, params=self.draft.params, parent=self.parent,
            technique=self.plan.selected if self.plan else None, bottleneck=self.plan.bottleneck if self.plan else None,
            decision=self.plan.id if self.plan else None, usage=ctx.state.last_usage, fallback=self.draft.fallback)
        state.attempts[record.n] = record
        save_candidate(state, record)
        _write(ctx, record)
        return ReviewCandidate(record.n)


@dataclass
class ReviewCandidate(Node):
    n: int

    def run(self, ctx: Ctx) -> Node:
        state, record = ctx.state, ctx.state.attempts[self.n]
        ctx.progress(f"review attempt {record.n} ({record.kind} {record.technique or ''})".replace(" )", ")"))
        review = ctx.deps.review(state.problem, record.source)
        timing = review.timing
        record.review = review
        record.correct = review.passed
        record.status = "verified" if review.passed else (review.failure_class or "other")
        record.speedup = timing.speedup if timing else None
        record.runtime_ms = timing.candidate.median_ms if timing else None
        record.representative = timing.representative if timing else None
        record.failure = "" if review.passed else review.failure_message
        save_review(state, record)
        _write(ctx, record)
        if review.passed:
            ctx.progress(f"attempt {record.n} verified, {record.speedup or 0:.3f}x")
            return PlanNext()
        ctx.progress(f"attempt {record.n} failed: {record.status}")
        return Diagnose(record.n)


@dataclass
class Diagnose(Node):
    n: int

    def run(self, ctx: Ctx) -> Node:
        state, record = ctx.state, ctx.state.attempts[self.n]
        review = record.review
        diagnosis = ctx.deps.diagnoser.diagnose(record.status, record.failure, review.log if review else "")
        ctx.deps.trajectory.write_failure(state.id_of(record.n), diagnosis)
        earlier = [a for a in state.branch(record.n) if a.n != record.n and not a.verified
                   and _signature(a) == diagnosis.signature]
        if earlier:
            return EndBranch(f"attempt {record.n} failed as attempt {earlier[0].n} did ({record.status}): "
                             "the same failure twice")
        repairs = sum(1 for a in state.branch(record.n) if a.kind == "repair")
        if repairs >= state.config.max_repairs:
            return EndBranch(f"{repairs} repair(s) spent on this branch")
        return Repair(record.n, diagnosis)


@dataclass
class Repair(Node):
    n: int
    diagnosis: Diagnosis

    def run(self, ctx: Ctx) -> Node:
        state, record = ctx.state, ctx.state.attempts[self.n]
        if (stop := _budget_spent(state)) is not None:
            return Finish(stop)
        repairs = sum(1 for a in state.branch(record.n) if a.kind == "repair")
        ctx.progress(f"repair attempt {record.n} ({self.diagnosis.failure_class})")
        try:
            draft = _spent(ctx, lambda: ctx.deps.repairer.repair(
                state.problem, record.draft(), self.diagnosis, record.review.log if record.review else "",
                attempt=repairs + 1, trajectory=state.trajectory()))
        except NoUsableCode as exc:
            return _no_code(ctx, exc, kind="repair", parent=record.n)
        except (RecipeNotApplicable, CannotWrite) as exc:
            return EndBranch(f"no repair for attempt {record.n}: {exc}")
        return Submit(draft, kind="repair", parent=record.n)


@dataclass
class EndBranch(Node):
    reason: str

    def run(self, ctx: Ctx) -> Node:
        ctx.progress(f"branch ends: {self.reason}; back to attempt {ctx.state.parents()[0].n}")
        return PlanNext()


@dataclass
class PlanNext(Node):
    """Budgets and early stops first; then the Planner, from the best verified candidate down."""

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        best = state.parents()[0]
        if state.plans:
            gained = (best.speedup or 0.0) >= state.best_at_last_plan * state.config.min_gain
            state.stale_plans = 0 if gained else state.stale_plans + 1
        if (stop := _budget_spent(state) or _early_stop(ctx, best)) is not None:
            return Finish(stop)
        for parent in state.parents():
            if parent.n in state.exhausted:
                continue
            plan = ctx.deps.planner.plan(_observations(ctx, parent), parent=state.id_of(parent.n),
                                         capability=_capability(ctx, parent))
            if plan.selected is None:
                state.exhausted.add(parent.n)
                ctx.progress(f"nothing left to try from attempt {parent.n}: {plan.case}")
                continue
            # One Decision per planned child: successive plans from one parent must not share a node.
            plan = replace(plan, id=stable_id("dec", state.run_id, parent.n, state.next_n(), plan.selected, plan.id))
            ctx.deps.planner.record(plan)
            state.plans += 1
            state.best_at_last_plan = best.speedup or 0.0
            return Optimize(parent.n, plan)
        return Finish("no technique left to try from any verified candidate")


@dataclass
class Optimize(Node):
    parent: int
    plan: Plan

    def run(self, ctx: Ctx) -> Node:
        state, parent = ctx.state, ctx.state.attempts[self.parent]
        ctx.progress(f"optimize from attempt {parent.n} with {self.plan.selected} ({self.plan.bottleneck or self.plan.tier})")
        try:
            draft = _spent(ctx, lambda: ctx.deps.optimizer.apply(
                state.problem, parent.draft(), self.plan, state.trajectory(), _review_summary(parent)))
        except NoUsableCode as exc:
            return _no_code(ctx, exc, kind="optimize", parent=parent.n, plan=self.plan)
        except (RecipeNotApplicable, CannotWrite) as exc:
            state.declined.setdefault(parent.n, {})[self.plan.selected] = str(exc)
            return EndBranch(f"{self.plan.selected} could not be applied: {exc}")
        return Submit(draft, kind="optimize", parent=parent.n, plan=self.plan)


@dataclass
class Finish(Node):
    reason: str

    def run(self, ctx: Ctx) -> End:
        state = ctx.state
        state.stop_reason = self.reason
        ctx.progress(f"stop: {self.reason}")
        _confirm(ctx)
        state.learned = _learn(ctx)
        write_artifacts(state)
        _write_run(ctx, "finished")
        return End(state)


# --- running it -----------------------------------------------------------------------------

def run_loop(state: RunState, deps: Deps, start: Node | None = None) -> RunState:
    """Walk the state machine from `start` (Start by default) to End; the run directory is locked meanwhile."""
    state.out_dir.mkdir(parents=True, exist_ok=True)
    take_lock(state.out_dir)
    ctx = Ctx(state, deps)
    node: Node | End = start or Start()
    try:
        _write_run(ctx, "running")
        while not isinstance(node, End):
            log.debug("node %s", type(node).__name__)
            try:
                node = node.run(ctx)
            except BudgetExhausted as exc:
                node = Finish(str(exc))
            except BrainUnavailable as exc:
                node = Finish(f"the LLM endpoint is unavailable: {exc}")
    except BaseException:
        _write_run(ctx, "interrupted")
        raise
    finally:
        release_lock(state.out_dir)
    return node.state


# --- helpers the nodes share -----------------------------------------------------------------


def _write(ctx: Ctx, record: AttemptRecord) -> None:
    state = ctx.state
    attempt = Attempt(id=state.id_of(record.n), origin="run", run_id=state.run_id, n=record.n, kind=record.kind,
                      code_hash=record.code_hash, status=record.status, runtime_ms=record.runtime_ms,
                      speedup=record.speedup, confirmed_speedup=record.confirmed_speedup, correct=record.correct,
                      params=record.graph_params())
    parent = state.id_of(record.parent) if record.parent is not None else None
    ctx.deps.trajectory.write_attempt(attempt, parent, record.technique, record.decision)


def _write_run(ctx: Ctx, status: str) -> None:
    state = ctx.state
    config = {"out_dir": str(state.out_dir), "problem_path": str(state.problem.path or ""),
              "loop": state.config.model_dump(), "stop_reason": state.stop_reason,
              "usage": asdict(state.total_usage)}
    run = Run(id=state.run_id, origin="run", problem=state.problem.name, config=json.dumps(config, sort_keys=True),
              status=status, started_at=_started_at(ctx), finished_at=now_iso() if status != "running" else "")
    ctx.deps.trajectory.write_run(run)


def _started_at(ctx: Ctx) -> str:
    known = ctx.deps.trajectory.run(ctx.state.run_id)
    return (known or {}).get("started_at") or now_iso()


def _spent(ctx: Ctx, call: Callable[[], Draft]) -> Draft:
    """Run a brain call, turning brain errors that end a branch into CannotWrite, and count its usage."""
    before = ctx.deps.brain.used
    try:
        return call()
    except (BudgetExhausted, BrainUnavailable, NoUsableCode):
        raise
    except BrainError as exc:
        raise CannotWrite(str(exc)) from exc
    finally:
        ctx.state.usage = ctx.deps.brain.used
        ctx.state.last_usage = ctx.deps.brain.used - before


def _no_code(ctx: Ctx, exc: NoUsableCode, kind: str, parent: int, plan: Plan | None = None) -> Node:
    """A reply without usable code is an attempt of its own (failed, class no_code): the tabu sees it."""
    state = ctx.state
    digest = code_hash(exc.reply or str(exc))
    if state.by_hash(digest) is None:
        record = AttemptRecord(n=state.next_n(), kind=kind, code_hash=digest, source="", parent=parent,
                               technique=plan.selected if plan else None, bottleneck=plan.bottleneck if plan else None,
                               decision=plan.id if plan else None, status="no_code", correct=False, failure=str(exc),
                               usage=ctx.state.last_usage)
        state.attempts[record.n] = record
        folder = state.attempt_dir(record.n)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "reply.txt").write_text(exc.reply)
        _write(ctx, record)
        ctx.deps.trajectory.write_failure(state.id_of(record.n), Diagnosis("no_code", str(exc), ()))
    return EndBranch(f"no usable code from the brain: {exc}")


def _signature(record: AttemptRecord) -> tuple[str, str]:
    return record.status, normalise(record.failure)


def _budget_spent(state: RunState) -> str | None:
    if state.reviewed >= state.config.iterations:
        return f"iteration budget spent ({state.reviewed} of {state.config.iterations})"
    if state.elapsed() >= state.config.time_limit_s:
        return f"wall-time budget spent ({state.elapsed():.0f} s of {state.config.time_limit_s:.0f} s)"
    return None


def _early_stop(ctx: Ctx, best: AttemptRecord) -> str | None:
    state = ctx.state
    if state.stale_plans >= state.config.patience:
        return f"{state.stale_plans} plans in a row gained less than {100 * (state.config.min_gain - 1):.0f}%"
    fraction = (best.review.observations.get("roofline_fraction") if best.review else None)
    if isinstance(fraction, (int, float)) and fraction >= state.config.roofline_stop:
        return f"attempt {best.n} reaches {fraction:.0%} of its roofline estimate"
    return None


def _observations(ctx: Ctx, record: AttemptRecord) -> dict[str, Any]:
    """Reference features, the candidate's static features and its review's measurements, merged."""
    state = ctx.state
    if state.reference_features is None:
        state.reference_features = reference_features(state.problem.source)
    features = state.reference_features.merged(candidate_features(record.source))
    review = record.review
    problem = {k: v for k, v in (("atol", state.config.atol), ("rtol", state.config.rtol)) if v is not None}
    obs = Observations.merge(profile=review.observations if review else None, features=features, problem=problem,
                             unavailable=review.unavailable if review else None)
    return obs.to_params()


def _capability(ctx: Ctx, parent: AttemptRecord) -> Callable[[str], tuple[bool, str]]:
    """What the Planner may select from `parent`: what the brain can apply and has not refused before,
    and, for the deterministic brain, only what gives code not already tried in this run."""
    state, brain = ctx.state, ctx.deps.brain

    def capable(technique: str) -> tuple[bool, str]:
        if technique in state.declined.get(parent.n, {}):
            return False, state.declined[parent.n][technique]
        ok, why = brain.can_apply(state.problem.source, technique)
        if not ok or brain.name != "recipes":
            return ok, why
        task = OptimizeTask(state.problem.source, state.problem.name, parent.draft(), technique, None, "", "", (), (),
                            "")
        try:
            draft = brain.optimize(task)
        except (RecipeNotApplicable, BrainError) as exc:
            return False, str(exc)
        same = state.by_hash(code_hash(draft.source))
        if same is not None:
            return False, f"gives the same code as attempt {same.n}"
        return True, ""

    return capable


def _review_summary(record: AttemptRecord) -> str:
    review = record.review
    if review is None:
        return ""
    lines = [f"{'passed' if review.passed else 'failed: ' + str(review.failure_class)} on {review.device}"]
    if review.timing:
        t = review.timing
        lines.append(f"candidate {t.candidate.median_ms:.4f} ms vs reference {t.reference.median_ms:.4f} ms "
                     f"({t.speedup:.3f}x{'' if t.representative else ', not representative'})")
    measured = {k: v for k, v in sorted(review.observations.items()) if not isinstance(v, str)}
    lines.append("measured: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in list(measured.items())[:30]))
    return "\n".join(lines)


def _confirm(ctx: Ctx) -> None:
    """Re-time the fastest candidates against the reference, one fresh review each, and keep those
    figures: a speedup measured once can ride on one slow stretch of the reference (a launch-bound
    reference's time follows the host's load), and the returned model should not be chosen by it."""
    state = ctx.state
    if ctx.deps.confirm is None or state.config.confirm == 0:
        return
    fastest = [a for a in state.candidates() if a.representative][:state.config.confirm]
    for a in fastest:
        ctx.progress(f"confirm attempt {a.n}: time it against the reference again")
        review = ctx.deps.confirm(state.problem, a.source)
        timed = review.passed and review.timing is not None and review.timing.representative
        a.confirmed_speedup = review.timing.speedup if timed else 0.0
        _write(ctx, a)
        if not timed:
            log.warning("attempt %d failed its confirmation review: %s", a.n, review.failure_message or "not timed")


def _learn(ctx: Ctx) -> str:
    """Fold each planned technique's outcome into its ADDRESSED_BY edge; say what was learned or why not."""
    state = ctx.state
    mode = state.config.learn
    if mode == "never":
        return "priors not updated (learn=never)"
    if mode == "auto" and not state.timings_representative:
        return "priors not updated: the timings are not representative (no GPU); use learn=always to override"
    count = 0
    for a in state.attempts.values():
        if a.kind != "optimize" or not (a.bottleneck and a.technique) or a.parent is None:
            continue
        parent = state.attempts[a.parent]
        reached = [b.speedup for b in state.branch(a.n) if b.verified and b.speedup]
        gain = max(reached) / parent.speedup if reached and parent.speedup else 1.0
        ctx.deps.planner.record_outcome(a.bottleneck, a.technique, gain)
        count += 1
    return f"priors updated from {count} planned attempt(s)"
