"""The untrusted side of a review: candidates imported, built, run and timed.

`python -m kskill.agents.reviewer.runner CMD_FD REPLY_FD`, started by the judge (judge.py)
inside the sandbox, or `... runner --ncu JOB.json` under Nsight Compute. It holds what the
candidates need: the problem module, a copy of the reference for timing, inputs it draws itself
from the judge's seeds, and the candidates, each under its own module name. It never holds the
reference's outputs for a trial, and nothing it says is a verdict: the judge compares the
outputs it sends, and checks its timings and flags (judge.py gives the argument).

Every harness function it uses was bound, and its Integrity snapshot taken, before the first
candidate was imported. The snapshot is compared after every candidate call; a runner whose
harness changed says so and exits, so the next candidate starts in a clean process.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import faulthandler
import gc
import importlib.util
import json
import os
import signal
import socket
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kskill.agents.reviewer import channel, correctness, cuda_share, profiling, timing, transfer
from kskill.agents.reviewer import dynamic_checks as dyn
from kskill.agents.reviewer.correctness import changed_leaves, clone_tree, fingerprint, seeded_inputs, seeded_model
from kskill.agents.reviewer.protocol import NCU_SEED, NCU_SPENT_MARK, PROFILE_SEED, TIMING_SEED, Stopwatch, wait_for

CONTAMINATED = 3  # exit status of a runner whose harness a candidate changed


class Contaminated(Exception):
    """A candidate changed the harness; the message lists what."""


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


def copy_matching_state(source: torch.nn.Module, target: torch.nn.Module) -> int:
    """Copy parameters and buffers whose names and shapes match, so both models hold the same weights."""
    state = {**dict(source.named_parameters()), **dict(source.named_buffers())}
    copied = 0
    for name, value in [*target.named_parameters(), *target.named_buffers()]:
        match = state.get(name)
        if match is not None and match.shape == value.shape and match.dtype == value.dtype:
            value.data.copy_(match.data.to(value.device))
            copied += 1
    return copied


def flag(code: str, message: str, severity: str = "reject") -> dict[str, Any]:
    return {"code": code, "severity": severity, "message": message, "origin": "dynamic"}


@dataclass
class Loaded:
    """One candidate inside the runner."""

    model: torch.nn.Module
    module_name: str
    settings: dict[str, Any]
    launches: dict[str, int] = field(default_factory=dict)


class Runner:
    def __init__(self, setup: dict[str, Any], fd_socket: socket.socket | None = None) -> None:
        self.phase = "setup"
        self.cuda = setup["device"] == "cuda"
        self.device = torch.device(setup["device"])
        self.seed = setup["seed"]
        if self.cuda:
            torch.cuda.set_per_process_memory_fraction(setup["memory_fraction"])
        self.problem = import_file(setup["problem_path"], "kskill_problem")
        self.init_inputs = list(self.problem.get_init_inputs())
        self.reference = seeded_model(self.problem.Model, self.init_inputs, self.seed, self.device)
        facts = setup.get("reference", {})  # what the judge learnt from its reference (not needed under ncu)
        self.ref_mutated, self.ref_aliases = set(facts.get("mutated_inputs", [])), facts.get("aliases_inputs", False)
        self.ref_types = facts.get("output_types", [])
        self.specs = [(shape, transfer.DTYPES[dtype]) for shape, dtype in facts.get("output_specs", [])]
        self.problem_settings = dyn.BackendSettings()
        self.candidates: dict[int, Loaded] = {}
        self.sender = transfer.OutputSender(Path(setup.get("transfer_dir", ".")), setup.get("transfer", "file"),
                                            fd_socket)
        self.launches = dyn.KernelLaunches()
        self.timing_inputs: list[Any] | None = None
        self.compile_reference, self.compiled = bool(setup.get("compile_reference")), None
        self.dynamo_loaded = "torch._dynamo" in sys.modules  # a GPU runner loads it at start (warm_up)
        self.integrity = self.snapshot()

    @staticmethod
    def snapshot() -> dyn.Integrity:
        return dyn.Integrity(
            harness=[sys.modules[__name__], channel, correctness, cuda_share, dyn, profiling, timing, transfer],
            watched=[builtins, torch, torch.Tensor, getattr(torch._C, "TensorBase", torch.Tensor.__base__),
                     torch.nn.functional, torch.cuda, torch.cuda.Event, torch.profiler, time, statistics, json, os,
                     *dyn.triton_kernel_classes()])

    def load_dynamo(self) -> None:
        """torch.profiler and torch.compile load dynamo, which rewraps torch.manual_seed and a few others.

        On the CPU it is loaded only by a runner that profiles or compiles (one that only checks candidates
        is spared the import): the harness is checked first, then the snapshot is taken again with dynamo
        in place. A GPU runner loads it at start (warm_up). torch.compile of the reference waits for the
        first timing, so a runner restarted after a crash does not compile it again.
        """
        if self.dynamo_loaded and (self.compiled is not None or not self.compile_reference):
            return
        self.check_integrity()
        importlib.import_module("torch._dynamo")
        if self.compile_reference:
            self.compiled = torch.compile(self.reference)
            self.compiled(*self.inputs(self.seed + TIMING_SEED))
        self.integrity, self.dynamo_loaded = self.snapshot(), True

    def setup_reply(self) -> dict[str, Any]:
        """What the judge checks before any candidate: the same inputs, and a transfer that works."""
        reply: dict[str, Any] = {"input_fingerprint": fingerprint(self.inputs(self.seed)), "transfer": self.sender.mode}
        if self.sender.mode == "cuda_fd":
            try:
                reply["probe"] = self.sender.send(torch.arange(4, dtype=torch.float32, device=self.device))
            except (RuntimeError, OSError) as exc:  # a driver without exportable allocations, for one
                self.sender.mode = reply["transfer"] = "file"
                reply["transfer_note"] = f"shared GPU memory unavailable ({exc}); outputs go through files"
        return reply

    # helpers ---------------------------------------------------------------------------------
    def inputs(self, seed: int, variant: str | None = None) -> list[Any]:
        return seeded_inputs(self.problem, seed, self.device, variant)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def check_integrity(self) -> None:
        changed = self.integrity.changed()
        if changed:
            raise Contaminated(", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else ""))

    def call(self, loaded: Loaded, inputs: list[Any], seed: int) -> Any:
        """The candidate under its own backend settings; the problem's are back afterwards."""
        torch.manual_seed(seed)
        dyn.BackendSettings.apply(loaded.settings)
        try:
            return loaded.model(*inputs)
        finally:
            loaded.settings = dyn.BackendSettings.read()
            dyn.BackendSettings.apply(self.problem_settings.values)

    def reference_call(self, inputs: list[Any], seed: int) -> Any:
        torch.manual_seed(seed)
        return self.reference(*inputs)

    # commands --------------------------------------------------------------------------------
    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.phase = "load_candidate"
        module = import_file(msg["path"], msg["module"])
        self.check_integrity()
        model_new = getattr(module, "ModelNew", None)
        if not (isinstance(model_new, type) and issubclass(model_new, torch.nn.Module)):
            return {"error": {"class": "compile", "message": "ModelNew is not a subclass of torch.nn.Module",
                              "phase": self.phase}}
        self.phase = "build_candidate"
        model = seeded_model(model_new, self.init_inputs, self.seed, self.device)
        copied = copy_matching_state(self.reference, model)
        self.candidates[msg["index"]] = Loaded(model, msg["module"], dyn.BackendSettings.read())
        dyn.BackendSettings.apply(self.problem_settings.values)
        self.check_integrity()
        return {"parameters_copied": copied}

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One trial: inputs drawn from the seed (or the timing inputs refilled), the candidate called once."""
        self.phase = "correctness"
        loaded, seed, probe = self.candidates[msg["index"]], msg["seed"], msg.get("probe")
        watch = Stopwatch(self.sync)
        self.sender.release()  # the judge is done with the previous outputs
        inputs = self.inputs(seed, msg.get("variant"))
        if msg.get("refill") and self.timing_inputs is not None:
            inputs = refill(self.timing_inputs, inputs)
        watch.lap("inputs")
        before = fingerprint(inputs)
        watch.lap("fingerprint")
        if probe == "decoy":
            dyn.leave_answer_in_freed_memory(self.reference_call(clone_tree(inputs), seed))
        else:
            dyn.poison_freed_memory(self.specs, self.device)
        watch.lap("poison")
        counts = dict(self.launches.counts)
        self.launches.skipped, self.launches.skip = 0, probe == "ablate"
        try:
            with dyn.empty_memory_poisoned() if probe == "ablate" else contextlib.nullcontext():
                got = self.call(loaded, inputs, seed)
                self.sync()
        finally:
            self.launches.skip = False
        watch.lap("call")
        self.check_integrity()
        launched = {k: v - counts.get(k, 0) for k, v in self.launches.counts.items() if v != counts.get(k, 0)}
        for name, n in launched.items():
            loaded.launches[name] = loaded.launches.get(name, 0) + n
        watch.lap("integrity")
        outputs = self.sender.send(got)
        watch.lap("send")
        flags = self.call_flags(got, inputs, before)
        watch.lap("flags")
        return {"outputs": outputs, "input_fingerprint": before, "flags": flags, "launched": launched,
                "skipped_launches": self.launches.skipped, "spent": watch.take()}

    def call_flags(self, got: Any, inputs: list[Any], before: list[Any]) -> list[dict[str, Any]]:
        flags = []
        mutated = [i for i in changed_leaves(before, fingerprint(inputs)) if i not in self.ref_mutated]
        if mutated:
            flags.append(flag("inputs_mutated", f"the candidate wrote to input(s) {mutated}"))
        if dyn.aliased_outputs(got, inputs) and not self.ref_aliases:
            flags.append(flag("outputs_alias_inputs", "the candidate's outputs share memory with its inputs"))
        subclasses = dyn.non_plain_outputs(got, self.ref_types)
        if subclasses:
            flags.append(flag("tensor_subclass", f"outputs must be plain torch.Tensor; got {', '.join(subclasses)}"))
        return flags

    def finish(self, msg: dict[str, Any]) -> dict[str, Any]:
        """After a candidate's trials: is CUDA still usable, and which settings did it change."""
        loaded = self.candidates.get(msg["index"])
        reply = {"healthy": True, "settings_changed": self.problem_settings.differences(loaded.settings) if loaded else {},
                 "launched": loaded.launches if loaded else {}}
        if self.cuda:
            try:
                torch.cuda.synchronize()
                (torch.ones(1, device=self.device) + 1).item()
            except Exception as exc:  # an illegal address or a failed launch poisons the whole context
                reply.update(healthy=False, why=f"{type(exc).__name__}: {exc}")
        if not msg.get("keep") and loaded is not None:
            self.drop(msg["index"])
        return reply

    def drop(self, index: int) -> None:
        loaded = self.candidates.pop(index)
        sys.modules.pop(loaded.module_name, None)
        del loaded
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()

    def timed_functions(self, indices: list[int], inputs: list[Any]) -> dict[str, Any]:
        """The reference and each candidate as a no-argument call on the same inputs.

        Settings are switched around a candidate only when it changed them, so an honest run
        times every function without that overhead.
        """
        problem = self.problem_settings.values
        fns: dict[str, Any] = {"reference": lambda: self.reference(*inputs)}
        if self.compiled is not None:
            fns["compiled_reference"] = lambda: self.compiled(*inputs)
        for i in indices:
            c = self.candidates[i]
            if c.settings == problem:
                fns[f"c{i}"] = lambda m=c.model: m(*inputs)
            else:
                fns[f"c{i}"] = lambda c=c: _with_settings(c, problem, inputs)
        if any(c.settings != problem for c in self.candidates.values()):
            fns["reference"] = lambda: _with_settings(None, problem, inputs, self.reference)
        return fns

    def time(self, msg: dict[str, Any]) -> dict[str, Any]:
        """All the given candidates and the reference, interleaved, then the checks on those numbers."""
        self.phase = "timing"
        self.sender.release()
        if self.cuda or self.compile_reference:
            self.load_dynamo()
        inputs = self.timing_inputs = self.inputs(self.seed + TIMING_SEED)
        before = fingerprint(inputs)
        fns = self.timed_functions(msg["indices"], inputs)
        t = msg["settings"]
        if self.cuda:
            raw = timing.time_cuda(fns, warmup_ms=t["warmup_ms"], rep_ms=t["rep_ms"], min_reps=t["min_reps"],
                                   max_reps=t["max_reps"])
        else:
            raw = timing.time_cpu(fns, reps=t["cpu_timing_reps"])
        self.check_integrity()
        reply: dict[str, Any] = {**raw, "reused": {}, "device": {}, "wall_ms": {}}
        for name, fn in fns.items():
            first, second = fn(), fn()
            reply["reused"][name] = bool(dyn.reused_outputs(first, second))
            del first, second
            if self.cuda:
                calls = profiling.calls_within(raw["stats"][name]["median_ms"])
                reply["device"][name] = profiling.device_time_per_call(fn, calls)
                if name.startswith("c"):
                    reply["wall_ms"][name] = timing.synchronized_wall_ms(fn, calls)
        self.check_integrity()
        reply["inputs_changed"] = bool(changed_leaves(before, fingerprint(inputs)))
        return reply

    def profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.phase = "profile"
        self.load_dynamo()
        inputs = self.inputs(self.seed + PROFILE_SEED)
        index = msg.get("index")
        forward = (lambda: self.reference(*inputs)) if index is None else (
            lambda c=self.candidates[index]: self.call(c, inputs, self.seed))
        obs, unavailable, detail = profiling.torch_profile(forward, cuda=self.cuda)
        self.check_integrity()
        return {"observations": obs, "unavailable": unavailable, "detail": detail}


