"""The typed state of one optimization run, its settings, and its run directory.

The graph holds the trajectory (kskill/trajectory.py); the run directory holds the files:
the problem, each candidate's code and review JSON, and at the end model_new.py and the
report. `load_state` rebuilds a RunState from both, which is how `--resume` continues.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kskill.agents.brains.base import Draft, Fallback, TrajectoryStep, Usage
from kskill.agents.optimizer import SAME_CODE
from kskill.agents.planner import MIN_GAIN
from kskill.agents.problem import Problem, load_problem
from kskill.agents.reviewer import Review
from kskill.trajectory import RunError, Trajectory, attempt_id


class LoopConfig(BaseModel):
    """Budgets, stopping rules, search and review settings of one run (stored with the Run as JSON)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    brain: Literal["recipes", "llm"] = "recipes"
    iterations: int = Field(40, ge=1, description="candidates reviewed in all (seed, optimizations, repairs)")
    time_limit_s: float = Field(1800.0, gt=0, description="wall time of one invocation")
    width: int = Field(4, ge=0, description="techniques the Planner chooses per parent, each with every "
                                            "variant the graph allows (0: every admissible technique)")
    beam: int = Field(2, ge=0, description="parents expanded per round, best first (0: every verified candidate)")
    max_repairs: int = Field(2, ge=0, description="repairs per branch")
    patience: int = Field(3, ge=0, description="rounds in a row that gain less than min_gain before stopping "
                                               "(0: never stop for that)")
    min_gain: float = Field(MIN_GAIN, ge=1.0)
    roofline_stop: float = Field(0.8, ge=0, description="stop when the best reaches this fraction of its "
                                                        "roofline (0: never stop for that)")
    trials: int = Field(3, ge=1)
    cpu_timing_reps: int = Field(7, ge=2, description="timed calls per function without a GPU (noisy, not representative)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    review_timeout_s: float = Field(300.0, gt=0)
    atol: float | None = None
    rtol: float | None = None
    retrieval: Literal["hybrid", "lexical", "off"] = "hybrid"
    learn: Literal["auto", "always", "never"] = "auto"
    max_tokens: int = Field(400_000, ge=1)
    max_cost_usd: float | None = None
    confirm: int = Field(2, ge=0, description="fastest candidates re-timed against the reference at the end "
                                               "(GPU timings only); the fastest in that re-timing is returned")

    @property
    def overrun_s(self) -> float:
        """How far past its time limit a run may go, for the re-timing and the report: 10 % or 15 s."""
        return max(0.1 * self.time_limit_s, 15.0)

    @classmethod
    def exhaustive(cls, **settings: Any) -> LoopConfig:
        """The same search with nothing cut: every admissible technique and variant from every
        verified candidate, no early stop; the reference the default settings are measured against."""
        return cls(**{"iterations": 500, **settings, "width": 0, "beam": 0, "patience": 0, "roofline_stop": 0})


@dataclass
class AttemptRecord:
    """One candidate of the run, as the loop knows it (the graph's Attempt plus files and review)."""

    n: int
    kind: str  # reference | seed | optimize | repair
    code_hash: str
    source: str
    techniques: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    parent: int | None = None
    technique: str | None = None  # what this attempt added
    variant: str = ""  # the technique's variant, when the plan named one
    bottleneck: str | None = None
    decision: str | None = None
    status: str = "pending"  # pending | verified | unreviewed (the budget ran out) | a failure class
    correct: bool | None = None
    speedup: float | None = None
    runtime_ms: float | None = None
    representative: bool | None = None
    confirmed_speedup: float | None = None  # re-timed at the end of the run (0.0: the re-review failed)
    failure: str = ""
    review: Review | None = None
    usage: Usage = Usage()  # what the brain spent writing this candidate
    fallback: Fallback | None = None  # the LLM's reply failed and this brain wrote the candidate instead

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    @property
    def final_speedup(self) -> float:
        """The confirmation's speedup when the attempt was re-timed, its review's otherwise."""
        return self.confirmed_speedup if self.confirmed_speedup is not None else (self.speedup or 0.0)

    def draft(self) -> Draft:
        return Draft(source=self.source, techniques=self.techniques, params=self.params)

    def step(self) -> TrajectoryStep:
        return TrajectoryStep(self.n, self.kind, self.technique, self.status, self.speedup, self.failure)

    def graph_params(self) -> str:
        fallback = {"fallback": self.fallback.record()} if self.fallback else {}
        return json.dumps({"techniques": list(self.techniques), "params": self.params,
                           "usage": asdict(self.usage), **fallback}, sort_keys=True)


@dataclass
class RunState:
    run_id: str
    problem: Problem
    config: LoopConfig
    out_dir: Path
    attempts: dict[int, AttemptRecord] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    exhausted: set[int] = field(default_factory=set)  # parents nothing is left to try from
    declined: dict[int, dict[str, str]] = field(default_factory=dict)  # parent -> technique/variant -> why not
    diagnosed: set[int] = field(default_factory=set)  # failed attempts the Diagnoser has seen
    plans: int = 0  # plan rounds so far (Decisions are numbered by it)
    # Each review batch: candidates, seconds (unrounded: review_s divides by them), seed, phases.
    batches: list[dict[str, Any]] = field(default_factory=list)
    confirm_batch: dict[str, Any] = field(default_factory=dict)  # the end-of-run re-timing, as a batch above
    # Seconds of this invocation in each step of the loop (by node) and, for a new run, in the steps before
    # it ("setup: imports", "setup: store", "setup: agents"), and where its clock stood when the loop began.
    step_seconds: dict[str, float] = field(default_factory=dict)
    loop_began_s: float | None = None
    stale_plans: int = 0  # rounds in a row that gained less than min_gain
    best_at_last_plan: float = 0.0
    usage: Usage = Usage()
    stop_reason: str = ""
    previous_usage: Usage = Usage()  # spent by earlier invocations of a resumed run
    last_usage: Usage = Usage()  # the latest brain call's
    learned: str = ""  # what the run taught the skill base

    # -- questions the nodes ask -------------------------------------------------------------

    def id_of(self, n: int) -> str:
        return attempt_id(self.run_id, self.attempts[n].code_hash)

    def by_hash(self, code_hash: str) -> AttemptRecord | None:
        return next((a for a in self.attempts.values() if a.code_hash == code_hash), None)

    def next_n(self) -> int:
        return max(self.attempts, default=-1) + 1

    @property
    def reviewed(self) -> int:
        """Candidates reviewed or refused so far (the iteration count; the reference is not one)."""
        return sum(1 for a in self.attempts.values()
                   if a.kind != "reference" and a.status not in ("pending", "unreviewed"))

    def pending(self) -> list[AttemptRecord]:
        """Attempts written but not reviewed yet, in order."""
        return sorted((a for a in self.attempts.values() if a.status == "pending"), key=lambda a: a.n)

    def undiagnosed(self) -> list[AttemptRecord]:
        """Reviewed failures the Diagnoser has not seen (after a resume, say)."""
        return sorted((a for a in self.attempts.values() if a.n not in self.diagnosed and a.kind != "reference"
                       and a.status not in ("pending", "verified", "unreviewed", "no_code")), key=lambda a: a.n)

    def verified(self) -> list[AttemptRecord]:
        """Verified candidates, fastest first (the reference last among equals)."""
        return sorted((a for a in self.attempts.values() if a.verified),
                      key=lambda a: (-(a.speedup or 0.0), a.kind == "reference", a.n))

    def candidates(self) -> list[AttemptRecord]:
        """Verified candidates other than the reference, fastest first."""
        return [a for a in self.verified() if a.kind != "reference"]

    @property
    def timings_representative(self) -> bool:
        """Whether every timed candidate was timed on a GPU (the reference is never timed on its own)."""
        timed = [a.representative for a in self.attempts.values() if a.representative is not None]
        return bool(timed) and all(timed)

    @property
    def timing_note(self) -> str:
        """`timings_representative` in words, telling a run that timed nothing from one without a GPU."""
        if self.timings_representative:
            return "yes"
        if all(a.representative is None for a in self.attempts.values()):
            return "none: no candidate was timed"
        return "no (no GPU: the Triton interpreter)"

    def not_written(self) -> dict[str, str]:
        """Each technique or variant that a plan chose and the brain wrote no code for, with why (the
        first reason given, from whichever parent); one whose code was another attempt's is left out."""
        reasons: dict[str, str] = {}
        for declined in self.declined.values():
            for key, why in declined.items():
                if not why.startswith(SAME_CODE):
                    reasons.setdefault(key, why)
        return dict(sorted(reasons.items()))

    def parents(self) -> list[AttemptRecord]:
        """Where the Planner starts from, in order: verified candidates fastest first; the reference
        only when no candidate is verified (the seed is its faithful stand-in otherwise)."""
        return self.candidates() or [self.attempts[0]]

    def best(self) -> AttemptRecord:
        """The candidate to return: the fastest verified one that beats the reference, else the reference.
        Once candidates were re-timed at the end, only they compete, by their confirmed speedups."""
        confirmed = sorted((a for a in self.attempts.values() if a.confirmed_speedup is not None),
                           key=lambda a: (-a.final_speedup, a.n))
        for a in confirmed or self.verified():
            if a.kind != "reference" and a.final_speedup >= self.config.min_gain:
                return a
        return self.attempts[0]

    def branch_root(self, n: int) -> int:
        while self.attempts[n].kind == "repair" and self.attempts[n].parent is not None:
            n = self.attempts[n].parent
        return n

    def branch(self, n: int) -> list[AttemptRecord]:
        """The attempts of n's branch: its root (an optimization or the seed) and the repairs below it."""
        root = self.branch_root(n)
        return [a for a in self.attempts.values() if self.branch_root(a.n) == root]

    def trajectory(self) -> tuple[TrajectoryStep, ...]:
        return tuple(self.attempts[n].step() for n in sorted(self.attempts))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def review_s(self) -> float | None:
        """Seconds per candidate in the last batch's review (None before the first batch)."""
        return self.batches[-1]["seconds"] / self.batches[-1]["candidates"] if self.batches else None

    def to_confirm(self) -> list[AttemptRecord]:
        """The candidates the end of the run re-times: the fastest that would be returned on their first
        figure (GPU timings only), at most `confirm` of them."""
        return [a for a in self.candidates()
                if a.representative and (a.speedup or 0.0) >= self.config.min_gain][:self.config.confirm]

    def confirm_reserve_s(self) -> float:
        """Seconds kept back from the search for that re-timing, judged by the last batch's seconds per
        candidate: a search that spends the whole limit leaves the re-timing only the overrun margin,
        and a re-timing cut short lets one lucky figure choose the returned module."""
        return (self.review_s or 0.0) * len(self.to_confirm())

    def time_left(self) -> float:
        """Seconds of the time limit left to reviews and brain calls, the re-timing's reserve set aside."""
        return self.config.time_limit_s - self.elapsed() - self.confirm_reserve_s()

    @property
    def total_usage(self) -> Usage:
        return self.previous_usage + self.usage

    # -- files -------------------------------------------------------------------------------

    def attempt_dir(self, n: int) -> Path:
        return self.out_dir / "attempts" / f"{n:03d}-{self.attempts[n].kind}"


def save_candidate(state: RunState, record: AttemptRecord) -> Path:
    folder = state.attempt_dir(record.n)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "candidate.py").write_text(record.source)
    if record.fallback and record.fallback.reply:
        (folder / "llm_reply.txt").write_text(record.fallback.reply)  # what the LLM said instead
    return folder


