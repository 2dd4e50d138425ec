"""Eager, torch.compile and kskill's returned module, checked and timed together in the sandbox.

The parent side of baseline_worker.py: it writes the job, runs the worker through the
Reviewer's sandbox (run_sandboxed: own session, timeout, memory watch, scrubbed environment, no
network where possible), and reads the answer. A contender that kills the worker (a segfault,
a hang, a poisoned CUDA context) is named by the worker's last written step; the worker then
runs again without it, so eager and the other contenders still get their results.
"""

from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kskill.agents.reviewer.batch import CUDA_PROBE, Started, start_sandboxed
from kskill.agents.reviewer.protocol import put_in_place
from kskill.agents.reviewer.sandbox import (
    SandboxLimits, SandboxOutcome, python_module_argv, run_sandboxed, workspace_environment)

WORKER_MODULE = "kskill.eval.baseline_worker"
MAX_RUNS = 4  # the first run and up to three without a contender that killed it
# Per function: as the Reviewer's final re-timing; long enough for a median over ~30+ calls.
GPU_TIMING = {"warmup_ms": 25.0, "rep_ms": 150.0, "min_reps": 30, "max_reps": 400}
CPU_TIMING_REPS = 3


@dataclass(frozen=True)
class BaselineSettings:
    """What the worker checks and times; the same for every problem of an evaluation."""

    device: str  # cuda | cpu
    tolerances: dict[str, float] = field(default_factory=lambda: {"strict": 1e-4, "compatible": 1e-2})
    trials: int = 5
    seed: int = 1234
    compile_modes: tuple[str, ...] = ("default",)
    timeout_s: float = 1200.0  # max-autotune alone can compile for minutes
    memory_limit_mb: int = 32768
    timing: dict[str, float] = field(default_factory=lambda: {**GPU_TIMING, "cpu_reps": CPU_TIMING_REPS})


def _job(workdir: Path, problem_path: Path, candidate_path: Path | None, settings: BaselineSettings,
         exclude: list[str], run: int) -> tuple[Path, Path, str]:
    nonce = secrets.token_hex(16)
    (workdir / "problem.py").write_text(problem_path.read_text(encoding="utf-8"))
    if candidate_path is not None:
        (workdir / "model_new.py").write_text(candidate_path.read_text(encoding="utf-8"))
    result_path = workdir / f"result-{run}-{nonce[:8]}.json"  # never one a stray earlier worker writes
    job = {"nonce": nonce, "result_path": str(result_path), "problem_path": str(workdir / "problem.py"),
           "candidate_path": str(workdir / "model_new.py") if candidate_path is not None else None,
           "device": settings.device, "seed": settings.seed, "trials": settings.trials,
           "tolerances": settings.tolerances, "compile_modes": list(settings.compile_modes),
           "timing": settings.timing, "exclude": exclude}
    path = workdir / f"job-{run}.json"
    put_in_place(path, json.dumps(job))  # a worker started early waits for this name
    return path, result_path, nonce


