"""The sandboxed side of an evaluation: `python -m kskill.eval.baseline_worker JOB.json`.

Started by baselines.py through the Reviewer's sandbox (run_sandboxed), never in the kskill
process, because it imports kskill's returned module, which is generated code. In one process
on one device it builds the reference (eager), each torch.compile mode and the returned module,
checks every one of them against eager on several fresh input sets at each tolerance of the job,
then times them together, interleaved, with the Reviewer's method (timing.time_cuda: CUDA
events, L2 flushed before every call). It writes its JSON result after every step, naming the
contender it is running, so the parent knows which one to leave out if the process dies.

Imports: torch, the standard library and the Reviewer's torch-only modules (timing, correctness,
dynamic_checks, protocol, profiling), loaded without the reviewer package's __init__, which needs
pydantic. Triton is imported only by the returned module itself.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def _reviewer_modules() -> tuple[Any, Any, Any, Any, Any]:
    """timing, correctness, dynamic_checks, protocol, profiling of agents/reviewer, without the package's
    __init__."""
    import kskill.agents

    if "kskill.agents.reviewer" not in sys.modules:
        package = types.ModuleType("kskill.agents.reviewer")
        package.__path__ = [str(Path(kskill.agents.__file__).parent / "reviewer")]
        sys.modules["kskill.agents.reviewer"] = package
    from kskill.agents.reviewer import correctness, dynamic_checks, profiling, protocol, timing

    return timing, correctness, dynamic_checks, protocol, profiling


# Bound before any contender is imported: a module that patches torch later cannot patch these.
timing, correctness, dynamic_checks, protocol, profiling = _reviewer_modules()

EAGER = "eager"
KSKILL = "kskill"
CONTEXT_LOST = 3  # exit status: a contender left the CUDA context unusable
# The caching allocator's counts that change while the contenders are timed, if anything reaches the driver: device
# allocations and frees synchronise, and would make a contender's time depend on what ran before it (push-s52).
ALLOCATOR_COUNTS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


class ContextLost(Exception):
    """A contender's failure poisoned the CUDA context; nothing more can run in this process."""


def cuda_healthy() -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:  # an illegal address or a launch failure poisons the whole context
        return False


