"""The Reviewer's entry point: review(problem, candidate, options) -> Review.

Order of work: validate the problem (errors raise ProblemError), parse the candidate and
run the static anti-cheat checks (failures become a Review, not an exception), run the
worker in the sandbox for correctness, dynamic checks, timing and torch.profiler, then,
on a GPU with a correct candidate, run the worker again under Nsight Compute. Candidate
code never runs in this process.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kskill.agents.errors import ProblemError, ReviewError
from kskill.agents.problem import Candidate, Problem, load_candidate, load_problem
from kskill.agents.reviewer import profiling
from kskill.agents.reviewer.models import (
    PROBLEM_PHASES, Correctness, Flag, Isolation, Review, ReviewOptions, Timing)
from kskill.agents.reviewer.sandbox import (
    SandboxChoice, SandboxLimits, SandboxOutcome, python_module_argv, require_sandbox, run_sandboxed)
from kskill.agents.reviewer.static_checks import check_source

WORKER_MODULE = "kskill.agents.reviewer.worker"
# Network isolation on a GPU is used only if CUDA still initialises inside the namespace.
CUDA_PROBE = (sys.executable, "-c", "import torch; torch.cuda.init()")


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
    device = resolve_device(options)
    return require_sandbox(CUDA_PROBE if device == "cuda" else ("true",))


def review(problem: str | Path | Problem, candidate: str | Path | Candidate,
           options: ReviewOptions | None = None) -> Review:
    """Review one candidate against one problem; see the module docstring for the steps."""
    options = options or ReviewOptions()
    problem = problem if isinstance(problem, Problem) else load_problem(problem)
    candidate = candidate if isinstance(candidate, Candidate) else load_candidate(candidate)
    started = time.monotonic()
    base = Review(problem=problem.name, candidate_hash=candidate.source_hash)
    if candidate.error:
        return _finish(base.model_copy(update={"failure_class": "compile", "failure_phase": "parse",
                                               "failure_message": candidate.error}), started)
    flags = check_source(candidate.source)
    base.flags = flags
    rejected = [f for f in flags if f.severity == "reject"]
    if rejected and options.static_checks:
        message = "; ".join(f"line {f.line}: {f.code}: {f.message}" for f in rejected)
        return _finish(base.model_copy(update={"failure_class": "cheating", "failure_phase": "static_checks",
                                               "failure_message": message}), started)
    device = resolve_device(options)
    workdir = Path(tempfile.mkdtemp(prefix="kskill-review-"))
    try:
        result = _review_in_sandbox(problem, candidate, options, device, workdir, base)
        if options.keep_workdir:
            result.profile["workdir"] = str(workdir)
        return _finish(result, started)
    finally:
        if not options.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _finish(review_: Review, started: float) -> Review:
    review_.wall_time_s = time.monotonic() - started
    return review_


def _limits(options: ReviewOptions, device: str, timeout_s: float) -> SandboxLimits:
    return SandboxLimits(timeout_s=timeout_s, memory_limit_mb=options.memory_limit_mb,
                         address_space_limit=device == "cpu", isolate_network=options.isolate_network,
                         hidden=tuple(options.hidden_paths), unsandboxed_ok=options.unsandboxed_ok)


def _write_job(workdir: Path, problem: Problem, candidate: Candidate, options: ReviewOptions,
               device: str, mode: str) -> tuple[Path, str]:
    (workdir / "problem.py").write_text(problem.source)
    (workdir / "candidate.py").write_text(candidate.source)
    nonce = secrets.token_hex(16)
    job = {
        "nonce": nonce, "mode": mode, "device": device, "seed": options.seed, "trials": options.trials,
        "atol": options.atol, "rtol": options.rtol, "problem_path": str(workdir / "problem.py"),
        "candidate_path": str(workdir / "candidate.py"), "result_path": str(workdir / f"result-{mode}.json"),
        "timing": options.model_dump(include={"warmup_ms", "rep_ms", "min_reps", "max_reps", "cpu_timing_reps"})
        if options.timing else None,
        "compile_reference": options.compile_reference, "profile": options.profile,
        "max_speedup": options.max_speedup, "gpu_memory_fraction": options.gpu_memory_fraction,
    }
    path = workdir / f"job-{mode}.json"
    path.write_text(json.dumps(job))
    return path, nonce


def _read_result(workdir: Path, mode: str, nonce: str) -> dict[str, Any] | None:
    path = workdir / f"result-{mode}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("nonce") != nonce:
        return None  # written by something other than the worker we started
    return data


def _review_in_sandbox(problem: Problem, candidate: Candidate, options: ReviewOptions, device: str,
                       workdir: Path, base: Review) -> Review:
    job_path, nonce = _write_job(workdir, problem, candidate, options, device, "review")
    extra_env = {"TRITON_INTERPRET": "1"} if device == "cpu" else {}
    limits = _limits(options, device, options.timeout_s)
    probe = CUDA_PROBE if device == "cuda" else ("true",)
    outcome = run_sandboxed(python_module_argv(WORKER_MODULE, str(job_path)), workdir=workdir, limits=limits,
                            extra_env=extra_env, network_probe=probe)
    data = _read_result(workdir, "review", nonce)
    result = _merge(base, data, outcome, options, device)
    if device == "cuda" and result.passed and options.ncu and options.profile:
        _add_ncu(result, problem, candidate, options, workdir)
    return result


def _isolation(outcome: SandboxOutcome, options: ReviewOptions, device: str) -> Isolation:
    fields = dict(outcome.isolation)
    if device == "cuda":
        fields["memory_strategy"] += f"; CUDA allocations capped at {options.gpu_memory_fraction:.0%} of the GPU"
    return Isolation(**fields, memory_limit_mb=options.memory_limit_mb, timeout_s=options.timeout_s)


def _death(data: dict[str, Any] | None, outcome: SandboxOutcome, options: ReviewOptions) -> tuple[str, str]:
    """Failure class and message when the worker did not finish."""
    phase = (data or {}).get("phase", "start")
    if outcome.timed_out:
        return "timeout", f"the candidate ran past the {options.timeout_s:g} s limit (during {phase})"
    if outcome.memory_exceeded:
        return "memory", (f"the worker exceeded the {options.memory_limit_mb} MB memory limit: "
                          f"{outcome.limit_detail} (during {phase})")
    if outcome.processes_exceeded:
        return "other", f"the candidate started too many processes: {outcome.limit_detail} (during {phase})"
    if outcome.signal_name == "SIGKILL":
        return "memory", f"the worker was killed (SIGKILL, most likely out of memory) during {phase}"
    if outcome.signal_name:
        return "runtime", f"the worker died with {outcome.signal_name} during {phase}"
    if data is None:
        return "other", f"the worker exited with status {outcome.returncode} without a valid result"
    return "runtime", f"the worker exited with status {outcome.returncode} during {phase} without finishing"


def _merge(base: Review, data: dict[str, Any] | None, outcome: SandboxOutcome, options: ReviewOptions,
           device: str) -> Review:
    """The worker's JSON plus what the sandbox saw, validated into a Review."""
    data = data or {}
    update: dict[str, Any] = {"isolation": _isolation(outcome, options, device), "log": outcome.log,
                              "device": data.get("device", device), "compiled": bool(data.get("compiled"))}
    failure = data.get("failure")
    if failure and failure.get("problem_error"):
        raise ProblemError(f"problem {base.problem} failed while {failure['phase'].replace('_', ' ')}: "
                           f"{failure['message']}")
    if not data.get("finished"):
        klass, message = _death(data or None, outcome, options)
        if data.get("phase") in PROBLEM_PHASES and klass == "runtime":
            raise ProblemError(f"problem {base.problem} crashed the worker during {data['phase']}: {message}")
        failure = {"class": klass, "message": message, "phase": data.get("phase", "start")}
    try:
        update["flags"] = [*base.flags, *(Flag(**f) for f in data.get("flags", []))]
        if "trials" in data or "parameters_copied" in data:
            update["correctness"] = _correctness(data)
        if data.get("timing"):
            update["timing"] = Timing(**data["timing"])
    except (ValidationError, TypeError) as exc:
        raise ReviewError(f"the review worker returned a malformed result: {exc}") from exc
    observations = dict(data.get("observations", {}))
    unavailable = dict(data.get("unavailable", {}))
    timing_obs, timing_missing = profiling.timing_observations(data.get("timing"), device == "cuda")
    observations.update(timing_obs)
    unavailable.update(timing_missing)
    if device != "cuda":
        reason = "no CUDA device: Nsight Compute needs a GPU"
        unavailable.update({n: reason for n in profiling.ncu_metric_names()})
    update.update(observations=observations, unavailable=unavailable,
                  profile={**data.get("profile", {}), "notes": data.get("notes", [])},
                  correct=bool(data.get("correct")) and not failure)
    if failure:
        update.update(failure_class=failure["class"], failure_message=failure["message"],
                      failure_phase=failure.get("phase", ""))
        if failure.get("traceback"):
            update["log"] = f"{outcome.log}\n{failure['traceback']}".strip()
    return base.model_copy(update=update)


