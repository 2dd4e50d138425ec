"""The closed loop as a visible state machine (ARCHITECTURE 5): a best-first search over the tree
of verified candidates, reviewed in batches.

Each step is a node with one `run(ctx)` that returns the next node or `End`, over a typed
RunState and a Deps object holding the agents. The edges:

    Start -> Reference -> Seed -> PlanRound -> Submit -> ReviewBatch -> Diagnose -> Repair -> PlanRound ...
    Start (resumed) -> ReviewBatch (what was left pending) | Seed | Diagnose
    PlanRound, ReviewBatch -> Finish -> End   (budgets spent, early stop, or nothing left to try)

A round (kskill/search.py) plans the best parents of the frontier wide (several techniques, each
with its variants) and the Optimizer writes their children; repairs of the last batch's failures
join them; the round's candidates are reviewed as one batch. Every attempt, decision, review and
failure is written to the graph when it happens (a review as soon as the Reviewer reports it),
so the Planner's tabu sees it at once and `--resume` continues a killed run from the graph.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kskill import faults, problem_check
from kskill.agents.errors import ProblemError
from kskill.agents.brains.base import Brain, BrainError, BrainUnavailable, BudgetExhausted, Draft, NoUsableCode
from kskill.agents.diagnoser import Diagnoser, Diagnosis, normalise
from kskill.agents.generator import Generator, reference_candidate
from kskill.agents.observe import FeatureExtractor
from kskill.agents.optimizer import Optimizer
from kskill.agents.planner import Planner
from kskill.agents.problem import code_hash
from kskill.agents.repairer import Repairer
from kskill.agents.reviewer import Review
from kskill.graph_schema.migrations import now_iso
from kskill.graph_schema.model import Attempt, Run
from kskill.interrupts import RunInterrupted, as_interrupted
from kskill.report import write_artifacts
from kskill.run_state import AttemptRecord, RunState, release_lock, save_candidate, save_review, take_lock
from kskill.search import NewAttempt, expand_round, observe, review_summary
from kskill.trajectory import Trajectory

log = logging.getLogger(__name__)
# (problem, candidate sources, *, time_limit_s, on_result) -> one Review per candidate, in order:
# the shape of kskill.agents.reviewer.review_batch with the review options bound.
ReviewBatchFn = Callable[..., list[Review]]
BUDGET_PHASE = "budget"  # the failure phase of a review the time budget cut short (not the candidate's fault)
FINISH_RESERVE_S = 5.0  # kept from the overrun margin for the report once candidates were re-timed


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
    elapsed_s: float = 0.0
    time_limit_s: float = 0.0


@dataclass
class Deps:
    trajectory: Trajectory
    planner: Planner
    generator: Generator
    optimizer: Optimizer
    diagnoser: Diagnoser
    repairer: Repairer
    brain: Brain
    review_batch: ReviewBatchFn
    on_progress: Callable[[Progress], None] = lambda p: None
    confirm_batch: ReviewBatchFn | None = None  # timing-only reviews for the re-timing at the end; None skips it
    gpu: Any = "detect"  # the Feature Extractor's GPU: a GpuSpec, None (reviews on the CPU) or "detect"


@dataclass
class Ctx:
    state: RunState
    deps: Deps
    extractor: FeatureExtractor = field(init=False)
    lock: threading.Lock = field(default_factory=threading.Lock)  # a Reviewer may report from its own thread

    def __post_init__(self) -> None:
        config = self.state.config
        # A GPU named with --gpu is the target even where the reviews run on the CPU; else none there.
        detect_on_cpu = config.device == "cpu" and self.deps.gpu == "detect"
        gpu, why = (None, "the reviews run on the CPU (--device cpu)") if detect_on_cpu else (self.deps.gpu, "")
        self.extractor = FeatureExtractor(self.state.problem.source, config.atol, config.rtol, gpu=gpu,
                                          gpu_reason=why or "no GPU given")

    def progress(self, action: str) -> None:
        state = self.state
        best = state.best()
        timed = any(a.representative is not None for a in state.attempts.values())
        self.deps.on_progress(Progress(state.reviewed, state.config.iterations, action, best.speedup or 1.0,
                                       best.n, state.run_id, state.timings_representative if timed else None,
                                       state.elapsed(), state.config.time_limit_s))


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
        if state.pending():
            ctx.progress(f"resume: review attempt(s) {', '.join(str(a.n) for a in state.pending())}")
            return ReviewBatch()
        if not any(a.kind == "seed" for a in state.attempts.values()):
            return Seed()
        return Diagnose()


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
    """The seed is submitted, not reviewed yet: the first round plans its children from its code,
    so the first batch reviews the seed and its children together."""

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        try:
            draft = _spent(ctx, lambda: ctx.deps.generator.seed(state.problem))
        except CannotWrite as exc:
            ctx.progress(f"no seed: {exc}; planning from the reference")
            return PlanRound()
        except NoUsableCode as exc:
            _submit(ctx, NewAttempt(state.next_n(), "no_code", 0, None, no_code=exc, usage=state.last_usage), "seed")
            return PlanRound()
        _submit(ctx, NewAttempt(state.next_n(), "seed", 0, draft, usage=state.last_usage))
        return PlanRound()


@dataclass
class PlanRound(Node):
    """Budgets and early stops first; then repairs and the children of the best parents, one batch."""

    repairs: Sequence[NewAttempt] = ()

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        best = state.parents()[0]
        if state.best_at_last_plan:
            gained = (best.speedup or 0.0) >= state.best_at_last_plan * state.config.min_gain
            state.stale_plans = 0 if gained else state.stale_plans + 1
        if (stop := _budget_spent(state) or _early_stop(ctx, best)) is not None:
            return Finish(stop)
        state.best_at_last_plan = best.speedup or 1.0
        first = state.next_n() + len(self.repairs)
        room = min(state.config.iterations - state.reviewed - len(state.pending()), _fits_in_time(state))
        room -= len(self.repairs)
        batch = list(self.repairs) + (expand_round(ctx, first, room) if room > 0 else [])
        for item in batch:
            _submit(ctx, item)
        if state.pending():
            return ReviewBatch()
        if room <= 0:
            return Finish(_budget_spent(state) or f"iteration budget spent ({state.reviewed} of "
                                                  f"{state.config.iterations})")
        return Finish("no technique left to try from any verified candidate")


@dataclass
class ReviewBatch(Node):
    """Every pending attempt reviewed in one batch, bounded by what is left of the time limit; each
    review is written to the graph and the run directory as soon as the Reviewer reports it."""

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        pending = state.pending()
        adopted = [a for a in pending if a.review is not None]  # reviewed before a kill, not yet in the graph
        for a in adopted:
            _take_review(ctx, a, a.review)
        pending = [a for a in pending if a not in adopted]
        if not pending:
            return Diagnose()
        left = state.time_left()
        if left <= 0:
            return Finish(_budget_spent(state) or "wall-time budget spent")
        ctx.progress(f"review {len(pending)} candidate(s): attempt(s) {', '.join(str(a.n) for a in pending)}")
        taken: set[int] = set()

        def on_result(i: int, review: Review) -> None:
            with ctx.lock:
                if i not in taken:
                    taken.add(i)
                    _take_review(ctx, pending[i], review)

        faults.reach("review.start")
        began, began_s = time.monotonic(), state.elapsed()
        reviews = ctx.deps.review_batch(state.problem, [a.source for a in pending], time_limit_s=left,
                                        on_result=on_result)
        if len(reviews) == len(pending):  # anything the callback did not deliver
            for i, review in enumerate(reviews):
                on_result(i, review)
        if taken:
            state.batches.append({"candidates": len(taken), "seconds": time.monotonic() - began,
                                  "seed": any(a.kind == "seed" for a in pending), "began_s": round(began_s, 2),
                                  **_batch_times(reviews)})
        return Diagnose()


@dataclass
class Diagnose(Node):
    """Each failure the Diagnoser has not seen gets its diagnosis in the graph; the branch ends on
    the same failure twice or when its repairs are spent, otherwise it is repaired."""

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        to_repair = []
        for record in state.undiagnosed():
            faults.reach("diagnose")
            review = record.review
            diagnosis = ctx.deps.diagnoser.diagnose(record.status, record.failure, review.log if review else "")
            ctx.deps.trajectory.write_failure(state.id_of(record.n), diagnosis)
            state.diagnosed.add(record.n)
            branch = state.branch(record.n)
            earlier = [a for a in branch if a.n != record.n and not a.verified and _signature(a) == diagnosis.signature]
            repairs = sum(1 for a in branch if a.kind == "repair")
            if earlier:
                ctx.progress(f"attempt {record.n} failed as attempt {earlier[0].n} did ({record.status}): "
                             "the branch ends")
            elif repairs >= state.config.max_repairs:
                ctx.progress(f"attempt {record.n} failed ({record.status}); {repairs} repair(s) spent on its branch")
            else:
                to_repair.append((record.n, diagnosis, repairs + 1))
        return Repair(to_repair) if to_repair else PlanRound()


@dataclass
class Repair(Node):
    failures: list[tuple[int, Diagnosis, int]]  # attempt, diagnosis, which repair of its branch

    def run(self, ctx: Ctx) -> Node:
        state = ctx.state
        repairs: list[NewAttempt] = []
        for n, diagnosis, attempt in self.failures:
            if _budget_spent(state) is not None:
                break
            record = state.attempts[n]
            ctx.progress(f"repair attempt {n} ({diagnosis.failure_class})")
            number = state.next_n() + len(repairs)
            try:
                draft = _spent(ctx, lambda: ctx.deps.repairer.repair(
                    state.problem, record.draft(), diagnosis, record.review.log if record.review else "",
                    attempt=attempt, trajectory=state.trajectory()))
            except NoUsableCode as exc:
                repairs.append(NewAttempt(number, "no_code", n, None, no_code=exc, usage=state.last_usage))
                continue
            except CannotWrite as exc:
                ctx.progress(f"no repair for attempt {n}: {exc}")
                continue
            same = state.by_hash(code_hash(draft.source))
            if same is not None or any(r.draft and r.draft.source == draft.source for r in repairs):
                ctx.progress(f"the repair of attempt {n} gave code an attempt already has")
                continue
            repairs.append(NewAttempt(number, "repair", n, draft, usage=state.last_usage))
        return PlanRound(repairs)


@dataclass
class Finish(Node):
    reason: str

    def run(self, ctx: Ctx) -> End:
        state = ctx.state
        state.stop_reason = self.reason
        ctx.progress(f"stop: {self.reason}")
        for a in state.pending():  # the budget ran out before their review: say so in the graph
            a.status, a.failure = "unreviewed", f"not reviewed: the run stopped first ({self.reason})"
            _write(ctx, a)
        if not state.batches and state.reviewed == 0 and state.time_left() > 0:
            # No review built the reference, which is about to be returned: check that it runs.
            problem_check.runnable_problem(state.problem, state.config.device, state.config.review_timeout_s)
        _confirm(ctx)
        state.learned = _learn(ctx)
        faults.reach("finish")
        write_artifacts(state)
        faults.reach("finish.run")
        _write_run(ctx, "finished")
        return End(state)


# --- running it -----------------------------------------------------------------------------

def run_loop(state: RunState, deps: Deps, start: Node | None = None) -> RunState:
    """Walk the state machine from `start` (Start by default) to End; the run directory is locked meanwhile."""
    state.out_dir.mkdir(parents=True, exist_ok=True)
    take_lock(state.out_dir)
    state.loop_began_s = state.elapsed()
    ctx = Ctx(state, deps)
    node: Node | End = start or Start()
    try:
        _write_run(ctx, "running")
        while not isinstance(node, End):
            name, began = type(node).__name__, time.monotonic()
            log.debug("node %s", name)
            try:
                node = node.run(ctx)
            except BudgetExhausted as exc:
                node = Finish(str(exc))
            except BrainUnavailable as exc:
                node = Finish(f"the LLM endpoint is unavailable: {exc}")
            finally:
                state.step_seconds[name] = state.step_seconds.get(name, 0.0) + time.monotonic() - began
    except KeyboardInterrupt as exc:  # a stop signal (kskill.interrupts): the run can be resumed
        _write_run(ctx, "interrupted")
        raise RunInterrupted(as_interrupted(exc).signum, state.run_id) from exc
    except ProblemError as exc:  # the reference itself cannot run: found by the first review, which builds it
        state.stop_reason = f"the problem cannot run: {exc}"
        _write_run(ctx, "failed")
        raise
    except BaseException:
        _write_run(ctx, "interrupted")
        raise
    finally:
        release_lock(state.out_dir)
    return node.state


# --- helpers the nodes share -----------------------------------------------------------------

def _submit(ctx: Ctx, item: NewAttempt, kind: str | None = None) -> None:
    """A new candidate becomes a pending attempt: its file first, then its node in the graph (a
    reply without usable code is a failed attempt of its own, class no_code, so the tabu sees it)."""
    state = ctx.state
    faults.reach("submit")
    common = dict(n=item.n, parent=item.parent, technique=item.technique, variant=item.variant,
                  bottleneck=item.bottleneck, decision=item.decision, usage=item.usage)
    if item.draft is None:
        exc = item.no_code
        record = AttemptRecord(kind=kind or ("optimize" if item.technique else "repair"),
                               code_hash=code_hash((exc.reply if exc else "") or str(exc)), source="",
                               status="no_code", correct=False, failure=str(exc), **common)
        if state.by_hash(record.code_hash) is not None:
            return
        state.attempts[record.n] = record
        folder = state.attempt_dir(record.n)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "reply.txt").write_text(exc.reply if exc else "")
        _write(ctx, record)
        ctx.deps.trajectory.write_failure(state.id_of(record.n), Diagnosis("no_code", str(exc), ()))
        state.diagnosed.add(record.n)
        return
    draft = item.draft
    record = AttemptRecord(kind=item.kind, code_hash=code_hash(draft.source), source=draft.source,
                           techniques=draft.techniques, params=draft.params, fallback=draft.fallback, **common)
    state.attempts[record.n] = record
    save_candidate(state, record)
    faults.reach("submit.disk")
    _write(ctx, record)


def _take_review(ctx: Ctx, record: AttemptRecord, review: Review) -> None:
    """Record one review on disk and in the graph; a review the time budget cut short leaves the
    attempt pending (a resumed run reviews it), since it says nothing about the candidate."""
    state = ctx.state
    if review.failure_class == "timeout" and review.failure_phase == BUDGET_PHASE:
        return
    faults.reach("review.result")
    timing = review.timing
    record.review = review
    record.correct = review.passed
    record.status = "verified" if review.passed else (review.failure_class or "other")
    record.speedup = timing.speedup if timing else None
    record.runtime_ms = timing.candidate.median_ms if timing else None
    record.representative = timing.representative if timing else None
    record.failure = "" if review.passed else review.failure_message
    save_review(state, record)
    faults.reach("review.disk")
    _write(ctx, record)
    ctx.progress(f"attempt {record.n} verified, {record.speedup or 0:.3f}x" if review.passed
                 else f"attempt {record.n} failed: {record.status}")


def _write(ctx: Ctx, record: AttemptRecord) -> None:
    state = ctx.state
    attempt = Attempt(id=state.id_of(record.n), origin="run", run_id=state.run_id, n=record.n, kind=record.kind,
                      code_hash=record.code_hash, status=record.status, runtime_ms=record.runtime_ms,
                      speedup=record.speedup, confirmed_speedup=record.confirmed_speedup, correct=record.correct,
                      params=record.graph_params(), variant=record.variant)
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


def _signature(record: AttemptRecord) -> tuple[str, str]:
    return record.status, normalise(record.failure)


def _batch_times(reviews: Sequence[Review]) -> dict[str, dict[str, float]]:
    """The batch's seconds per Reviewer phase, and per finer step, as its last delivered review has them."""
    last = max(reviews, key=lambda r: r.wall_time_s, default=None)
    batch = (last.profile if last else {}).get("batch") or {}
    return {"phases": dict(batch.get("phases") or {}), "steps": dict(batch.get("steps") or {})}