class Result:
    """The JSON answer, rewritten after every step."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.path = Path(job["result_path"])
        self.data: dict[str, Any] = {
            "nonce": job["nonce"], "finished": False, "step": "start", "current": None, "contenders": {},
            "timing": None, "notes": [], "versions": versions(job["device"]), "steps_s": {},
        }
        self.since = time.perf_counter()

    def at(self, step: str, current: str | None = None) -> None:
        self.lap()
        self.data["step"], self.data["current"] = step, current
        self.write()

    def lap(self) -> None:
        """Charge the seconds since the last step began to that step (its kind: "check", not "check trial 3")."""
        now, kind = time.perf_counter(), str(self.data["step"]).split(" ")[0]
        steps = self.data["steps_s"]
        steps[kind] = round(steps.get(kind, 0.0) + now - self.since, 3)
        self.since = now

    def contender(self, name: str) -> dict[str, Any]:
        return self.data["contenders"].setdefault(name, {"built": False, "error": "", "trials": 0, "correct": {},
                                                         "max_abs_error": 0.0, "message": ""})

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, default=str))
        os.replace(tmp, self.path)


def versions(device: str) -> dict[str, str]:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # a CPU-only machine may lack Triton; the returned module then fails to load
        triton_version = "not installed"
    return {"torch": torch.__version__, "triton": triton_version, "python": platform.python_version(),
            "cuda": str(torch.version.cuda), "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu"}


def import_file(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton looks kernels' modules up by name
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


class Bench:
    """The problem, its inputs, and every contender built on one device."""

    def __init__(self, job: dict[str, Any], result: Result) -> None:
        self.job, self.result = job, result
        self.device = torch.device(job["device"])
        self.seed = job["seed"]
        self.models: dict[str, Callable[..., Any]] = {}
        self.mutates_inputs = False

    def inputs(self, seed: int) -> list[Any]:
        """Fresh inputs made on the device itself (suite-sized tensors cost no host random numbers)."""
        torch.manual_seed(seed)
        with self.device:
            values = list(self.problem.get_inputs())
        return list(correctness.to_device(values, self.device))

    def build(self, cls: type) -> torch.nn.Module:
        torch.manual_seed(self.seed)
        with self.device:
            return cls(*self.init_inputs).to(self.device)

    def load_reference(self) -> None:
        self.result.at("reference", EAGER)
        self.problem = import_file(self.job["problem_path"], "kskill_eval_problem")
        self.init_inputs = list(self.problem.get_init_inputs())
        self.reference = self.build(self.problem.Model)
        self.models[EAGER] = self.reference
        self.result.contender(EAGER).update(built=True)

    def add_returned_module(self) -> None:
        """kskill's model_new.py, with the reference's weights wherever names and shapes match."""
        entry = self.result.contender(KSKILL)
        self.result.at("build", KSKILL)
        before = dynamic_checks.runtime_snapshot()
        model_new = import_file(self.job["candidate_path"], "kskill_eval_candidate").ModelNew
        module = self.build(model_new)
        reference_state = {**dict(self.reference.named_parameters()), **dict(self.reference.named_buffers())}
        for name, value in [*module.named_parameters(), *module.named_buffers()]:
            source = reference_state.get(name)
            if source is not None and source.shape == value.shape and source.dtype == value.dtype:
                value.data.copy_(source.data)
        patched = dynamic_checks.patched_runtime(before)
        if patched:
            raise RuntimeError(f"the returned module patched {', '.join(patched)}")
        self.models[KSKILL] = module
        entry.update(built=True)

    def add_compiled(self, mode: str) -> None:
        """torch.compile of a fresh reference (same seed, same weights), compiled on first call here.
        The modes' compiled code coexists: Dynamo guards each cache entry on the backend that made it."""
        name = f"compile_{mode}"
        entry = self.result.contender(name)
        self.result.at("compile", name)
        model = self.build(self.problem.Model)
        model.load_state_dict(self.reference.state_dict())
        compiled = torch.compile(model, mode=None if mode == "default" else mode)
        started = time.perf_counter()
        self.call(name, compiled, self.inputs(self.seed))
        entry.update(built=True, compile_s=round(time.perf_counter() - started, 3))
        self.models[name] = compiled

    def call(self, name: str, model: Callable[..., Any], inputs: list[Any], seed: int | None = None) -> Any:
        if seed is not None:
            torch.manual_seed(seed)
        if name.startswith("compile_") and "reduce-overhead" in name:
            torch.compiler.cudagraph_mark_step_begin()  # each call a new step of the CUDA-graph tree
        return model(*inputs)

    def check(self) -> None:
        """Every contender against eager on `trials` fresh input sets, at every tolerance of the job."""
        tolerances = self.job["tolerances"]
        for trial in range(self.job["trials"]):
            seed = self.seed + 1 + trial
            inputs = self.inputs(seed)
            reference_inputs = correctness.clone_tree(inputs)
            expected = self.call(EAGER, self.reference, reference_inputs, seed)
            if trial == 0:  # eager writing into its inputs: every timed contender then gets its own copy
                self.mutates_inputs = bool(dynamic_checks.mutated_inputs(inputs, reference_inputs))
            for name in [n for n in self.models if n != EAGER]:
                self.result.at(f"check trial {trial}", name)
                entry = self.result.contender(name)
                try:
                    got = self.call(name, self.models[name], correctness.clone_tree(inputs), seed)
                    for label, tol in tolerances.items():
                        passed, outputs, message = correctness.compare_outputs(got, expected, tol, tol)
                        entry["correct"][label] = entry["correct"].get(label, True) and passed
                        if not passed and not entry["message"]:
                            entry["message"] = f"at {label} tolerance {tol:g}, input set {trial}: {message}"[:600]
                        errors = [o.get("max_abs_error", 0.0) for o in outputs]
                        entry["max_abs_error"] = max([entry["max_abs_error"], *errors])
                    entry["trials"] = trial + 1
                    del got
                except Exception as exc:  # a contender failing on its inputs is a result, not a crash
                    self._drop(name, exc)
            del expected

    def _drop(self, name: str, exc: BaseException) -> None:
        """Leave a failing contender out; if it broke the CUDA context, end the process so the
        parent starts a fresh one without it."""
        entry = self.result.contender(name)
        entry.update(error=f"{type(exc).__name__}: {exc}"[:600], correct={})
        self.models.pop(name, None)
        self.result.data["notes"].append(f"{name} left out after an error")
        if self.device.type == "cuda" and not cuda_healthy():
            raise ContextLost(name)

    def time(self) -> None:
        """All contenders that ran, timed together; CPU timings are recorded as not representative."""
        self.result.at("timing")
        shared = self.inputs(self.seed + 100)
        fns = {}
        for name, model in self.models.items():
            args = correctness.clone_tree(shared) if self.mutates_inputs else shared
            fns[name] = (lambda n=name, m=model, a=args: self.call(n, m, a))
        settings = self.job["timing"]
        allocator: dict[str, int] = {}
        if self.device.type == "cuda":
            before = torch.cuda.memory_stats()
            raw = timing.time_cuda(fns, warmup_ms=settings["warmup_ms"], rep_ms=settings["rep_ms"],
                                   min_reps=settings["min_reps"], max_reps=settings["max_reps"])
            after = torch.cuda.memory_stats()
            allocator = {k: after.get(k, 0) - before.get(k, 0) for k in ALLOCATOR_COUNTS}
        else:
            raw = timing.time_cpu(fns, reps=settings["cpu_reps"])
        self.result.data["timing"] = {"stats": raw["stats"], "l2_flush_bytes": raw["l2_flush_bytes"],
                                      "warmup_reps": raw["warmup_reps"], "representative": self.device.type == "cuda",
                                      "method": "cuda_events" if self.device.type == "cuda" else "perf_counter",
                                      "inputs_cloned_per_contender": self.mutates_inputs, "allocator": allocator}

    def kernels(self, slower_than: float = 0.9, top: int = 5) -> None:
        """Where kskill's module is below `slower_than` of a torch.compile mode's speed, one profiled
        call of each (torch.profiler, CUDA kernels only): the kernels each launches, the slowest
        first, so the report can say what torch.compile does differently."""
        stats = (self.result.data.get("timing") or {}).get("stats") or {}
        mine = (stats.get(KSKILL) or {}).get("median_ms")
        rivals = [n for n in stats if n.startswith("compile_") and mine
                  and stats[n]["median_ms"] < slower_than * mine and n in self.models]
        if self.device.type != "cuda" or not rivals:
            return
        self.result.at("kernels")
        from torch.profiler import ProfilerActivity, profile

        shared = self.inputs(self.seed + 100)
        breakdown = {}
        for name in [KSKILL, *rivals]:
            args = correctness.clone_tree(shared) if self.mutates_inputs else shared
            self.call(name, self.models[name], args)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                self.call(name, self.models[name], args)
                torch.cuda.synchronize()
            per_kernel = profiling.device_events(prof)  # name -> each launch's ms
            ranked = sorted(per_kernel.items(), key=lambda item: -sum(item[1]))
            breakdown[name] = {"launches": sum(len(v) for v in per_kernel.values()),
                               "gpu_ms": round(sum(sum(v) for v in per_kernel.values()), 4),
                               "top": [{"name": k[:120], "calls": len(v), "ms": round(sum(v), 4)}
                                       for k, v in ranked[:top]]}
        self.result.data["kernels"] = breakdown


