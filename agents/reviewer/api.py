"""The Reviewer's entry points: review_batch(problem, candidates, options) and review(), a batch of one.

Order of work: validate the problem (errors raise ProblemError); parse each candidate and run the
static anti-cheat checks (failures become Reviews at once); give the rest to one sandboxed judge
(judge.py) that builds the reference once, checks every candidate, then times all that passed
together with the reference (batch.py restarts it without a candidate that kills it); on a GPU,
run Nsight Compute once, on the fastest candidate, and on the reference once per problem
(nsight.py). Candidate code never runs in this process.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kskill.agents.errors import ProblemError, ReviewError
from kskill.agents.problem import Candidate, Problem, load_candidate, load_problem
from kskill.agents.reviewer import kernel_cache, nsight, profiling
from kskill.agents.reviewer.batch import CUDA_PROBE, WARM_LIMIT_S, BatchRun, Entry, Started, start_warm, take_warm
from kskill.agents.reviewer.models import Correctness, Flag, Isolation, Review, ReviewOptions, Timing
from kskill.agents.reviewer.sandbox import SandboxChoice, SandboxOutcome, require_sandbox
from kskill.agents.reviewer.sandbox_layout import TRITON_CACHE
from kskill.agents.reviewer.static_checks import check_source, claimed_kernels

log = logging.getLogger(__name__)
LOG_TAIL_CHARS = 12_000
ResultCallback = Callable[[int, Review], None]


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """Whether the worker will find a CUDA device (asked once; imports torch in this process)."""
    import torch

    return torch.cuda.is_available()


def resolve_device(options: ReviewOptions) -> str:
    if options.device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if options.device == "cuda" and not cuda_available():
        raise ReviewError("device 'cuda' was asked for but no CUDA device is available; use --device cpu")
    return options.device


def require_isolation(options: ReviewOptions) -> SandboxChoice | None:
    """The sandbox candidates will run in; raises SandboxUnavailable, before any work, where there is
    none and the options do not accept running without one."""
    if options.unsandboxed_ok:
        return None
    return require_sandbox(CUDA_PROBE if resolve_device(options) == "cuda" else ("true",))


def review(problem: str | Path | Problem, candidate: str | Path | Candidate,
           options: ReviewOptions | None = None) -> Review:
    """Review one candidate against one problem: a batch of one."""
    return review_batch(problem, [candidate], options)[0]


class Delivery:
    """The reviews of a batch, handed to the caller as each becomes final.

    An exception from the caller's callback is kept and raised once the batch is over, so the
    sandboxed worker is never left running with nobody waiting for it.
    """

    def __init__(self, size: int, on_result: ResultCallback | None, started: float) -> None:
        self.reviews: list[Review | None] = [None] * size
        self.on_result, self.started = on_result, started
        self.error: BaseException | None = None

    def give(self, index: int, result: Review) -> None:
        result.wall_time_s = time.monotonic() - self.started
        self.reviews[index] = result
        if self.on_result is not None and self.error is None:
            try:
                self.on_result(index, result)
            except Exception as exc:  # noqa: BLE001  raised after the batch, see the class docstring
                self.error = exc

    def done(self) -> list[Review]:
        if self.error is not None:
            raise self.error
        return [r for r in self.reviews if r is not None]


def review_batch(problem: str | Path | Problem, candidates: Sequence[str | Path | Candidate],
                 options: ReviewOptions | None = None, *, time_limit_s: float | None = None,
                 on_result: ResultCallback | None = None, keep_warm: bool = False) -> list[Review]:
    """One Review per candidate, in order. One sandboxed worker builds the reference once, checks every
    candidate, then times all passing candidates together, interleaved with the reference. A candidate
    that crashes, hangs or poisons CUDA gets its own failure class; the worker restarts without it and
    the others still get results. `time_limit_s` bounds the whole call (what is unfinished then fails
    with class "timeout" and says the budget ran out). `on_result(i, review)` is called as soon as
    candidate i's review is final. `keep_warm` starts the next batch's judge beside this one
    (batch.py, warm judges; `close_warm()` ends it when no batch follows)."""
    options = options or ReviewOptions()
    problem = problem if isinstance(problem, Problem) else load_problem(problem)
    started = time.monotonic()
    deadline = None if time_limit_s is None else started + time_limit_s
    loaded = [c if isinstance(c, Candidate) else load_candidate(c) for c in candidates]
    delivery = Delivery(len(loaded), on_result, started)
    bases: dict[int, Review] = {}
    for index, candidate in enumerate(loaded):
        base = Review(problem=problem.name, candidate_hash=candidate.source_hash)
        refused = static_verdict(base, candidate, options)
        if refused is not None:
            delivery.give(index, refused)
        else:
            bases[index] = base
    if bases:
        device = resolve_device(options)
        warm = take_warm(options, device)
        workdir = warm.workdir if warm is not None else Path(tempfile.mkdtemp(prefix="kskill-review-"))
        if keep_warm:
            start_warm(options, device)
        if options.kernel_cache:
            kernel_cache.copy_new(Path(options.kernel_cache), workdir / TRITON_CACHE)
        try:
            SandboxedBatch(problem, loaded, bases, options, device, workdir, deadline, delivery, warm).run()
        finally:
            if warm is not None:
                warm.end()  # done already, unless the batch failed before giving it its job
            if options.kernel_cache:
                kernel_cache.copy_new(workdir / TRITON_CACHE, Path(options.kernel_cache))
            if not options.keep_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
    return delivery.done()


def static_verdict(base: Review, candidate: Candidate, options: ReviewOptions) -> Review | None:
    """The Review of a candidate that cannot or must not run, or None (its static flags kept on base)."""
    if candidate.error:
        return base.model_copy(update={"failure_class": "compile", "failure_phase": "parse",
                                       "failure_message": candidate.error})
    base.flags = check_source(candidate.source)
    rejected = base.rejecting_flags()
    if rejected and options.static_checks:
        message = "; ".join(f"line {f.line}: {f.code}: {f.message}" for f in rejected)
        return base.model_copy(update={"failure_class": "cheating", "failure_phase": "static_checks",
                                       "failure_message": message})
    return None


class SandboxedBatch:
    """The candidates that passed the static checks, reviewed by the judge, then profiled by ncu."""

    def __init__(self, problem: Problem, candidates: list[Candidate], bases: dict[int, Review],
                 options: ReviewOptions, device: str, workdir: Path, deadline: float | None,
                 delivery: Delivery, warm: Started | None = None) -> None:
        self.problem, self.bases, self.options, self.device = problem, bases, options, device
        self.workdir, self.deadline, self.delivery = workdir, deadline, delivery
        (workdir / "problem.py").write_text(problem.source)
        entries = []
        for index in bases:
            path = workdir / f"candidate_{index}.py"
            path.write_text(candidates[index].source)
            entries.append(Entry(index, path, claimed_kernels(candidates[index].source)))
        self.paths = {e.index: e.path for e in entries}
        self.ncu = device == "cuda" and options.ncu and options.profile
        self.held: list[int] = []  # passing reviews that wait for the batch's ncu run
        self.batch = BatchRun(workdir / "problem.py", entries, options, device, workdir, deadline, self.on_final, warm)

    def run(self) -> None:
        # ncu and its target start beside the judge and wait: the fastest candidate is named at the end.
        # Not where the reference needs a profile too: on the H200, a batch whose reference was profiled
        # while the waiting ncu was up did not finish in 230 s, so those two run one after the other.
        waiting = self.ncu and not self.options.profile_cache_dir
        ncu = nsight.start_ncu(self.workdir, self.options, "fastest", WARM_LIMIT_S) if waiting else None
        try:
            self.batch.run()
            error = self.batch.problem_error
            if error is not None:
                raise ProblemError(f"problem {self.problem.name} failed while "
                                   f"{str(error.get('phase')).replace('_', ' ')}: {error.get('message')}")
            if self.held:
                self.profile_held(ncu)
        finally:
            if ncu is not None:
                ncu.end()

    def on_final(self, index: int) -> None:
        if self.ncu and self.batch.verdicts[index].get("correct") and not self.batch.verdicts[index].get("failure"):
            self.held.append(index)
        else:
            self.give(index, self.assemble(index))

    def time_left(self, limit: float) -> float:
        return limit if self.deadline is None else min(limit, self.deadline - time.monotonic())

    def profile_held(self, ncu: Started | None) -> None:
        """The reference's ncu profile (cached), then ncu on the fastest held candidate; everyone delivered."""
        reviews = {i: self.assemble(i) for i in self.held}
        timed = [i for i in self.held if reviews[i].timing is not None and reviews[i].timing.representative]
        fastest = max(timed, key=lambda i: reviews[i].timing.speedup) if timed else None
        budget = self.time_left(self.options.ncu_timeout_s)
        skip = nsight.skip_reason((self.batch.reference_profile or {}).get("observations"))
        if skip is not None:
            obs, unavailable = {}, nsight.unavailable_all(skip)
        elif budget > 1:
            gpu = self.batch.reference.get("device", "gpu")
            began = time.monotonic()
            obs, unavailable, _ = nsight.reference_ncu(self.problem, self.workdir, self.options, gpu, budget)
            self.batch.spent("ncu_reference", time.monotonic() - began)
        else:
            obs, unavailable = {}, nsight.unavailable_all("the time budget ran out before Nsight Compute")
        for review_ in reviews.values():
            review_.reference_observations.update(obs)
            review_.reference_unavailable.update(unavailable)
        why = (f"Nsight Compute ran once for this batch, on its fastest candidate (#{fastest})" if fastest is not None
               else "Nsight Compute runs only on a timed candidate")
        for index in self.held:
            if index != fastest:
                reviews[index].unavailable.update(nsight.unavailable_all(why))
                self.give(index, reviews[index])
        if fastest is not None:
            budget = self.time_left(self.options.ncu_timeout_s)
            began = time.monotonic()
            skip = nsight.skip_reason(reviews[fastest].observations)
            if skip is not None:
                profile = {}, nsight.unavailable_all(skip), {}
            elif budget > 1:
                started = ncu or nsight.start_ncu(self.workdir, self.options, "fastest", budget)
                profile = nsight.finish_ncu(started, self.options, self.paths[fastest], budget)
            else:
                profile = {}, nsight.unavailable_all("the time budget ran out before Nsight Compute"), {}
            self.batch.spent("ncu", time.monotonic() - began)
            self.batch.steps.add(profile[2].get("spent"), "ncu.")
            nsight.add_ncu(reviews[fastest], profile)
            self.give(fastest, reviews[fastest])

    def give(self, index: int, review_: Review) -> None:
        """Deliver a review with the batch's seconds per phase as they stand now."""
        batch = review_.profile.setdefault("batch", {})
        batch["phases"] = {k: round(v, 2) for k, v in self.batch.phases.items()}
        batch["steps"] = {k: round(v, 3) for k, v in sorted(self.batch.steps.spent.items())}
        self.delivery.give(index, review_)

    def assemble(self, index: int) -> Review:
        try:
            return build_review(self.bases[index], self.batch.verdicts.get(index, {}), self.batch, self.options,
                                self.device, self.workdir)
        except (ValidationError, TypeError, ValueError) as exc:
            raise ReviewError(f"the review worker returned a malformed result: {exc}") from exc


