"""The sandboxed runs of one review_batch call: the judge started, watched, restarted without a culprit.

The judge (worker.py) restarts the runner itself when a candidate crashes, hangs, runs out of
memory or poisons CUDA. What is left is covered here: the judge dying too (a candidate that kills
its parent, a sandbox limit), and the time limit of the whole call, which is the sandbox's
timeout for each judge run. The judge's signed records are read while it runs, so a verdict
reaches the caller as soon as it is final.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kskill.agents.errors import ReviewError
from kskill.agents.reviewer.models import ReviewOptions
from kskill.agents.reviewer.protocol import RecordReader
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


class BatchRun:
    """What the judge runs of one batch reported: verdicts, the reference's facts, the sandbox outcomes."""

    def __init__(self, problem_path: Path, entries: list[Entry], options: ReviewOptions, device: str,
                 workdir: Path, deadline: float | None, on_final: Callable[[int], None]) -> None:
        self.problem_path, self.entries, self.options = problem_path, entries, options
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
            self.run_judge(attempt, budget)
        for entry in self.pending():
            if self.problem_error:
                break
            if self.deadline is not None and self.budget_left() <= 0:
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

    def run_judge(self, attempt: int, budget: float | None) -> None:
        key = secrets.token_hex(32)
        records = self.workdir / f"records-{attempt}.jsonl"
        records.write_bytes(b"")
        reader = RecordReader(str(records), key)  # opened before the judge unlinks the name
        job_path = self.workdir / f"job-{attempt}.json"
        job_path.write_text(json.dumps(self.job(key, records)))
        backstop = self.options.timeout_s * (4 * len(self.pending()) + 4) + 600
        limits = sandbox_limits(self.options, min(budget, backstop) if budget is not None else backstop,
                                address_space_limit=self.device == "cpu", isolate_network=self.options.isolate_network)
        result: dict[str, Any] = {}

        def sandboxed() -> None:
            try:
                result["outcome"] = run_sandboxed(
                    python_module_argv(WORKER_MODULE, str(job_path)), workdir=self.workdir, limits=limits,
                    extra_env={"TRITON_INTERPRET": "1"} if self.device == "cpu" else {},
                    network_probe=CUDA_PROBE if self.device == "cuda" else ("true",),
                    on_start=self.sandbox_started)
            except BaseException as exc:  # re-raised below, in the caller's thread
                result["error"] = exc

        thread = threading.Thread(target=sandboxed, name="kskill-review-worker", daemon=True)
        thread.start()
        state: dict[str, Any] = {"phase": None, "done": False}
        while thread.is_alive():
            thread.join(POLL_S)
            self.absorb(reader.read(), state)
        self.absorb(reader.read(), state)
        reader.close()
        if "error" in result:
            raise result["error"]
        self.outcomes.append(result["outcome"])
        self.isolation = result["outcome"].isolation  # with the peaks of memory and processes seen
        if not state["done"] and self.problem_error is None:
            self.judge_died(result["outcome"], state["phase"])

    def sandbox_started(self, isolation: dict[str, Any]) -> None:
        self.isolation = isolation

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
            elif kind == "reference":
                self.reference = record
            elif kind == "sandbox":
                self.sandbox = record
            elif kind == "reference_profile":
                self.reference_profile = record
            elif kind == "problem_error":
                self.problem_error = record
            elif kind == "note":
                self.notes.append(str(record.get("message")))
            elif kind == "done":
                state["done"] = True

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