def _fits_in_time(state: RunState) -> int:
    """How many candidates the next batch can review in the time left, judged by the last batch's
    seconds per candidate (no limit before the first batch): a batch the budget cuts short wastes
    the reviews it does not finish, and the best parents' children come first in it."""
    if state.review_s is None:
        return state.config.iterations
    return max(1, int(state.time_left() / state.review_s))


def _budget_spent(state: RunState) -> str | None:
    if state.reviewed >= state.config.iterations:
        return f"iteration budget spent ({state.reviewed} of {state.config.iterations})"
    if state.time_left() <= 0:
        return f"wall-time budget spent ({state.elapsed():.0f} s of {state.config.time_limit_s:.0f} s)"
    return None


def _early_stop(ctx: Ctx, best: AttemptRecord) -> str | None:
    state = ctx.state
    if state.config.patience and state.stale_plans >= state.config.patience:
        return f"{state.stale_plans} rounds in a row gained less than {100 * (state.config.min_gain - 1):.0f}%"
    if state.config.roofline_stop and best.review is not None and best.representative:
        fraction = observe(ctx, best).get("roofline_fraction")
        if isinstance(fraction, (int, float)) and fraction >= state.config.roofline_stop:
            return f"attempt {best.n} reaches {fraction:.0%} of its roofline estimate"
    return None