def _isolation(seen: dict[str, Any], built: dict[str, Any], options: ReviewOptions,
               device: str) -> Isolation | None:
    """The sandbox as it was built (namespaces, mounts, limits) and as the worker saw it from inside
    (which network interfaces, which of our variables were gone)."""
    if not seen:
        return None
    interfaces = [str(i) for i in seen.get("interfaces", [])]
    names = set(seen.get("env_names", []))
    fields = dict(built)
    strategy = fields.pop("memory_strategy", "resident-memory watch")
    if device == "cuda":
        strategy += f"; CUDA allocations capped at {options.gpu_memory_fraction:.0%} of the GPU"
    fields.update(network_isolated=set(interfaces) <= {"lo"},
                  network_note=f"network interfaces inside the sandbox: {', '.join(interfaces) or 'none'}",
                  dropped_env=sorted(k for k in os.environ if k not in names))
    return Isolation(**fields, memory_limit_mb=options.memory_limit_mb, memory_strategy=strategy,
                     timeout_s=options.timeout_s)


def candidate_log(data: dict[str, Any], workdir: Path, outcome: SandboxOutcome | None) -> str:
    """What the candidate's process printed while this candidate was in it (the worker's log when it died)."""
    parts = []
    for name, start, end in data.get("log") or []:
        try:
            with open(workdir / Path(str(name)).name, "rb") as f:
                f.seek(int(start))
                parts.append(f.read(max(0, int(end) - int(start))).decode(errors="replace"))
        except (OSError, ValueError):
            continue
    text = "".join(parts) or (outcome.log if outcome is not None else "")
    trace = (data.get("failure") or {}).get("traceback")
    text = f"{text}\n{trace}".strip() if trace else text.strip()
    return text if len(text) <= LOG_TAIL_CHARS else "...\n" + text[-LOG_TAIL_CHARS:]