def run(job: dict[str, Any], result: Result) -> None:
    bench = Bench(job, result)
    bench.load_reference()
    excluded = set(job.get("exclude", []))
    builders: list[tuple[str, Callable[[], None]]] = []
    if job.get("candidate_path") and KSKILL not in excluded:
        builders.append((KSKILL, bench.add_returned_module))
    for mode in job["compile_modes"]:
        if f"compile_{mode}" not in excluded:
            builders.append((f"compile_{mode}", lambda m=mode: bench.add_compiled(m)))
    for name, build in builders:
        try:
            build()
        except Exception as exc:  # one contender that does not build leaves the others their results
            bench._drop(name, exc)
    bench.check()
    if job["timing"]:
        try:
            bench.time()
        except ContextLost:
            raise
        except Exception as exc:  # the correctness results stand; the timing says why it is missing
            result.data["timing_error"] = f"{type(exc).__name__}: {exc}"[:600]
        try:
            bench.kernels()
        except Exception as exc:  # a diagnosis only: the results above stand without it
            result.data["kernels_error"] = f"{type(exc).__name__}: {exc}"[:600]


def prepare(device: str) -> None:
    """What the worker can do before its job arrives: CUDA's context and torch.compile's imports
    (seconds each). The parent may start the worker while kskill optimize still runs; nothing here
    launches a kernel, so the GPU stays quiet for optimize's own timings."""
    if device != "cuda":
        return
    torch.cuda.init()
    try:
        for module in ("torch._dynamo", "torch._inductor.compile_fx"):
            importlib.import_module(module)
        inductor_config = importlib.import_module("torch._inductor.config")
        inductor_config.compile_threads = 1  # no pool of compile workers competing with the timing
    except (ImportError, AttributeError):  # a torch without these compiles as it will
        pass


def main(argv: list[str] | None = None) -> int:
    """`baseline_worker JOB.json DEVICE`: prepares for DEVICE, then waits for JOB.json if it is not
    there yet (the parent writes it whole, then renames it into place)."""
    faulthandler.enable()  # a segfault still leaves a traceback in the log
    argv = argv or sys.argv
    job_path = Path(argv[1])
    prepare(argv[2] if len(argv) > 2 else "cpu")
    began = time.perf_counter()
    job = protocol.wait_for(job_path)
    result = Result(job)
    result.data["waited_s"] = round(time.perf_counter() - began, 3)  # ready this long before its job came
    code = 0
    try:
        with torch.no_grad():
            run(job, result)
        result.data["finished"] = True
    except ContextLost as exc:
        result.data["context_lost_by"] = str(exc)
        code = CONTEXT_LOST
    except BaseException as exc:  # the reference itself failed: nothing can be compared with it
        result.data["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        result.data["traceback"] = traceback.format_exc()[-4000:]
        traceback.print_exc()
    result.lap()
    result.write()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    code = main()
    os._exit(code)  # skip torch's slow interpreter teardown; the result is written
