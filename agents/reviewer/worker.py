"""The sandboxed side of a review: `python -m kskill.agents.reviewer.worker JOB.json`.

Runs in a subprocess started by sandbox.py, never in the kskill process. It loads the
problem, runs the reference (before any candidate code is imported), loads and builds the
candidate, checks it over several trials, times both, profiles, and writes a JSON result
after every phase, so the parent knows how far it got if the candidate kills the process.
The result carries the job's nonce; the job file is deleted once read.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

from kskill.agents.reviewer import dynamic_checks as dyn
from kskill.agents.reviewer.correctness import (
    clone_tree, compare_outputs, flatten_outputs, max_abs_difference, to_device, tolerance_for,
)
from kskill.agents.reviewer.profiling import torch_profile
from kskill.agents.reviewer.models import PROBLEM_PHASES
from kskill.agents.reviewer.timing import synchronized_wall_ms, time_cpu, time_cuda


class Rejected(Exception):
    """Ends the review with a failure class chosen by the harness."""

    def __init__(self, failure_class: str, message: str) -> None:
        super().__init__(message)
        self.failure_class = failure_class


class Report:
    """The result being built, written to disk after every phase."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.path = Path(job["result_path"])
        self.data: dict[str, Any] = {"nonce": job["nonce"], "phase": "start", "finished": False,
                                     "compiled": False, "correct": False, "failure": None, "flags": [],
                                     "observations": {}, "unavailable": {}, "profile": {}, "notes": []}

    def enter(self, phase: str) -> None:
        self.data["phase"] = phase
        self.write()

    def flag(self, code: str, message: str, severity: str = "reject") -> None:
        if any(f["code"] == code for f in self.data["flags"]):
            return  # the first occurrence (earliest trial) is the one reported
        self.data["flags"].append({"code": code, "severity": severity, "message": message, "origin": "dynamic"})

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, default=str))
        os.replace(tmp, self.path)


