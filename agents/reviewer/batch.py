"""The sandboxed runs of one review_batch call: the judge started, watched, restarted without a culprit.

The judge (judge.py) restarts the runner itself when a candidate crashes, hangs, runs out of
memory or poisons CUDA. What is left is covered here: the judge dying too (a candidate that kills
its parent, a sandbox limit), and the time limit of the whole call, at which the judge's sandbox
is ended. The judge's signed records are read while it runs, so a verdict reaches the caller as
soon as it is final. A judge may be started before its batch (warm judges, at the end).
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kskill.agents.errors import ReviewError
from kskill.agents.reviewer import profiling
from kskill.agents.reviewer.models import ReviewOptions
from kskill.agents.reviewer.protocol import RecordReader, Stopwatch, put_in_place
from kskill.agents.reviewer.sandbox import (
    MAX_FILE_BYTES, SandboxLimits, SandboxOutcome, python_module_argv, run_sandboxed)

WORKER_MODULE = "kskill.agents.reviewer.worker"
# A sandbox is used on a GPU only if CUDA still initialises inside it. The driver is asked directly
# (milliseconds; importing torch for it took seconds of every run's first review, twice: the review
# worker's sandbox and Nsight Compute's are probed apart); torch answers where libcuda cannot be loaded.
# Torch must be importable in there too: it is found, not imported.
CUDA_PROBE = (sys.executable, "-c", """
import ctypes, importlib.util, sys
if importlib.util.find_spec("torch") is None:
    sys.exit(2)
try:
    driver = ctypes.CDLL("libcuda.so.1")
except OSError:
    import torch
    torch.cuda.init()
    sys.exit(0)
