"""Nsight Compute for a batch: once on its fastest passing candidate, once per problem on the reference.

ncu runs the runner (`runner.py --ncu`) on one forward between cudaProfilerStart and Stop, in the
sandbox but with the loopback network ncu talks to its target over. The reference's metrics are
kept in a cache directory, keyed by problem hash, GPU, seed and ncu settings, so later runs on
the same problem do not pay for them again. ncu also measures the kernels from outside the
candidate's process: a candidate whose CUDA events claim much less time than ncu's kernel
durations add up to is rejected (confirm_runtime).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from kskill.agents.problem import Problem
from kskill.agents.reviewer import profiling
from kskill.agents.reviewer.batch import CUDA_PROBE, Started, sandbox_limits, start_sandboxed
from kskill.agents.reviewer.channel import RUNNER_MODULE
from kskill.agents.reviewer.models import Flag, Review, ReviewOptions
from kskill.agents.reviewer.protocol import NCU_SPENT_MARK, put_in_place
from kskill.agents.reviewer.sandbox import python_module_argv

# CUDA events may sit below ncu's kernel durations by noise (ncu flushes caches, replays kernels):
# half of them, less a small allowance, is more than noise.
NCU_CONFIRM_FACTOR = 0.5
NCU_SLACK_MS = 0.01

Profile = tuple[dict[str, Any], dict[str, str], dict[str, Any]]  # observations, unavailable, detail
# ncu profiles a forward's first NCU_KERNEL_CAP kernels. A forward of many more (a network) is not
# described by them, and profiling it costs a network's start-up under ncu, 10-25 s a batch on the
# H200 (MobileNetV2's seed batch: 17.5 s of 57 s), so it is not run there: torch.profiler's
# per-kernel breakdown, which every timed review has, describes the forward instead.
NCU_SKIP_LAUNCHES = 4 * profiling.NCU_KERNEL_CAP


def unavailable_all(reason: str) -> dict[str, str]:
    return {name: reason for name in profiling.ncu_metric_names()}


def skip_reason(observations: dict[str, Any] | None) -> str | None:
    """Why ncu is not run on a forward with these torch.profiler observations (None: it is run)."""
    launches = (observations or {}).get("kernel_launches_per_forward")
    if isinstance(launches, (int, float)) and launches > NCU_SKIP_LAUNCHES:
        return (f"not run: the forward launches {launches:g} kernels, and Nsight Compute's first "
                f"{profiling.NCU_KERNEL_CAP} would not describe it; torch.profiler's kernel breakdown does")
    return None


def start_ncu(workdir: Path, options: ReviewOptions, tag: str, timeout_s: float) -> Started | None:
    """ncu and its target started in workdir (None where ncu is not on PATH). The target imports
    torch and waits for its job, so a batch can start it beside its judge and name the candidate
    to profile once it knows the fastest."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    job_name = f"ncu-{tag}.json"
    argv = [ncu, *profiling.ncu_arguments(str(workdir / f"ncu-{tag}.csv")),
            *python_module_argv(RUNNER_MODULE, "--ncu", str(workdir / job_name))]
    # ncu talks to its target over the loopback device, which a fresh network namespace lacks.
    limits = sandbox_limits(options, timeout_s, address_space_limit=False, isolate_network=False)
    return start_sandboxed(argv, workdir, job_name, limits, network_probe=CUDA_PROBE, log_name=f"ncu-{tag}.log")


def finish_ncu(started: Started | None, options: ReviewOptions, candidate: Path | None, timeout_s: float) -> Profile:
    """ncu metrics of one forward of the candidate (of the reference when candidate is None), by a
    started ncu given its job now; it is stopped after timeout_s."""
    if started is None:
        return {}, unavailable_all("ncu (Nsight Compute) is not on PATH"), {}
    workdir = started.workdir
    job = {"setup": {"problem_path": str(workdir / "problem.py"), "device": "cuda", "seed": options.seed,
                     "memory_fraction": options.gpu_memory_fraction},
           "candidate": None if candidate is None else {"path": str(candidate), "module": "kskill_candidate"}}
    put_in_place(started.job_path, json.dumps(job))
    began = time.monotonic()
    started.wait(timeout_s)
    if "error" in started.result:
        raise started.result["error"]
    outcome = started.result["outcome"]
    report = started.job_path.with_suffix(".csv")
    log = (report.read_text(errors="replace") if report.exists() else "") + "\n" + outcome.log
    detail: dict[str, Any] = {"network_isolated": False, "sandbox": outcome.isolation.get("sandbox"),
                              "wall_s": round(time.monotonic() - began, 2)}
    if outcome.timed_out:
        return {}, unavailable_all(f"ncu ran past {timeout_s:g} s"), detail
    detail["spent"] = target_spent(outcome.log)
    rows = profiling.parse_ncu_csv(log)
    if not rows:
        detail["log_tail"] = log[-4000:]
        return {}, unavailable_all(profiling.ncu_failure_reason(log)), detail
    obs, unavailable, more = profiling.ncu_observations(rows)
    return obs, unavailable, {**detail, **more}