def _with_settings(c: Loaded | None, problem: dict[str, Any], inputs: list[Any], model: Any = None) -> Any:
    dyn.BackendSettings.apply(c.settings if c is not None else problem)
    try:
        return (c.model if c is not None else model)(*inputs)
    finally:
        dyn.BackendSettings.apply(problem)


def refill(targets: list[Any], values: list[Any]) -> list[Any]:
    """The same input tensors as before, holding new values: a result cached by input identity goes stale."""
    for target, value in zip(targets, values):
        if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and target.shape == value.shape:
            target.copy_(value)
    return targets


def handle(runner: Runner | None, message: dict[str, Any], fd_socket: socket.socket | None = None
           ) -> tuple[Runner | None, dict[str, Any], bool]:
    """(runner, reply, contaminated) for one command; candidate failures are replies, not crashes."""
    op = message.get("op")
    try:
        if op == "setup":
            runner = Runner(message, fd_socket)
            return runner, runner.setup_reply(), False
        if runner is None or op not in ("load", "run", "finish", "time", "profile"):
            return runner, {"error": {"class": "other", "message": f"unexpected command {op!r}", "phase": "setup"}}, False
        return runner, getattr(runner, op)(message), False
    except Contaminated as exc:
        reply = {"flags": [flag("monkeypatch", f"the candidate replaced parts of the harness: {exc}")]}
        return runner, {**reply, "contaminated": True}, True
    except BaseException as exc:  # the candidate's failures are results, not crashes of the runner
        phase = runner.phase if runner is not None else "setup"
        error = {"class": classify(exc, phase), "message": f"{type(exc).__name__}: {exc}"[:4000], "phase": phase,
                 "traceback": "".join(traceback.format_exception(exc))[-6000:]}
        traceback.print_exc()
        del exc  # drops the traceback, and with it whatever a memory hog was holding
        gc.collect()
        contaminated = runner is not None and bool(runner.integrity.changed())
        return runner, {"error": error, "contaminated": contaminated}, contaminated