def build_review(base: Review, data: dict[str, Any], batch: BatchRun, options: ReviewOptions, device: str,
                 workdir: Path) -> Review:
    """The judge's data for one candidate, with the reference's facts and the sandbox's record, as a Review."""
    reference = batch.reference
    outcome = batch.outcomes[-1] if batch.outcomes else None
    failure = data.get("failure")
    flags = [*base.flags, *(Flag(**f) for f in reference.get("flags", [])), *(Flag(**f) for f in data.get("flags", []))]
    observations = {**reference.get("observations", {}), **(data.get("observations") or {})}
    unavailable = dict(data.get("unavailable") or {})
    timing_obs, timing_missing = profiling.timing_observations(data.get("timing"), device == "cuda")
    observations.update(timing_obs)
    unavailable.update(timing_missing)
    if device != "cuda":
        unavailable.update(nsight.unavailable_all("no CUDA device: Nsight Compute needs a GPU"))
    elif failure:
        unavailable.update(nsight.unavailable_all("Nsight Compute runs only on candidates that pass"))
    elif not (options.ncu and options.profile):
        unavailable.update(nsight.unavailable_all("Nsight Compute was not asked for (ncu or profile turned off)"))
    update: dict[str, Any] = {
        "isolation": _isolation(batch.sandbox, batch.isolation, options, device),
        "log": candidate_log(data, workdir, outcome),
        "device": reference.get("device", device), "compiled": bool(data.get("compiled")), "flags": flags,
        "correct": bool(data.get("correct")) and not failure, "observations": observations,
        "unavailable": unavailable,
        "reference_observations": dict((batch.reference_profile or {}).get("observations") or {}),
        "reference_unavailable": dict((batch.reference_profile or {}).get("unavailable") or {}),
        "profile": {**(data.get("profile") or {}), "notes": [*reference.get("notes", []), *batch.notes,
                                                               *(data.get("notes") or [])],
                    "batch": {"size": len(batch.entries), "judge_runs": len(batch.outcomes)}},
    }
    if data.get("trials") or data.get("parameters_copied"):
        update["correctness"] = correctness_of(data, reference)
    if data.get("timing"):
        update["timing"] = Timing(**data["timing"])
    if options.keep_workdir:
        update["profile"]["workdir"] = str(workdir)
    if failure:
        update.update(failure_class=failure.get("class", "other"), failure_message=str(failure.get("message", "")),
                      failure_phase=str(failure.get("phase", "")))
    return base.model_copy(update=update)


def correctness_of(data: dict[str, Any], reference: dict[str, Any]) -> Correctness:
    trials = data.get("trials", [])
    errors = [o for t in trials for o in t.get("outputs", [])]
    return Correctness(
        trials_run=len(trials), trials_passed=sum(bool(t.get("passed")) for t in trials), trials=trials,
        reference_deterministic=reference.get("reference_deterministic"),
        reference_self_max_abs_diff=reference.get("reference_self_max_abs_diff"),
        parameters_copied=data.get("parameters_copied", 0), skipped_variants=reference.get("skipped_variants", {}),
        max_abs_error=max((o.get("max_abs_error", 0.0) for o in errors), default=0.0),
        max_rel_error=max((o.get("max_rel_error", 0.0) for o in errors), default=0.0),
    )