def _read(path: Path, nonce: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("nonce") == nonce else None


def _death(outcome: SandboxOutcome, data: dict[str, Any] | None, settings: BaselineSettings) -> str:
    where = f" during {data['step']}" if data else " before it wrote a result"
    if data and data.get("context_lost_by"):
        return f"it left the CUDA context unusable{where}"
    if outcome.timed_out:
        return f"the worker ran past {settings.timeout_s:g} s{where}"
    if outcome.memory_exceeded:
        return f"the worker exceeded {settings.memory_limit_mb} MB of host memory{where}"
    if outcome.signal_name:
        return f"the worker died with {outcome.signal_name}{where}"
    return f"the worker exited with status {outcome.returncode}{where}"


def _environment(settings: BaselineSettings, extra_env: dict[str, str] | None) -> dict[str, str]:
    env = dict(extra_env or {})
    if settings.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def _limits(settings: BaselineSettings, timeout_s: float) -> SandboxLimits:
    return SandboxLimits(timeout_s=timeout_s, memory_limit_mb=settings.memory_limit_mb,
                         address_space_limit=settings.device == "cpu", isolate_network=True)


def _argv(settings: BaselineSettings, job_path: Path) -> list[str]:
    return python_module_argv(WORKER_MODULE, str(job_path), settings.device)


def start_worker(settings: BaselineSettings, workdir: Path, extra_env: dict[str, str] | None,
                 wait_s: float) -> Started:
    """A baseline worker started before its job: it sets up CUDA and torch.compile's imports, then
    waits (up to wait_s, then its own time limit) for the job that run_baselines gives it. Started
    while kskill optimize runs, it costs that run nothing on the GPU (prepare() launches no kernel)."""
    workdir.mkdir(parents=True, exist_ok=True)
    job_name = "job-0.json"
    return start_sandboxed(_argv(settings, workdir / job_name), workdir, job_name,
                           _limits(settings, settings.timeout_s + wait_s), extra_env=_environment(settings, extra_env),
                           network_probe=CUDA_PROBE if settings.device == "cuda" else ("true",))


def run_baselines(problem_path: Path, candidate_path: Path | None, settings: BaselineSettings, workdir: Path,
                  extra_env: dict[str, str] | None = None, warm: Started | None = None) -> dict[str, Any]:
    """The worker's result; `crashed` maps each contender left out after killing a worker to why.
    `warm`, a worker from start_worker in the same workdir, takes the first run. The worker's temp
    and compiler-cache folders are removed afterwards; its log and answers stay."""
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return _run_worker(problem_path, candidate_path, settings, workdir, extra_env, warm)
    finally:
        if warm is not None:
            warm.end()
        for name, folder in workspace_environment(workdir).items():
            if name.endswith(("DIR", "PATH")):
                shutil.rmtree(folder, ignore_errors=True)


def _sandboxed_run(settings: BaselineSettings, workdir: Path, job_path: Path, env: dict[str, str],
                   warm: Started | None) -> SandboxOutcome:
    """One run of the worker on its job: the warm worker's, where it is alive and read the job, else a fresh one."""
    if warm is not None and warm.job_path == job_path:
        warm.wait(settings.timeout_s)
        if "outcome" in warm.result and not job_path.exists():  # it read the job: this was its run
            return warm.result["outcome"]
        # It never took the job (it died waiting, or its sandbox did not start): a fresh worker reads it.
    return run_sandboxed(_argv(settings, job_path), workdir=workdir, limits=_limits(settings, settings.timeout_s),
                         extra_env=env, network_probe=CUDA_PROBE if settings.device == "cuda" else ("true",))


def _run_worker(problem_path: Path, candidate_path: Path | None, settings: BaselineSettings, workdir: Path,
                extra_env: dict[str, str] | None, warm: Started | None) -> dict[str, Any]:
    env = _environment(settings, extra_env)
    crashed: dict[str, str] = {}
    data: dict[str, Any] | None = None
    for run in range(MAX_RUNS):
        job_path, result_path, nonce = _job(workdir, problem_path, candidate_path, settings, list(crashed), run)
        outcome = _sandboxed_run(settings, workdir, job_path, env, warm if run == 0 else None)
        data = _read(result_path, nonce)
        if data is not None and data.get("finished"):
            break
        culprit = (data or {}).get("context_lost_by") or (data or {}).get("current")
        reason = _death(outcome, data, settings)
        if data is not None and data.get("step") == "timing" and not culprit:
            data["timing_error"] = f"no timing: {reason}"  # the checks before it stand
            break
        if data is not None and data.get("error"):
            reason = data["error"]
        if not culprit or culprit == "eager" or culprit in crashed:
            return {"finished": False, "error": f"the reference could not be run: {reason}",
                    "log_tail": outcome.log[-3000:], "crashed": crashed, **({"partial": data} if data else {})}
        crashed[culprit] = reason
    else:
        return {"finished": False, "error": f"the worker died {MAX_RUNS} times", "crashed": crashed}
    assert data is not None
    for name, reason in crashed.items():
        data["contenders"][name] = {"built": False, "error": f"crashed the worker: {reason}", "correct": {},
                                    "trials": 0, "max_abs_error": 0.0, "message": ""}
    data["crashed"] = crashed
    data["settings"] = asdict(settings)
    return data