def classify(exc: BaseException, phase: str) -> str:
    """The failure class of an exception raised in a phase."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or any(
            s in text for s in ("out of memory", "can't allocate memory", "Cannot allocate memory")):
        return "memory"
    if (phase == "load_candidate" or isinstance(exc, SyntaxError) or "Error building extension" in text
            or type(exc).__module__.startswith("triton.compiler")):
        return "compile"
    if phase == "build_candidate" and isinstance(exc, TypeError):
        return "compile"  # ModelNew's constructor does not take Model's init inputs
    return "runtime"


def import_file(path: str, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # Triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


class Session:
    """One review's state inside the worker."""

    def __init__(self, job: dict[str, Any], report: Report) -> None:
        self.job, self.report = job, report
        self.cuda = job["device"] == "cuda"
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.seed = job["seed"]
        self.atol, self.rtol = job.get("atol"), job.get("rtol")

    # problem and reference ------------------------------------------------------------
    def inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        values = self.problem.get_inputs()
        if not isinstance(values, (list, tuple)):
            raise TypeError(f"get_inputs() must return a list or tuple, not {type(values).__name__}")
        return list(to_device(list(values), self.device))

    def load_reference(self) -> None:
        self.report.enter("load_problem")
        self.problem = import_file(self.job["problem_path"], "kskill_problem")
        self.init_inputs = self.problem.get_init_inputs()
        if not isinstance(self.init_inputs, (list, tuple)):
            raise TypeError("get_init_inputs() must return a list or tuple")
        self.report.enter("build_reference")
        torch.manual_seed(self.seed)
        self.reference = self.problem.Model(*self.init_inputs).to(self.device)
        self.report.enter("reference")
        inputs = self.inputs(self.seed)
        first = self.reference_call(clone_tree(inputs), self.seed)
        second = self.reference_call(clone_tree(inputs), self.seed)
        self.sync()
        diff = max_abs_difference(first, second)
        self.report.data["reference_deterministic"] = diff == 0.0
        self.report.data["reference_self_max_abs_diff"] = diff
        if diff > 0:
            self.report.data["notes"].append(
                f"the reference is not deterministic: two runs on the same inputs differ by up to {diff:.3g}")
        self.report.data["observations"].update(self.problem_observations(inputs, first))

    def problem_observations(self, inputs: list[Any], outputs: Any) -> dict[str, Any]:
        tensors_in = [t for t in inputs if isinstance(t, torch.Tensor)]
        tensors_out = [t for t in flatten_outputs(outputs) if isinstance(t, torch.Tensor)]
        floating = [t for t in tensors_in + tensors_out if t.dtype.is_floating_point]
        main = tensors_out[0].dtype if tensors_out else torch.float32
        atol, rtol = tolerance_for(main, self.atol, self.rtol)
        return {
            "dtype": str((floating[0] if floating else (tensors_out or tensors_in)[0]).dtype).removeprefix("torch.")
            if (floating or tensors_out or tensors_in) else "unknown",
            "atol": atol, "rtol": rtol,
            "output_numel": sum(t.numel() for t in tensors_out),
            "input_bytes": sum(t.numel() * t.element_size() for t in tensors_in),
            "batchnorm_training": any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training
                                      for m in self.reference.modules()),
        }

    # candidate --------------------------------------------------------------------------
    def load_candidate(self) -> None:
        self.runtime = dyn.runtime_snapshot()
        self.backends = dyn.BackendSettings()
        if self.cuda:
            torch.cuda.set_per_process_memory_fraction(self.job["gpu_memory_fraction"])
        self.report.enter("load_candidate")
        module = import_file(self.job["candidate_path"], "kskill_candidate")
        model_new = getattr(module, "ModelNew", None)
        if not (isinstance(model_new, type) and issubclass(model_new, torch.nn.Module)):
            raise Rejected("compile", "ModelNew is not a subclass of torch.nn.Module")
        self.check_runtime("importing the candidate")
        self.report.enter("build_candidate")
        torch.manual_seed(self.seed)
        self.candidate = model_new(*self.init_inputs)
        self.report.data["parameters_copied"] = self.copy_matching_state()
        self.candidate = self.candidate.to(self.device)
        self.report.data["compiled"] = True

    def copy_matching_state(self) -> int:
        """Copy parameters and buffers whose names and shapes match, so both models hold the same weights."""
        ref_state = {**dict(self.reference.named_parameters()), **dict(self.reference.named_buffers())}
        copied = 0
        for name, value in [*self.candidate.named_parameters(), *self.candidate.named_buffers()]:
            source = ref_state.get(name)
            if source is not None and source.shape == value.shape and source.dtype == value.dtype:
                value.data.copy_(source.data.to(value.device))
                copied += 1
        return copied

    def check_runtime(self, when: str) -> None:
        patched = dyn.patched_runtime(self.runtime)
        if patched:
            self.report.flag("monkeypatch", f"{', '.join(patched)} replaced while {when}")
            raise Rejected("cheating", f"the candidate patched {', '.join(patched)}")

    def run_candidate(self, inputs: list[Any], seed: int) -> Any:
        torch.manual_seed(seed)
        return self.candidate(*inputs)

    def reference_call(self, inputs: list[Any], seed: int | None) -> Any:
        """The reference, seeded when asked, under the problem's own backend settings.

        The settings are switched only when the candidate changed them, so an honest run
        times the reference without that overhead.
        """
        if seed is not None:
            torch.manual_seed(seed)
        backends = getattr(self, "backends", None)
        if backends is not None and backends.changed_by_candidate():
            with backends:
                return self.reference(*inputs)
        return self.reference(*inputs)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.current_stream().synchronize()

    # correctness ------------------------------------------------------------------------
    def trial(self, number: int, seed: int, decoy: bool = False) -> tuple[dict[str, Any], Any, Any]:
        inputs = self.inputs(seed)
        ref_in, cand_in, pristine = clone_tree(inputs), clone_tree(inputs), clone_tree(inputs)
        expected = self.reference_call(ref_in, seed)
        ref_mutated = set(dyn.mutated_inputs(pristine, ref_in))
        if decoy:
            dyn.leave_answer_in_freed_memory(expected)
        else:
            dyn.poison_freed_memory(expected)
        got = self.run_candidate(cand_in, seed)
        self.sync()
        passed, outputs, message = compare_outputs(got, expected, self.atol, self.rtol)
        mutated = [i for i in dyn.mutated_inputs(pristine, cand_in) if i not in ref_mutated]
        if mutated:
            self.report.flag("inputs_mutated", f"the candidate wrote to input(s) {mutated} (trial {number})")
        if dyn.aliased_outputs(got, cand_in) and not dyn.aliased_outputs(expected, ref_in):
            self.report.flag("outputs_alias_inputs", f"the candidate's outputs share memory with its inputs "
                             f"(trial {number})")
        return {"trial": number, "seed": seed, "passed": passed, "outputs": outputs, "message": message}, got, expected

    def check_correctness(self) -> None:
        self.report.enter("correctness")
        trials, firsts, stuck = [], None, 0
        for number in range(self.job["trials"]):
            result, got, expected = self.trial(number, self.seed + number)
            trials.append(result)
            self.report.data["trials"] = trials
            if firsts is None:
                firsts = (clone_tree(got), clone_tree(expected))
            elif dyn.outputs_equal(got, firsts[0]) and not dyn.outputs_equal(expected, firsts[1]):
                stuck += 1
        self.report.write()
        if len(trials) > 1 and stuck == len(trials) - 1:
            self.report.flag("input_insensitive", "the outputs did not change when the inputs changed "
                             "(hard-coded or cached results)")
        failed = [t for t in trials if not t["passed"]]
        if failed and not self.rejections():
            probe, _, _ = self.trial(-1, self.seed, decoy=True)
            if probe["passed"]:
                self.report.flag("stale_memory", "the outputs are right only when freed memory still holds "
                                 "the reference's answer (uninitialised output buffers)")
        self.raise_if_rejected()
        if failed:
            raise Rejected("numeric", f"{len(failed)} of {len(trials)} trials failed; trial {failed[0]['trial']}: "
                                      f"{failed[0]['message']}")
        self.report.data["correct"] = True

    def rejections(self) -> list[dict[str, Any]]:
        return [f for f in self.report.data["flags"] if f["severity"] == "reject"]

    def raise_if_rejected(self) -> None:
        rejected = self.rejections()
        if rejected:
            self.report.data["correct"] = False
            raise Rejected("cheating", "; ".join(f"{f['code']}: {f['message']}" for f in rejected))

    def verify_again(self, code: str, seed: int, trials: int, why: str) -> None:
        for k in range(trials):
            result, _, _ = self.trial(1000 + k, seed + k)
            if not result["passed"]:
                self.report.flag(code, f"{why}; fresh inputs (seed {seed + k}) failed: {result['message']}")
        self.raise_if_rejected()

    # timing and profiling ----------------------------------------------------------------
    def time(self) -> None:
        self.report.enter("timing")
        inputs = self.inputs(self.seed + 100)
        ref_in, cand_in = clone_tree(inputs), clone_tree(inputs)
        switch = self.backends.changed_by_candidate()  # checked once: the timed reference pays nothing
        fns = {"reference": (lambda: self.reference_call(ref_in, None)) if switch else (lambda: self.reference(*ref_in)),
               "candidate": lambda: self.candidate(*cand_in)}
        if self.job["compile_reference"]:
            # Dynamo wraps a few torch functions (torch.manual_seed among them) when it loads, so
            # the candidate is checked first and the watch list is taken again after compiling.
            self.check_runtime("checking correctness")
            compiled = torch.compile(self.reference)
            compiled(*ref_in)
            self.runtime = dyn.runtime_snapshot()
            fns["compiled_reference"] = lambda: compiled(*ref_in)
        t = self.job["timing"]
        if self.cuda:
            raw = time_cuda(fns, warmup_ms=t["warmup_ms"], rep_ms=t["rep_ms"], min_reps=t["min_reps"],
                            max_reps=t["max_reps"])
        else:
            raw = time_cpu(fns, reps=t["cpu_timing_reps"])
        self.check_runtime("timing")
        stats = raw["stats"]
        timing = {"method": "cuda_events" if self.cuda else "perf_counter", "representative": self.cuda,
                  "note": "" if self.cuda else "CPU timing (Triton interpreter): not representative of GPU speed",
                  "reference": stats["reference"], "candidate": stats["candidate"],
                  "compiled_reference": stats.get("compiled_reference"),
                  "speedup": stats["reference"]["median_ms"] / max(stats["candidate"]["median_ms"], 1e-9),
                  "l2_flush_bytes": raw["l2_flush_bytes"], "warmup_reps": raw["warmup_reps"]}
        if "compiled_reference" in stats:
            timing["speedup_vs_compiled"] = (stats["compiled_reference"]["median_ms"]
                                             / max(stats["candidate"]["median_ms"], 1e-9))
        self.report.data["timing"] = timing
        if self.cuda:
            wall = synchronized_wall_ms(fns["candidate"])
            events = stats["candidate"]["median_ms"]
            if wall > 3 * events + 0.5:
                self.report.flag("untimed_work", f"a device-synchronised call takes {wall:.3f} ms but CUDA events "
                                 f"on the current stream see {events:.3f} ms: work may run on another stream",
                                 severity="warn")
        self.report.enter("verify_after_timing")
        self.verify_again("changed_under_timing", self.seed + 10_000, 1,
                          "correct before timing, wrong after it")
        if timing["speedup"] > self.job["max_speedup"]:
            self.report.flag("excessive_speedup", f"speedup {timing['speedup']:.1f}x is above "
                             f"{self.job['max_speedup']:g}x; re-verified on fresh inputs", severity="warn")
            self.verify_again("excessive_speedup", self.seed + 20_000, 2,
                              f"speedup {timing['speedup']:.1f}x did not survive re-verification")

    def profile(self) -> None:
        self.report.enter("profile")
        inputs = self.inputs(self.seed + 200)
        obs, unavailable, detail = torch_profile(lambda: self.candidate(*inputs), cuda=self.cuda)
        self.report.data["observations"].update(obs)
        self.report.data["unavailable"].update(unavailable)
        self.report.data["profile"]["torch_profiler"] = detail

    def ncu_target(self) -> None:
        """The forward Nsight Compute measures: warmed up, then one call between profiler start and stop."""
        self.report.enter("ncu")
        inputs = self.inputs(self.seed + 300)
        for _ in range(2):
            self.candidate(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        self.candidate(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def run(job: dict[str, Any], report: Report) -> None:
    session = Session(job, report)
    session.load_reference()
    session.load_candidate()
    if job["mode"] == "ncu":
        session.ncu_target()
        return
    session.check_correctness()
    if job["timing"]:
        session.time()
    if job["profile"]:
        session.profile()
    if session.backends.changed_by_candidate():
        report.flag("global_setting", f"the candidate changed {session.backends.changed_by_candidate()}; "
                    "the reference ran with the problem's own settings", severity="warn")


def main(argv: list[str] | None = None) -> int:
    faulthandler.enable()  # a segfault still leaves a Python traceback in the log
    job_path = Path((argv or sys.argv)[1])
    job = json.loads(job_path.read_text())
    job_path.unlink()
    report = Report(job)
    report.data["device"] = torch.cuda.get_device_name() if job["device"] == "cuda" else "cpu"
    try:
        with torch.no_grad():
            run(job, report)
    except Rejected as exc:
        report.data["failure"] = {"class": exc.failure_class, "message": str(exc), "phase": report.data["phase"]}
    except BaseException as exc:  # the candidate's failures are results, not crashes of the worker
        phase = report.data["phase"]
        report.data["failure"] = {
            "class": "other" if phase in PROBLEM_PHASES else classify(exc, phase),
            "message": f"{type(exc).__name__}: {exc}", "phase": phase, "problem_error": phase in PROBLEM_PHASES,
            "traceback": "".join(traceback.format_exception(exc))[-6000:],
        }
        traceback.print_exc()
    report.data["finished"] = True
    report.write()
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: torch's exit handlers cost a second or more and nothing is left to save.
    os._exit(code)