def _correctness(data: dict[str, Any]) -> Correctness:
    trials = data.get("trials", [])
    errors = [o for t in trials for o in t.get("outputs", [])]
    return Correctness(
        trials_run=len(trials), trials_passed=sum(t["passed"] for t in trials), trials=trials,
        reference_deterministic=data.get("reference_deterministic"),
        reference_self_max_abs_diff=data.get("reference_self_max_abs_diff"),
        parameters_copied=data.get("parameters_copied", 0),
        max_abs_error=max((o.get("max_abs_error", 0.0) for o in errors), default=0.0),
        max_rel_error=max((o.get("max_rel_error", 0.0) for o in errors), default=0.0),
    )


def _add_ncu(result: Review, problem: Problem, candidate: Candidate, options: ReviewOptions,
             workdir: Path) -> None:
    """Nsight Compute metrics of the candidate's forward, or the reason there are none."""
    ncu = shutil.which("ncu")
    names = profiling.ncu_metric_names()
    if ncu is None:
        result.unavailable.update({n: "ncu (Nsight Compute) is not on PATH" for n in names})
        return
    job_path, nonce = _write_job(workdir, problem, candidate, options, "cuda", "ncu")
    report = workdir / "ncu.csv"
    argv = [ncu, *profiling.ncu_arguments(str(report)), *python_module_argv(WORKER_MODULE, str(job_path))]
    # ncu talks to its target over the loopback device, which a fresh network namespace lacks.
    limits = dataclasses.replace(_limits(options, "cuda", options.ncu_timeout_s), isolate_network=False)
    outcome = run_sandboxed(argv, workdir=workdir, limits=limits, network_probe=CUDA_PROBE)
    log = (report.read_text(errors="replace") if report.exists() else "") + "\n" + outcome.log
    rows = profiling.parse_ncu_csv(log)
    result.profile["ncu"] = {"network_isolated": False, "sandbox": outcome.isolation.get("sandbox"),
                             "wall_s": outcome.wall_s}
    if outcome.timed_out:
        result.unavailable.update({n: f"ncu ran past {options.ncu_timeout_s:g} s" for n in names})
        return
    if not rows:
        reason = profiling.ncu_failure_reason(log)
        result.unavailable.update({n: reason for n in names})
        result.profile["ncu"]["log_tail"] = log[-4000:]
        return
    obs, unavailable, detail = profiling.ncu_observations(rows)
    for name in obs:
        result.unavailable.pop(name, None)
    result.observations.update(obs)
    result.unavailable.update(unavailable)
    result.profile["ncu"].update(detail)
    if _read_result(workdir, "ncu", nonce) is None:
        result.profile["ncu"]["note"] = "the profiled worker wrote no result; metrics are from ncu's report"