def save_review(state: RunState, record: AttemptRecord) -> None:
    if record.review is not None:
        (state.attempt_dir(record.n) / "review.json").write_text(record.review.to_json())


# --- the run directory's lock: one process works on a run at a time -------------------------
# flock(2) on run.lock: atomic, and released by the kernel when its holder dies however it dies, so
# a lock is never stale. The file is never removed (removing it would let a second caller lock a
# new file while a first still waits on the old one); it holds the last holder's pid for messages.

_held: dict[Path, int] = {}  # run directory -> the open lock file of this process


def take_lock(out_dir: Path) -> None:
    """Lock the run directory for this process, or raise RunError naming the process that holds it."""
    key = out_dir.resolve()
    if key in _held:
        return
    fd = os.open(key / "run.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        who = f"process {holder}" if holder.isdigit() else "another process"
        raise RunError(f"{who} is working on the run in {out_dir}; wait for it or stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _held[key] = fd


def release_lock(out_dir: Path) -> None:
    fd = _held.pop(out_dir.resolve(), None)
    if fd is not None:
        os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor releases the flock


# --- resume ---------------------------------------------------------------------------------

def load_state(trajectory: Trajectory, run_id: str) -> RunState:
    """A RunState rebuilt from the graph (attempts, lineage, decisions) and the run directory (code, reviews)."""
    run = trajectory.require_run(run_id)
    settings = json.loads(run.get("config") or "{}")
    out_dir = Path(settings.get("out_dir", ""))
    if not (out_dir / "problem.py").is_file():
        raise RunError(f"run {run_id} kept its files in {out_dir}, which no longer holds problem.py; "
                       "resume needs the run directory")
    problem = load_problem(out_dir / "problem.py", name=run["problem"])
    state = RunState(run_id, problem, LoopConfig(**settings.get("loop", {})), out_dir)
    for row in trajectory.attempts(run_id):
        a = row["attempt"]
        record = AttemptRecord(
            n=a["n"], kind=a["kind"], code_hash=a["code_hash"], source="",
            techniques=tuple(row["params"].get("techniques", [])), params=row["params"].get("params", {}),
            parent=row["parent"], technique=(row["applied"] or [None])[0], variant=a.get("variant", ""),
            bottleneck=row["bottleneck"],
            decision=row["decision"], status=a["status"], correct=a.get("correct"), speedup=a.get("speedup"),
            runtime_ms=a.get("runtime_ms"), confirmed_speedup=a.get("confirmed_speedup"),
            failure=row["failure_message"] or "",
            usage=Usage(**row["params"].get("usage", {})),
            fallback=Fallback(**row["params"]["fallback"]) if row["params"].get("fallback") else None)
        state.attempts[record.n] = record
        _load_files(state, record)
        state.previous_usage += record.usage
        if row["failure_class"]:
            state.diagnosed.add(record.n)
    if 0 not in state.attempts:
        raise RunError(f"run {run_id} has no reference attempt in the graph; start a new run instead")
    state.plans = len({a.decision for a in state.attempts.values() if a.decision})
    return state


def _load_files(state: RunState, record: AttemptRecord) -> None:
    if record.kind == "reference":
        from kskill.agents.generator import reference_candidate

        record.source = reference_candidate(state.problem).source
        return
    folder = state.attempt_dir(record.n)
    candidate = folder / "candidate.py"
    if candidate.is_file():
        record.source = candidate.read_text()
    elif record.status != "no_code":
        raise RunError(f"attempt {record.n} of run {state.run_id} has no {candidate}; resume needs the run directory")
    review = folder / "review.json"
    if review.is_file() and record.status != "pending":
        record.review = Review.model_validate_json(review.read_text())
        record.representative = record.review.timing.representative if record.review.timing else None
    elif review.is_file():
        # The run was stopped between writing the review and the graph: take the review as it is
        # rather than reviewing the candidate again (the loop writes it to the graph first thing).
        try:
            found = Review.model_validate_json(review.read_text())
        except ValueError:  # cut off mid-write: the candidate is reviewed again
            return
        if found.candidate_hash == record.code_hash:
            record.review = found