def _confirm(ctx: Ctx) -> None:
    """Re-time the fastest candidates against the reference, in one fresh batch, and keep those
    figures: a speedup measured once can ride on one slow stretch of the reference (a launch-bound
    reference's time follows the host's load), and the returned model should not be chosen by it.
    The re-timing spends what the search kept back for it (RunState.confirm_reserve_s) and the run's
    overrun margin, no more. Only candidates that would be returned
    on their first figure are re-timed: the re-timing guards against a lucky measurement choosing
    the result, and a run whose candidates all stayed below the reference's gain returns the
    reference, which needs no re-timing."""
    state = ctx.state
    if ctx.deps.confirm_batch is None or state.config.confirm == 0:
        return
    fastest = state.to_confirm()
    if not fastest:
        return
    left = state.time_left() + state.confirm_reserve_s() + state.config.overrun_s - FINISH_RESERVE_S
    if left <= 0:
        log.warning("no time left to re-time the fastest candidates; their first reviews stand")
        return
    ctx.progress(f"confirm attempt(s) {', '.join(str(a.n) for a in fastest)}: time them against the reference again")
    began, began_s = time.monotonic(), state.elapsed()
    reviews = ctx.deps.confirm_batch(state.problem, [a.source for a in fastest], time_limit_s=left)
    state.confirm_batch = {"candidates": len(fastest), "seconds": round(time.monotonic() - began, 2),
                           "began_s": round(began_s, 2), **_batch_times(reviews)}
    for a, review in zip(fastest, reviews):
        if review.failure_phase == BUDGET_PHASE:
            continue  # not re-timed: the first review's figure stands
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
        return (f"priors not updated: timings representative: {state.timing_note}; "
                "use learn=always to override")
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


__all__ = ["Ctx", "Deps", "End", "Node", "Progress", "ReviewBatchFn", "run_loop", "review_summary"]