def serve(link: channel.JudgeLink) -> int:
    runner = None
    with torch.no_grad():
        while (message := link.receive()) is not None and message.get("op") != "exit":
            runner, reply, contaminated = handle(runner, message, link.fd_socket)
            link.reply(reply)
            if contaminated:
                return CONTAMINATED
    return 0


def ncu_target(job_path: Path) -> int:
    """The forward Nsight Compute measures: warmed up, then one call between profiler start and stop.
    It may be started before the batch knows which candidate: it waits for its job."""
    torch.cuda.init()
    watch = Stopwatch()
    job = wait_for(job_path)
    watch.lap("wait_job")
    with torch.no_grad():
        runner = Runner(job["setup"])
        forward = lambda: runner.reference(*inputs)  # noqa: E731
        if job.get("candidate"):
            runner.load({"index": 0, **job["candidate"]})
            forward = lambda: runner.call(runner.candidates[0], inputs, runner.seed)  # noqa: E731
        inputs = runner.inputs(runner.seed + NCU_SEED)
        torch.cuda.synchronize()
        watch.lap("setup")
        for _ in range(2):
            forward()
        torch.cuda.synchronize()
        watch.lap("warmup")
        torch.cuda.profiler.start()
        forward()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        watch.lap("profiled")
    print(NCU_SPENT_MARK + json.dumps(watch.take()), flush=True)  # read back by nsight.finish_ncu
    return 0


def die_with_the_judge() -> None:
    """PR_SET_PDEATHSIG: if the judge is killed, the kernel kills this process too (Linux; elsewhere, EOF on
    the command pipe ends it, unless a candidate is still running)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def warm_up(device: str) -> None:
    """What a GPU runner needs anyway, done while the judge is still building its reference: CUDA's
    context, and dynamo, which every GPU runner's profiler loads (it rewraps torch.manual_seed, so it
    must be in place before the harness snapshot)."""
    if device == "cuda":
        torch.cuda.init()
        importlib.import_module("torch._dynamo")


def main(argv: list[str] | None = None) -> int:
    argv = argv or sys.argv
    faulthandler.enable()  # a segfault still leaves a Python traceback in the log
    if argv[1] == "--ncu":
        return ncu_target(Path(argv[2]))
    die_with_the_judge()
    warm_up(argv[4])
    return serve(channel.JudgeLink(int(argv[1]), int(argv[2]), int(argv[3])))


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: torch's exit handlers cost a second or more and nothing is left to save.
    os._exit(code)