count = ctypes.c_int(0)
sys.exit(0 if driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0 else 1)
""")
POLL_S = 0.1


@dataclass(frozen=True)
class Entry:
    """A candidate the judge reviews: its position in the batch, its file, the kernels its source defines."""

    index: int
    path: Path
    claims: dict[str, list[str]]


def death(outcome: SandboxOutcome, options: ReviewOptions, phase: str) -> tuple[str, str]:
    """Failure class and message when the judge itself did not finish."""
    if outcome.timed_out:
        return "timeout", f"the review worker ran past its limit (during {phase})"
    if outcome.memory_exceeded:
        return "memory", (f"the worker exceeded the {options.memory_limit_mb} MB memory limit: "
                          f"{outcome.limit_detail} (during {phase})")
    if outcome.processes_exceeded:
        return "other", f"the candidate started too many processes: {outcome.limit_detail} (during {phase})"
    if outcome.signal_name == "SIGKILL":
        return "memory", f"the worker was killed (SIGKILL, most likely out of memory) during {phase}"
    if outcome.signal_name:
        return "runtime", f"the worker died with {outcome.signal_name} during {phase}"
    return "runtime", f"the worker exited with status {outcome.returncode} during {phase} without finishing"


def sandbox_limits(options: ReviewOptions, timeout_s: float, *, address_space_limit: bool,
                   isolate_network: bool) -> SandboxLimits:
    """The sandbox's limits for a run of this review: memory, time, what it must hide, whether it may
    run without namespaces. Files may grow to the memory limit: where CUDA IPC does not work, outputs
    reach the judge through files, and a KernelBench output can be several gigabytes."""
    return SandboxLimits(timeout_s=timeout_s, memory_limit_mb=options.memory_limit_mb,
                         address_space_limit=address_space_limit, isolate_network=isolate_network,
                         max_file_bytes=max(MAX_FILE_BYTES, options.memory_limit_mb * 2**20),
                         hidden=tuple(options.hidden_paths), unsandboxed_ok=options.unsandboxed_ok)


@dataclass
class Started:
    """A sandboxed process in a thread of this process, started before its job: it begins its work
    once its job file is there (a judge, or the runner under Nsight Compute)."""

    workdir: Path
    job_path: Path
    thread: threading.Thread
    cancel: threading.Event  # set: the sandbox ends, as at its time limit
    result: dict[str, Any]  # the sandbox's outcome, or the error that kept it from running
    isolation: dict[str, Any]  # what the sandbox isolates, known from its start

    def wait(self, timeout_s: float, on_poll: Callable[[], None] = lambda: None) -> None:
        """Until the sandbox ends; it is cancelled after timeout_s. on_poll runs every POLL_S meanwhile."""
        stop_at = time.monotonic() + timeout_s
        while self.thread.is_alive():
            self.thread.join(POLL_S)
            on_poll()
            if time.monotonic() > stop_at:
                self.cancel.set()

    def end(self) -> None:
        self.cancel.set()
        self.thread.join()


def start_sandboxed(argv: list[str], workdir: Path, job_name: str, limits: SandboxLimits, *,
                    extra_env: dict[str, str] | None = None, network_probe: tuple[str, ...] = ("true",),
                    log_name: str = "worker.log") -> Started:
    started = Started(workdir, workdir / job_name, threading.Thread(), threading.Event(), {}, {})

    def sandboxed() -> None:
        try:
            started.result["outcome"] = run_sandboxed(argv, workdir=workdir, limits=limits, extra_env=extra_env,
                                                      network_probe=network_probe, on_start=started.isolation.update,
                                                      cancel=started.cancel, log_name=log_name)
        except BaseException as exc:  # re-raised by whoever waits for it, in the caller's thread
            started.result["error"] = exc

    started.thread = threading.Thread(target=sandboxed, name="kskill-review-worker", daemon=True)
    started.thread.start()
    return started


def start_judge(workdir: Path, job_name: str, options: ReviewOptions, device: str, timeout_s: float) -> Started:
    """A judge started in workdir; it imports torch and starts its first runner while its job is written."""
    limits = sandbox_limits(options, timeout_s, address_space_limit=device == "cpu",
                            isolate_network=options.isolate_network)
    argv = python_module_argv(WORKER_MODULE, str(workdir / job_name), device, str(options.memory_limit_mb))
    return start_sandboxed(argv, workdir, job_name, limits,
                           extra_env={"TRITON_INTERPRET": "1"} if device == "cpu" else {},
                           network_probe=CUDA_PROBE if device == "cuda" else ("true",))


class BatchRun:
    """What the judge runs of one batch reported: verdicts, the reference's facts, the sandbox outcomes."""

    def __init__(self, problem_path: Path, entries: list[Entry], options: ReviewOptions, device: str,
                 workdir: Path, deadline: float | None, on_final: Callable[[int], None],
                 warm: Started | None = None) -> None:
        self.problem_path, self.entries, self.options = problem_path, entries, options
        self.warm = warm  # a judge started before this batch, in workdir, for its first run
        self.device, self.workdir, self.deadline, self.on_final = device, workdir, deadline, on_final
        self.verdicts: dict[int, dict[str, Any]] = {}
        self.final: set[int] = set()
        self.reference: dict[str, Any] = {}
        self.reference_profile: dict[str, Any] = {}
        self.sandbox: dict[str, Any] = {}  # the environment and network the judge saw from inside
        self.isolation: dict[str, Any] = {}  # what the sandbox isolates, known from its start
        self.notes: list[str] = []
        self.outcomes: list[SandboxOutcome] = []
        self.problem_error: dict[str, Any] | None = None
        self.time_separately = False
        self.phases: dict[str, float] = {}  # seconds in each phase of the judge's runs, summed over them
        self.steps = Stopwatch()  # finer: where the judge's and the runner's seconds went (Judge.watch)

    def spent(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def pending(self) -> list[Entry]:
        return [e for e in self.entries if e.index not in self.final]

    def budget_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def run(self) -> None:
        """Judge runs until every candidate has a final verdict, the time is up, or the problem failed."""
        for attempt in range(len(self.entries) + 2):
            budget = self.budget_left()
            if not self.pending() or self.problem_error or (budget is not None and budget <= 0):
                break
            self.run_judge(attempt, budget, self.warm if attempt == 0 else None)
        for entry in self.pending():
            if self.problem_error:
                break
            if self.deadline is not None and self.budget_left() <= 0:
                if self.verdicts.get(entry.index, {}).get("awaiting") == "profile":
                    self.keep_unprofiled(entry.index)
                    continue
                self.fail(entry.index, "timeout", "the review's time budget ran out before this candidate's "
                                                  "review finished", "budget")
            else:
                self.fail(entry.index, "other", "the review worker stopped too often to finish this candidate",
                          "restart")

    def fail(self, index: int, klass: str, message: str, phase: str) -> None:
        data = self.verdicts.setdefault(index, {})
        data.update(correct=False, failure={"class": klass, "message": message, "phase": phase})
        self.final.add(index)
        self.on_final(index)

    def keep_unprofiled(self, index: int) -> None:
        """A candidate checked, timed and verified again, whose torch.profiler run the time budget cut
        off: its review stands without the profile."""
        data = self.verdicts[index]
        reason = "not run: the review's time budget ran out before torch.profiler"
        data.setdefault("unavailable", {}).update({name: reason for name in profiling.TORCH_PROFILER_METRICS})
        data.setdefault("notes", []).append("the time budget ran out before this candidate was profiled; "
                                            "its correctness and timing stand")
        self.final.add(index)
        self.on_final(index)

    def job(self, key: str, records: Path) -> dict[str, Any]:
        o = self.options
        return {
            "key": key, "records_path": str(records), "device": self.device, "seed": o.seed, "trials": o.trials,
            "atol": o.atol, "rtol": o.rtol, "input_variants": o.input_variants, "problem_path": str(self.problem_path),
            "timing": o.model_dump(include={"warmup_ms", "rep_ms", "min_reps", "max_reps", "cpu_timing_reps"})
            if o.timing else None,
            "compile_reference": o.compile_reference, "profile": o.profile, "max_speedup": o.max_speedup,
            "gpu_memory_fraction": o.gpu_memory_fraction, "memory_limit_mb": o.memory_limit_mb,
            "timeout_s": o.timeout_s, "time_separately": self.time_separately,
            "candidates": [{"index": e.index, "path": str(e.path), "claims": e.claims,
                            "checked": self.verdicts[e.index] if self.verdicts.get(e.index, {}).get("correct") else None}
                           for e in self.pending()],
        }

    def run_judge(self, attempt: int, budget: float | None, judge: Started | None = None) -> None:
        """One judge run over the pending candidates: a warm judge given, else one started now."""
        key = secrets.token_hex(32)
        records = self.workdir / f"records-{attempt}.jsonl"
        records.write_bytes(b"")
        reader = RecordReader(str(records), key)  # opened before the judge unlinks the name
        backstop = self.options.timeout_s * (4 * len(self.pending()) + 4) + 600
        limit = min(budget, backstop) if budget is not None else backstop
        judge = judge or start_judge(self.workdir, f"job-{attempt}.json", self.options, self.device, limit)
        put_in_place(judge.job_path, json.dumps(self.job(key, records)))
        state: dict[str, Any] = {"phase": None, "done": False, "clock": ("start", time.monotonic())}
        self.isolation = self.isolation or judge.isolation  # filled in as the sandbox starts
        judge.wait(limit, lambda: self.absorb(reader.read(), state))
        self.absorb(reader.read(), state)
        reader.close()
        self.clock(state, "exit")
        if "error" in judge.result:
            raise judge.result["error"]
        self.outcomes.append(judge.result["outcome"])
        self.isolation = judge.result["outcome"].isolation  # with the peaks of memory and processes seen
        if not state["done"] and self.problem_error is None:
            self.judge_died(judge.result["outcome"], state["phase"])

    def absorb(self, records: list[dict[str, Any]], state: dict[str, Any]) -> None:
        known = {e.index for e in self.entries}
        for record in records:
            kind, index = record.get("type"), record.get("index")
            if kind == "verdict" and index in known and index not in self.final:
                self.verdicts[index] = record.get("data") or {}
                if record.get("final"):
                    self.final.add(index)
                    self.on_final(index)
            elif kind == "phase":
                state["phase"] = record
                self.clock(state, str(record.get("phase")))
            elif kind == "reference":
                self.reference = record
            elif kind == "sandbox":
                self.sandbox = record
            elif kind == "reference_profile":
                self.reference_profile = record
            elif kind == "problem_error":
                self.problem_error = record
            elif kind == "spent":
                self.steps.add(record.get("seconds"))
            elif kind == "note":
                self.notes.append(str(record.get("message")))
            elif kind == "done":
                state["done"] = True
                self.clock(state, "exit")

    def clock(self, state: dict[str, Any], phase: str) -> None:
        """The phase the judge reports from now on: the one before it gets the seconds since it began
        ("start" is the sandbox and the judge's imports; "exit" the time from its last record to its end)."""
        before, since = state["clock"]
        now = time.monotonic()
        self.spent(before, now - since)
        state["clock"] = (phase, now)

    def judge_died(self, outcome: SandboxOutcome, phase: dict[str, Any] | None) -> None:
        """Blame the candidate in flight, if any; a death before the reference was ready is the problem's."""
        if self.deadline is not None and self.budget_left() <= 0:
            return  # the time limit stopped it; run() marks what is unfinished
        if phase is None:
            raise ReviewError(f"the review worker failed to start: {outcome.log[-2000:]}")
        where = phase.get("phase", "start")
        klass, message = death(outcome, self.options, where)
        if not self.reference:  # it died on the problem's own code
            if klass != "timeout":
                self.problem_error = {"phase": where, "message": message}
                return
            for entry in self.pending():
                self.fail(entry.index, "timeout", f"the problem's reference ran past the limit (during {where})", where)
            return
        index = phase.get("index")
        if index is None:
            self.time_separately = True  # it died timing candidates together: alone, the culprit shows
        elif index not in self.final:
            self.fail(index, klass, message, where)


# --- warm judges ------------------------------------------------------------------------------
# A judge takes seconds to start (the sandbox, torch, CUDA's context, its first runner). A caller
# that reviews batch after batch (the optimization loop) asks review_batch to keep one warm: the
# next batch's judge starts beside this batch's and waits for its job in its own workdir. Only its
# start is shared, never a reference, a runner or a candidate: each batch still gets a fresh judge.
WARM_LIMIT_S = 6 * 3600.0  # a warm judge nobody takes ends after this long
_warm: dict[str, Started] = {}
_warm_lock = threading.Lock()


def warm_key(options: ReviewOptions, device: str) -> str:
    """What a judge's sandbox depends on: a warm judge serves only a batch that would start the same one."""
    sandbox = options.model_dump(include={"memory_limit_mb", "hidden_paths", "isolate_network", "unsandboxed_ok"})
    return json.dumps({"device": device, **sandbox}, sort_keys=True)


def start_warm(options: ReviewOptions, device: str) -> None:
    """Start the judge of the next batch with these options, unless one waits already."""
    key = warm_key(options, device)
    with _warm_lock:
        if key in _warm:
            return
        workdir = Path(tempfile.mkdtemp(prefix="kskill-review-"))
        _warm[key] = start_judge(workdir, "job-0.json", options, device, WARM_LIMIT_S)


def take_warm(options: ReviewOptions, device: str) -> Started | None:
    """The warm judge for a batch with these options, if one is still alive."""
    with _warm_lock:
        judge = _warm.pop(warm_key(options, device), None)
    if judge is not None and not judge.thread.is_alive():
        _end(judge)
        return None
    return judge


def close_warm() -> None:
    """End every warm judge (the caller's last batch is done) and remove their workdirs."""
    with _warm_lock:
        judges = list(_warm.values())
        _warm.clear()
    for judge in judges:
        _end(judge)


def _end(judge: Started) -> None:
    judge.end()
    shutil.rmtree(judge.workdir, ignore_errors=True)