def target_spent(log: str) -> dict[str, float]:
    """Where the ncu target's time went (waiting for its job, set-up, warm-up, the profiled forward),
    as it printed it; empty when it printed nothing readable."""
    for line in reversed(log.splitlines()):
        at = line.find(NCU_SPENT_MARK)
        if at >= 0:
            try:
                spent = json.loads(line[at + len(NCU_SPENT_MARK):])
            except ValueError:
                return {}
            return {str(k): float(v) for k, v in spent.items() if isinstance(v, (int, float))} \
                if isinstance(spent, dict) else {}
    return {}


def run_ncu(workdir: Path, options: ReviewOptions, candidate: Path | None, timeout_s: float) -> Profile:
    """ncu metrics of one forward of the candidate (or of the reference when candidate is None)."""
    tag = "reference" if candidate is None else candidate.stem
    return finish_ncu(start_ncu(workdir, options, tag, timeout_s), options, candidate, timeout_s)


def reference_ncu(problem: Problem, workdir: Path, options: ReviewOptions, gpu: str, timeout_s: float) -> Profile:
    """The reference's ncu profile, from the cache when this problem was profiled on this GPU before."""
    if not options.profile_cache_dir:
        return {}, unavailable_all("no profile cache directory was given, so the reference is not profiled"), {}
    settings = "|".join((problem.source_hash, gpu, str(options.seed), *profiling.ncu_arguments("")))
    key = hashlib.sha256(settings.encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower() or "gpu"
    path = Path(options.profile_cache_dir) / f"reference-{problem.source_hash}-{slug}-{key}.json"
    try:
        cached = json.loads(path.read_text())
        return cached["observations"], cached["unavailable"], {**cached["detail"], "cached": str(path)}
    except (OSError, ValueError, KeyError):
        pass
    obs, unavailable, detail = run_ncu(workdir, options, None, timeout_s)
    if obs:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"problem": problem.name, "gpu": gpu, "observations": obs,
                                       "unavailable": unavailable, "detail": detail}))
            os.replace(tmp, path)
        except OSError as exc:
            detail["cache_note"] = f"not cached: {exc}"
    return obs, unavailable, detail


def add_ncu(review: Review, profile: Profile) -> None:
    """Put a candidate's ncu profile into its review, and reject a runtime ncu does not confirm."""
    obs, unavailable, detail = profile
    for name in obs:
        review.unavailable.pop(name, None)
    review.observations.update(obs)
    review.unavailable.update(unavailable)
    review.profile["ncu"] = detail
    problem = confirm_runtime(review, detail)
    if problem:
        review.flags.append(Flag(code="timing_unconfirmed", severity="reject", message=problem, origin="dynamic"))
        review.correct = False
        review.failure_class, review.failure_phase, review.failure_message = "cheating", "ncu", problem


def confirm_runtime(review: Review, detail: dict[str, Any]) -> str | None:
    """Why ncu's kernel durations contradict the candidate's CUDA-event time, or None."""
    durations = [k.get("duration_ns") for k in detail.get("kernels", [])]
    if review.timing is None or not durations or not all(isinstance(d, (int, float)) for d in durations):
        return None
    ncu_ms = sum(durations) / 1e6
    events_ms = review.timing.candidate.median_ms
    if events_ms + NCU_SLACK_MS < NCU_CONFIRM_FACTOR * ncu_ms:
        return (f"Nsight Compute measured {ncu_ms:.4f} ms of kernels in one forward but CUDA events "
                f"{events_ms:.4f} ms: the speedup is not confirmed")
    return None
