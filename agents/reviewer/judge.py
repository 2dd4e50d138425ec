"""The judge of a review batch, in the sandbox (started by worker.py, `python -m kskill.agents.reviewer.worker JOB.json`).

Why the judge and the candidates live in two processes
------------------------------------------------------
Candidate code is arbitrary Python. Inside the process that imports it, it reaches every object
(sys.modules, gc, ctypes, which torch itself imports), so no check in that process can be made
to hold: identity checks are undone by whoever they check, and a verdict kept there can be
rewritten. The review is therefore split in two:

- the judge (this module) loads the problem, builds the reference, draws every trial's inputs,
  computes the reference's outputs once per trial (kept for every candidate of the batch, memory
  permitting), compares, and writes the signed records the kskill process reads. It never imports
  candidate code.
- the runner (runner.py), a child of the judge, imports the candidates, draws the same inputs from
  the same seeds, runs and times them, and sends their outputs here (transfer.py).

What holds, and why:
- A wrong answer cannot pass. The comparison runs here, on outputs the runner never held; the
  runner cannot reach this process (a separate address space; this process is made non-dumpable,
  so /proc/<pid>/mem and ptrace are closed to it; only the runner's memory is ever shared).
  Patching compare_outputs in the runner patches nothing that decides.
- A forged verdict is not believed: records are signed with a key the runner never sees, in a
  file whose name is gone before any candidate code runs (protocol.py, worker.py).
- A crash, a hang, an out-of-memory or a poisoned CUDA context ends only the runner: this process
  classifies the candidate in flight and starts a fresh runner for the others (channel.py).
- Timing is measured in the runner, beside the candidate, because that is where its kernels run.
  It rests on four checks: the runner's harness integrity (identities and code, after every call);
  on a GPU, torch.profiler's kernel times against the CUDA events (a speedup the profiler does not
  confirm is rejected); this process's own timing of its own reference, which the runner's must
  match; and Nsight Compute, out of process, on the fastest candidate (nsight.py). What is left:
  code that takes over the runner at the machine level (writing C memory) can misreport its own
  time. It still cannot pass a wrong answer.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kskill.agents.reviewer.channel import RunnerDied, RunnerProcess
from kskill.agents.reviewer.correctness import compare_outputs, fingerprint, flatten_outputs, same_fingerprint
from kskill.agents.reviewer.protocol import ABLATION_SEED, EXCESSIVE_SEED, VERIFY_SEED, RecordWriter, Stopwatch
from kskill.agents.reviewer.reference import Reference, Trial
from kskill.agents.reviewer.timing import timing_problems, timing_record
from kskill.agents.reviewer.transfer import OutputReceiver, TransferError

RUNNER_START_S = 300.0  # importing torch and triton and building the reference in a fresh runner
RUNNER_HEALTH_S = 30.0  # a synchronize and one tiny kernel: seconds at most, unless the context hangs


class ProblemInputsDiffer(Exception):
    """get_inputs() gave the runner other tensors than the judge for the same seed."""


@dataclass
class Ran:
    """A trial as the judge saw it: the result, fingerprints of both sides' outputs, the runner's reply."""

    result: dict[str, Any]
    output_print: list | None  # None where the outputs were not read (a wrong shape, an error)
    expected_print: list
    reply: dict[str, Any]
    error: bool = False


def new_state(index: int) -> dict[str, Any]:
    return {"index": index, "compiled": False, "correct": False, "failure": None, "flags": [], "trials": [],
            "parameters_copied": 0, "timing": None, "observations": {}, "unavailable": {}, "profile": {},
            "notes": [], "log": [], "final": False, "awaiting": None}


class Judge:
    def __init__(self, job: dict[str, Any], records: RecordWriter, workdir: Path, spare: RunnerProcess) -> None:
        self.job, self.records, self.workdir = job, records, workdir
        self.cuda = job["device"] == "cuda"
        self.device = torch.device(job["device"])
        self.seed, self.atol, self.rtol = job["seed"], job.get("atol"), job.get("rtol")
        self.at = "start"
        self.states: dict[int, dict[str, Any]] = {}
        self.entries = {e["index"]: e for e in job["candidates"]}
        self.runner: RunnerProcess | None = None
        self.generation = 1  # the spare, started with the judge, is runner 1
        self.loaded: set[int] = set()
        self.transfer = "cuda_fd" if self.cuda else "file"
        self.time_separately = job.get("time_separately", False)
        self.judge_reference_ms: float | None = None
        self.marks: dict[int, tuple[str, int]] = {}
        (workdir / "transfer").mkdir(exist_ok=True)
        self.receiver = OutputReceiver(workdir / "transfer")
        self.reference: Reference | None = None
        self.spare: RunnerProcess | None = spare  # started before it is needed
        # Where a check's time goes (judge.*: this process; runner.<op>: a command to the runner, reply
        # included; run.*: the runner's own account of a trial, inside runner.run). Diagnostics only.
        self.watch = Stopwatch(torch.cuda.synchronize if self.cuda else None)

    def load_reference(self) -> None:
        self.reference = Reference(self.job, lambda phase: self.phase(None, phase))
        self.records.write("reference", **self.reference.record)

    # records --------------------------------------------------------------------------------
    def phase(self, index: int | None, phase: str) -> None:
        self.at = phase
        self.records.write("phase", index=index, phase=phase)

    def flush_spent(self) -> None:
        self.watch.lap("judge.other")
        self.records.write("spent", seconds=self.watch.take())

    def publish(self, index: int, final: bool) -> None:
        self.flush_spent()
        state = self.states[index]
        if index in self.marks:
            name, start = self.marks.pop(index)
            state["log"].append([name, start, _size(self.workdir / name)])
        state["final"] = final
        self.records.write("verdict", index=index, final=final, data=state)

    def fail(self, index: int, klass: str, message: str, phase: str, trace: str = "") -> None:
        self.states[index].update(correct=False, failure={"class": klass, "message": message, "phase": phase,
                                                           "traceback": trace})
        self.publish(index, final=True)

    def flag(self, index: int, code: str, message: str, severity: str = "reject") -> None:
        flags = self.states[index]["flags"]
        if not any(f["code"] == code for f in flags):  # the first occurrence is the one reported
            flags.append({"code": code, "severity": severity, "message": message, "origin": "dynamic"})

    def add_flags(self, index: int, flags: Any) -> None:
        for f in flags if isinstance(flags, list) else []:
            if isinstance(f, dict) and f.get("severity") in ("reject", "warn", "info"):
                self.flag(index, str(f.get("code")), str(f.get("message"))[:2000], f["severity"])

    def rejections(self, index: int) -> list[dict[str, Any]]:
        return [f for f in self.states[index]["flags"] if f["severity"] == "reject"]

    # the runner ----------------------------------------------------------------------------------
    def spawn_runner(self) -> RunnerProcess:
        """A runner process, importing torch and triton while the judge does other work."""
        self.generation += 1
        return RunnerProcess(self.workdir / f"runner-{self.generation}.log", self.job["device"],
                             self.job["memory_limit_mb"], watch_memory=self.cuda)

    def start_runner(self) -> RunnerProcess:
        runner, self.spare = self.spare or self.spawn_runner(), None
        fraction = self.job["gpu_memory_fraction"]
        if self.cuda:  # the judge's own reserve comes out of the candidate's share
            fraction -= torch.cuda.memory_reserved() / torch.cuda.get_device_properties(self.device).total_memory
        setup = {"op": "setup", "problem_path": self.job["problem_path"], "device": self.job["device"],
                 "seed": self.seed, "memory_fraction": max(0.05, fraction), "transfer": self.transfer,
                 "transfer_dir": str(self.workdir / "transfer"), "reference": self.reference.facts,
                 "compile_reference": self.job.get("compile_reference", False)}
        reply = runner.request(setup, max(RUNNER_START_S, self.job["timeout_s"]), "starting the runner")
        if "error" in reply:
            runner.kill()
            raise RunnerDied("other", f"the runner could not set the problem up: {reply['error'].get('message')}")
        if not same_fingerprint(reply.get("input_fingerprint"), self.reference.input_print):
            runner.kill()
            raise ProblemInputsDiffer("get_inputs() gave another process different tensors for the same seed; "
                                      "inputs must come from torch's (or Python's) seeded generators")
        if reply.get("transfer_note"):
            self.records.write("note", message=reply["transfer_note"])
        failed = self.probe_fails(runner, reply.get("probe")) if reply.get("transfer") == "cuda_fd" else None
        if failed:
            runner.close()
            self.transfer = "file"
            self.records.write("note", message=f"the judge could not map the runner's shared GPU memory ({failed}); "
                                               "outputs go through files")
            return self.start_runner()
        self.transfer = reply.get("transfer", self.transfer)
        return runner

    def probe_fails(self, runner: RunnerProcess, descriptors: Any) -> str | None:
        """Why the runner's probe output did not arrive intact (None: it did)."""
        want = torch.arange(4, dtype=torch.float32, device=self.device)
        try:
            got = self.receiver.receive(descriptors, [want], runner.fd_socket)
            return None if torch.equal(got[0], want) else "the probe arrived with other values"
        except (TransferError, RuntimeError) as exc:
            return str(exc)[:300]

    def drop_runner(self) -> None:
        if self.runner is not None:
            self.runner.close()
        self.runner, self.loaded = None, set()

    def close(self) -> None:
        self.drop_runner()
        if self.spare is not None:
            self.spare.close()
            self.spare = None

    def ask(self, index: int | None, message: dict[str, Any], timeout_s: float, doing: str) -> dict[str, Any] | None:
        """The runner's reply, or None when it died (the candidate in flight, if any, then has its verdict)."""
        phase = self.at
        self.watch.lap("judge.other")
        try:
            if self.runner is None:
                self.runner = self.start_runner()
                self.watch.lap("runner.start")
            reply = self.runner.request(message, max(timeout_s, 0.1), doing, self.job["timeout_s"])
            self.watch.lap(f"runner.{message.get('op')}")
            self.watch.add(reply.get("spent"), "run.")
        except RunnerDied as exc:
            self.drop_runner()
            if index is not None:
                self.fail(index, exc.failure_class, str(exc), phase)
            return None
        if reply.get("contaminated"):
            self.drop_runner()  # the next candidate gets a runner nobody has patched
        return reply

    def begin(self, index: int) -> None:
        """Mark where the runner's log stands: what it prints from here on belongs to this candidate."""
        current = self.runner or self.spare  # or a runner started next, in a new log
        name = current.log_path.name if current is not None else f"runner-{self.generation + 1}.log"
        self.marks.setdefault(index, (name, _size(self.workdir / name)))

    def ensure_loaded(self, index: int, deadline: float) -> bool:
        if index in self.loaded and self.runner is not None:
            return True
        self.phase(index, "load_candidate")
        entry = self.entries[index]
        reply = self.ask(index, {"op": "load", "index": index, "path": entry["path"],
                                 "module": f"kskill_candidate_{index}"}, deadline - time.monotonic(),
                         "loading the candidate")
        if reply is None:
            return False
        self.add_flags(index, reply.get("flags"))
        if self.failed_reply(index, reply):
            return False
        self.loaded.add(index)
        self.states[index].update(compiled=True, parameters_copied=int(reply.get("parameters_copied", 0)))
        return True

    def failed_reply(self, index: int, reply: dict[str, Any]) -> bool:
        """Turn an error or a rejection in a reply into the candidate's final verdict."""
        error = reply.get("error")
        if self.rejections(index):
            self.reject(index)
            return True
        if isinstance(error, dict):
            self.fail(index, str(error.get("class", "runtime")), str(error.get("message", "")),
                      str(error.get("phase", self.at)), str(error.get("traceback", "")))
            return True
        return False

    def reject(self, index: int) -> None:
        self.fail(index, "cheating", "; ".join(f"{f['code']}: {f['message']}" for f in self.rejections(index)), self.at)

    # correctness --------------------------------------------------------------------------------
    def trial(self, index: int, trial: Trial, deadline: float, probe: str | None = None,
              refill: bool = False) -> Ran | None:
        """One trial of a candidate, compared here; None if the runner died (the verdict is then written)."""
        self.watch.lap("judge.other")
        expected, expected_print, input_print = self.reference.expected(trial)
        self.watch.lap("judge.reference")
        reply = self.ask(index, {"op": "run", "index": index, "seed": trial.seed, "variant": trial.variant,
                                 "probe": probe, "refill": refill}, deadline - time.monotonic(),
                         f"running trial {trial.number}")
        if reply is None:
            return None
        self.add_flags(index, reply.get("flags"))
        result = {"trial": trial.number, "seed": trial.seed, "variant": trial.variant, "passed": False,
                  "outputs": [], "message": ""}
        if "error" in reply or reply.get("contaminated"):
            return Ran(result, None, expected_print, reply, error=True)
        if not same_fingerprint(reply.get("input_fingerprint"), input_print):
            self.receiver.discard(reply.get("outputs"), self.runner.fd_socket)
            result["message"] = "the candidate's process ran on other inputs than the judge drew"
            return Ran(result, None, expected_print, reply)
        try:
            got = self.receiver.receive(reply.get("outputs"), flatten_outputs(expected), self.runner.fd_socket)
        except TransferError as exc:
            result["message"] = f"the outputs could not be read: {exc}"
            return Ran(result, None, expected_print, reply)
        self.watch.lap("judge.receive")
        result["passed"], result["outputs"], result["message"] = compare_outputs(
            got, expected, self.atol, self.rtol, self.reference.floors.get(trial.variant, ()))
        self.watch.lap("judge.compare")
        unread = any(isinstance(g, torch.Tensor) and g.is_meta for g in got)  # a wrong shape: data never read
        printed = None if unread else fingerprint(got)
        self.watch.lap("judge.fingerprint")
        return Ran(result, printed, expected_print, reply)

    def check(self, index: int) -> None:
        """Load a candidate and run every trial; its verdict is final unless it passed."""
        state = self.states[index] = new_state(index)
        deadline = time.monotonic() + self.job["timeout_s"]
        self.begin(index)
        if not self.ensure_loaded(index, deadline):
            self.drop_if_poisoned(index)
            return
        self.phase(index, "correctness")
        runs: list[Ran] = []
        for trial in self.reference.trials:
            ran = self.trial(index, trial, deadline)
            if ran is None:
                return
            if ran.error:
                if not self.failed_reply(index, ran.reply):
                    self.reject(index)
                self.drop_if_poisoned(index)
                return
            runs.append(ran)
            state["trials"] = [r.result for r in runs]
        self.judge_trials(index, runs, deadline)
        if state["final"]:
            return
        reply = self.ask(index, {"op": "finish", "index": index, "keep": True}, deadline - time.monotonic(),
                         "checking the CUDA context after the trials")
        if reply is None:
            return
        if not reply.get("healthy", True):
            self.drop_runner()
            self.fail(index, "runtime", f"the candidate left the CUDA context unusable: {reply.get('why')}", "correctness")
            return
        if reply.get("settings_changed"):
            self.flag(index, "global_setting", f"the candidate changed {reply['settings_changed']}; the reference "
                      "ran with the problem's own settings", severity="warn")
        failed = [r.result for r in runs if not r.result["passed"]]
        if self.rejections(index):
            self.reject(index)
        elif failed:
            self.fail(index, "numeric", f"{len(failed)} of {len(runs)} trials failed; trial {failed[0]['trial']}: "
                                        f"{failed[0]['message']}", "correctness")
        else:
            state["correct"] = True
            self.publish(index, final=not (self.job.get("timing") or self.job.get("profile")))

    def drop_if_poisoned(self, index: int) -> None:
        """After a candidate failed inside a live runner: a CUDA error (an illegal address, a failed
        launch) poisons the whole context, so a runner that fails the health check is replaced before
        the next candidate."""
        if not self.cuda or self.runner is None:
            return
        reply = self.ask(None, {"op": "finish", "index": index}, RUNNER_HEALTH_S, "checking the CUDA context")
        if reply is not None and ("error" in reply or not reply.get("healthy", True)):
            self.drop_runner()

    def judge_trials(self, index: int, runs: list[Ran], deadline: float) -> None:
        """The checks over a candidate's trials: insensitive outputs, stale memory, claimed and decoy kernels."""
        first = runs[0]
        stuck = sum(r.output_print is not None and same_fingerprint(r.output_print, first.output_print)
                    and not same_fingerprint(r.expected_print, first.expected_print) for r in runs[1:])
        if len(runs) > 1 and stuck == len(runs) - 1:
            self.flag(index, "input_insensitive", "the outputs did not change when the inputs changed "
                      "(hard-coded or cached results)")
        failed = [r.result for r in runs if not r.result["passed"]]
        if failed and not self.rejections(index):
            # The first failed trial again, with the reference's answer left in freed memory.
            probe = self.trial(index, Trial(-1, failed[0]["seed"], failed[0]["variant"]), deadline, probe="decoy")
            if probe is None:
                return
            if probe.result["passed"]:
                self.flag(index, "stale_memory", "the outputs are right only when freed memory still holds the "
                          "reference's answer (uninitialised output buffers)")
        launched = sum(v for r in runs for v in (r.reply.get("launched") or {}).values() if isinstance(v, int))
        claimed = self.entries[index].get("claims", {}).get("triton", [])
        if claimed and not launched:
            self.flag(index, "kernel_not_launched", f"the candidate defines Triton kernel(s) {', '.join(claimed)} "
                      f"but launched none in {len(runs)} trials: the work stays in torch")
        elif launched and not failed and not self.rejections(index):
            probe = self.trial(index, Trial(-2, self.seed + ABLATION_SEED), deadline, probe="ablate")
            if probe is None:
                return
            skipped = probe.reply.get("skipped_launches", 0)
            if probe.result["passed"] and isinstance(skipped, int) and skipped > 0:
                self.flag(index, "decoy_kernel", f"the outputs stay right with all {skipped} Triton kernel launches "
                          "skipped: the kernels do no needed work, torch does it")

    # timing -----------------------------------------------------------------------------------
    def time_all(self, passing: list[int]) -> None:
        self.judge_reference_ms = self.reference.own_time_ms()
        if len(passing) > 1 and not self.time_separately:
            if self.time_group(passing, joint=True):
                return
            self.time_separately = True  # someone spoilt the joint timing: alone, the culprit shows
        for index in passing:
            if not self.states[index]["final"]:
                self.time_group([index], joint=False)

    def time_group(self, indices: list[int], joint: bool) -> bool:
        """Time candidates together with the reference; False when a joint run has to be redone alone."""
        deadline = time.monotonic() + self.job["timeout_s"]
        indices = [i for i in indices if self.ensure_loaded(i, deadline)]
        if not indices:
            return True
        culprit = None if joint else indices[0]
        self.phase(culprit, "timing")
        if culprit is not None:
            self.begin(culprit)
        reply = self.ask(culprit, {"op": "time", "indices": indices, "settings": self.job["timing"]},
                         deadline - time.monotonic(), "timing")
        if reply is None:
            return not joint
        found = timing_problems(reply, indices, self.cuda, self.judge_reference_ms,
                                {i: self.entries[i].get("claims", {}).get("cuda", []) for i in indices})
        if joint and (reply.get("error") or reply.get("contaminated") or any(i is None for i, *_ in found)):
            return False
        if culprit is not None:
            self.add_flags(culprit, reply.get("flags"))
            if self.failed_reply(culprit, reply):
                return True
        for i, code, message, severity in found:
            for target in indices if i is None else [i]:
                self.flag(target, code, message, severity)
        for i in indices:
            self.states[i]["timing"] = timing_record(reply, i, self.cuda, self.judge_reference_ms)
            if self.states[i]["timing"] is None:
                self.fail(i, "other", "the candidate's process sent malformed timings", "timing")
        return True

    def verify_after_timing(self, index: int) -> None:
        """Right on the timing inputs refilled with new values, and again if the speedup is excessive."""
        deadline = time.monotonic() + self.job["timeout_s"]
        self.phase(index, "verify_after_timing")
        self.begin(index)
        ran = self.trial(index, Trial(1000, self.seed + VERIFY_SEED), deadline, refill=True)
        if ran is None:
            return
        if not ran.result["passed"]:
            self.flag(index, "changed_under_timing", "correct before timing, wrong after it on the same input tensors "
                      f"holding new values: {ran.result['message'] or 'the call failed'}")
        speedup = (self.states[index]["timing"] or {}).get("speedup", 0.0)
        if speedup > self.job["max_speedup"]:
            self.flag(index, "excessive_speedup", f"speedup {speedup:.1f}x is above {self.job['max_speedup']:g}x; "
                      "re-verified on fresh inputs", severity="warn")
            for k in range(2):
                ran = self.trial(index, Trial(1001 + k, self.seed + EXCESSIVE_SEED + k), deadline)
                if ran is None:
                    return
                if not ran.result["passed"]:
                    self.states[index]["flags"] = [f for f in self.states[index]["flags"]
                                                   if f["code"] != "excessive_speedup"]
                    self.flag(index, "excessive_speedup", f"speedup {speedup:.1f}x did not survive re-verification: "
                              f"{ran.result['message'] or 'the call failed'}")
                    break

    # the batch ----------------------------------------------------------------------------------
    def profile(self, index: int | None) -> dict[str, Any] | None:
        self.phase(index, "profile")
        if index is not None:
            self.begin(index)
        return self.ask(index, {"op": "profile", "index": index}, self.job["timeout_s"], "profiling")

    def review_all(self) -> None:
        for index, entry in self.entries.items():
            if entry.get("checked"):
                self.states[index] = entry["checked"]  # passed its trials in an earlier judge run
                continue
            try:
                self.check(index)
            except (RuntimeError, TransferError, MemoryError) as exc:  # the judge's own failure, e.g. out of memory
                self.drop_runner()
                self.fail(index, "other", f"the review harness failed: {type(exc).__name__}: {exc}", self.at,
                          traceback.format_exc()[-6000:])
        passing = [i for i, s in self.states.items() if s["correct"] and not s["final"]]
        if self.job.get("timing") and passing:
            self.time_all(passing)
            for index in passing:
                if not self.states[index]["final"] and not self.rejections(index):
                    self.verify_after_timing(index)
        if self.job.get("profile"):
            for index in passing:  # reviewed but for the profile: kept if the time budget ends the batch now
                if not self.states[index]["final"] and not self.rejections(index):
                    self.states[index]["awaiting"] = "profile"
                    self.publish(index, final=False)
        if self.job.get("profile") and passing and (reply := self.profile(None)) is not None:
            self.records.write("reference_profile", observations=reply.get("observations") or {},
                               unavailable=reply.get("unavailable") or {})
        for index in passing:
            state = self.states[index]
            if state["final"]:
                continue
            if self.rejections(index):
                self.reject(index)
                continue
            if self.job.get("profile") and (reply := self.profile(index)) is not None:
                state["observations"].update(reply.get("observations") or {})
                state["unavailable"].update(reply.get("unavailable") or {})
                state["profile"]["torch_profiler"] = reply.get("detail") or {}
            if not state["final"]:
                state["awaiting"] = None
                self.publish(index, final=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def prepare(device: str) -> None:
    """What the judge can do before its job arrives: CUDA's context."""
    if device == "cuda":
        torch.cuda.init()


def judge_batch(job: dict[str, Any], records: RecordWriter, workdir: Path, spare: RunnerProcess) -> None:
    """Build the reference, then review every candidate of the job; the records say how it went."""
    judge = Judge(job, records, workdir, spare)
    try:
        with torch.no_grad():
            judge.load_reference()
    except BaseException as exc:  # the problem's own failure: no candidate is to blame
        records.write("problem_error", phase=judge.at, message=f"{type(exc).__name__}: {exc}",
                      traceback=traceback.format_exc()[-6000:])
        judge.close()
        return
    try:
        with torch.no_grad():
            judge.review_all()
    except ProblemInputsDiffer as exc:
        records.write("problem_error", phase="reference", message=str(exc), traceback="")
        return
    finally:
        judge.close()
    judge.flush_spent()
    records.write("done")
