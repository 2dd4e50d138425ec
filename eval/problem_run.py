"""One problem of an evaluation: `kskill optimize` as users run it, then the baselines, then one row.

1. `kskill optimize PROBLEM --out DIR --json ...` runs in a subprocess pinned to the lane's GPU;
   its JSON summary and DIR/model_new.py are all this module reads of it.
2. baseline_worker checks eager, torch.compile and model_new.py at the strict and the compatible
   tolerance and times them together (baselines.py), in the sandbox.
3. The row adds KernelBench's Triton backend verdict on model_new.py and the fraction of the
   roofline reached (FLOPs and bytes from the reference's static features, peaks from agents/gpus.py).

A step that fails is recorded in the row (`status`, `stage`, `error`); nothing here raises for
what a problem or its module does.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kskill.agents.reviewer.backend_rules import check_triton_backend
from kskill.eval.baselines import BaselineSettings, run_baselines, start_worker
from kskill.eval.processes import CHILDREN, launcher_argv, signal_group
from kskill.eval.roofline import LAUNCH_FACTS, roofline_in_subprocess
from kskill.eval.suite import SuiteProblem

OnState = Callable[[str, str, float | None], None]  # (problem id, state, best speedup so far)
TRAJECTORY_KEYS = ("n", "speedup", "status", "parent", "technique", "variant", "failure")
PROGRESS_LINE = re.compile(r"\[\s*(\d+)/(\d+)\].*best ([0-9.]+)x")


@dataclass(frozen=True)
class EvalSettings:
    """How every problem of an evaluation is run (stored in the results folder for --resume)."""

    device: str  # cuda | cpu, resolved before the run starts
    iterations: int | None = None
    time_limit_s: float | None = None
    brain: str | None = None
    atol: float | None = None  # what optimize searches at; None: its per-dtype default
    rtol: float | None = None
    optimize_options: tuple[str, ...] = ()
    compile_modes: tuple[str, ...] = ("default",)
    baselines: BaselineSettings = field(default_factory=lambda: BaselineSettings(device="cpu"))

    def optimize_argv(self, problem: Path, run_dir: Path) -> list[str]:
        argv = [sys.executable, "-P", "-m", "kskill", "optimize", str(problem), "--out", str(run_dir), "--json",
                "--device", self.device]
        for flag, value in (("--iterations", self.iterations), ("--time-limit", self.time_limit_s),
                            ("--brain", self.brain), ("--atol", self.atol), ("--rtol", self.rtol)):
            if value is not None:
                argv += [flag, str(value)]
        return argv + list(self.optimize_options)

    def optimize_timeout_s(self) -> float:
        """optimize's own budget plus its start, its last review and its final re-timing."""
        return (self.time_limit_s or 1800.0) + 900.0


# ------------------------------------------------------------------------------ the host

@functools.lru_cache(maxsize=1)
def host_stamp() -> dict[str, str]:
    """kskill's version and commit, the GPU driver and the host, once per process."""
    from importlib.metadata import PackageNotFoundError, version

    import kskill

    try:
        kskill_version = version("kskill")
    except PackageNotFoundError:
        kskill_version = "unknown"
    source = Path(kskill.__file__).resolve().parent.parent
    commit = _command(["git", "-C", str(source), "rev-parse", "--short=12", "HEAD"])
    if commit and _command(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"]):
        commit += "-dirty"
    # installed from a wheel, kskill has no checkout beside it: whoever built the wheel may name its commit
    commit = commit or os.environ.get("KSKILL_GIT_COMMIT", "").strip() or "unknown"
    driver = _command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).split("\n")[0]
    return {"kskill_version": kskill_version, "git_commit": commit, "driver": driver or "none",
            "host": socket.gethostname()}


@functools.lru_cache(maxsize=None)
def lane_device_name(device: str, gpu: str | None) -> str:
    """The name of the GPU a lane runs on, as torch gives it (nvidia-smi's is the same); "cpu" without one."""
    if device != "cuda":
        return "cpu"
    names = _command(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", *(["-i", gpu] if gpu else [])])
    return names.split("\n")[0].strip() or "cpu"


def _command(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ------------------------------------------------------------------------------ optimize

def run_optimize(problem: SuiteProblem, settings: EvalSettings, run_dir: Path, env: dict[str, str],
                 on_state: OnState) -> tuple[dict[str, Any] | None, str, float]:
    """(optimize's JSON summary or None, the error if any, wall seconds); stderr goes to optimize.log."""
    argv = settings.optimize_argv(problem.path, run_dir)
    log_path = run_dir.parent / "optimize.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write(" ".join(argv) + "\n")
        proc = subprocess.Popen(launcher_argv(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        CHILDREN.add(proc)
        timer = threading.Timer(settings.optimize_timeout_s(), signal_group, (proc, signal.SIGKILL))
        timer.start()
        stdout: list[str] = []
        reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read()), daemon=True)
        reader.start()
        try:
            for line in proc.stderr:  # progress lines: only shown, never relied upon
                log.write(line)
                match = PROGRESS_LINE.search(line)
                if match:
                    on_state(problem.id, f"optimize {match.group(1)}/{match.group(2)}", float(match.group(3)))
            proc.wait()
            reader.join()
        finally:
            timer.cancel()
            CHILDREN.discard(proc)
    wall = time.monotonic() - started
    text = "".join(stdout)
    try:
        summary = json.loads(text)
    except ValueError:
        tail = log_path.read_text(errors="replace").strip().splitlines()[1:][-3:]  # [0] is the command
        if wall >= settings.optimize_timeout_s():
            why = f"killed after {wall:.0f} s"
        elif proc.returncode < 0:
            why = f"died with {signal.Signals(-proc.returncode).name}"
        else:
            why = f"exit status {proc.returncode}"
        return None, f"kskill optimize failed ({why})" + (f": {' | '.join(tail)[-500:]}" if tail else ""), wall
    (run_dir.parent / "optimize.json").write_text(text)
    return summary, "", wall


# ------------------------------------------------------------------------------ the row

def _median(baseline: dict[str, Any], name: str) -> float | None:
    stats = ((baseline.get("timing") or {}).get("stats") or {}).get(name)
    return stats["median_ms"] if stats else None


def _kskill_fields(settings: EvalSettings, summary: dict[str, Any] | None, baseline: dict[str, Any]) -> dict[str, Any]:
    """The returned module's time and correctness at each tolerance."""
    kskill = baseline.get("contenders", {}).get("kskill", {})
    returned_reference = summary is not None and not summary.get("beats_reference")
    eager_ms = _median(baseline, "eager")
    labels = settings.baselines.tolerances
    if not baseline.get("finished"):  # nothing was checked in this evaluation
        kskill_ms, correct = None, {label: False for label in labels}
    elif returned_reference:  # model_new.py is the reference itself: its kernels and its time are eager's
        kskill_ms, correct = eager_ms, {label: True for label in labels}
    else:
        kskill_ms = _median(baseline, "kskill") if kskill.get("built") else None
        correct = {label: bool(kskill.get("built") and kskill.get("correct", {}).get(label)) for label in labels}
    return {"returned_reference": returned_reference, "eager_ms": eager_ms, "kskill_ms": kskill_ms,
            **{f"correct_{label}": ok for label, ok in correct.items()},
            "speedup_eager": eager_ms / kskill_ms if eager_ms and kskill_ms else None,
            "kskill_error": kskill.get("error") or kskill.get("message") or ""}


def _compile_fields(settings: EvalSettings, baseline: dict[str, Any], eager_ms: float | None,
                    kskill_ms: float | None) -> dict[str, Any]:
    """Each torch.compile mode's time, correctness at each tolerance, and the speedups against it."""
    fields: dict[str, Any] = {}
    for mode in settings.compile_modes:
        name = f"compile_{mode}"
        entry, ms = baseline.get("contenders", {}).get(name, {}), _median(baseline, name)
        fields[f"{name}_ms"] = ms
        for label in settings.baselines.tolerances:
            fields[f"{name}_correct_{label}"] = bool(entry.get("built") and entry.get("correct", {}).get(label))
        fields[f"{name}_vs_eager"] = eager_ms / ms if eager_ms and ms else None
        fields[f"speedup_{name}"] = ms / kskill_ms if ms and kskill_ms else None
        fields[f"{name}_error"] = entry.get("error") or entry.get("message") or ""
    return fields


def _optimize_fields(summary: dict[str, Any] | None) -> dict[str, Any]:
    """What optimize's JSON summary says: its own best speedup, iterations, techniques, tokens."""
    s = summary or {}
    usage = s.get("usage") or {}
    return {"optimize_speedup": s.get("best_speedup"), "iterations_to_best": s.get("best_attempt"),
            "reviewed": s.get("reviewed"), "techniques": "+".join(s.get("best_techniques") or []),
            "stop_reason": s.get("stop_reason"), "run_id": s.get("run"),
            "tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) if usage else None,
            "cost_usd": usage.get("cost_usd"),
            # Each attempt's technique, variant and failure too, so that a row alone says why one failed.
            "trajectory": [{key: t.get(key) for key in TRAJECTORY_KEYS} for t in s.get("trajectory", [])],
            "not_written": s.get("not_written") or {},  # planned, and no code written for it: why
            "review_batches": s.get("review_batches") or [], "confirm_batch": s.get("confirm_batch") or {},
            "optimize_elapsed_s": s.get("elapsed_s"), "optimize_loop_began_s": s.get("loop_began_s"),
            "optimize_step_seconds": s.get("step_seconds") or {}}


def _status_fields(optimize_error: str, baseline: dict[str, Any]) -> dict[str, Any]:
    errors = [("optimize", optimize_error)] if optimize_error else []
    if not baseline.get("finished"):
        errors.append(("baselines", baseline.get("error", "the baseline worker did not finish")))
    elif baseline.get("timing_error"):
        errors.append(("timing", baseline["timing_error"]))
    return {"status": "failed" if errors else "done", "stage": ",".join(stage for stage, _ in errors),
            "error": " | ".join(message for _, message in errors)[:1000]}


def compose_row(problem: SuiteProblem, settings: EvalSettings, summary: dict[str, Any] | None, optimize_error: str,
                baseline: dict[str, Any], module_source: str | None, roof_ms: float | None,
                roof_facts: dict[str, Any]) -> dict[str, Any]:
    """One problem's results as a flat row (CSV) plus a few nested details (JSON only)."""
    row: dict[str, Any] = {"problem": problem.id, "level": problem.level, "name": problem.name}
    row.update(_kskill_fields(settings, summary, baseline))
    row.update(_compile_fields(settings, baseline, row["eager_ms"], row["kskill_ms"]))
    row.update(roofline_ms=roof_ms, roofline_fraction=roof_ms / row["kskill_ms"] if roof_ms and row["kskill_ms"] else None,
               eager_roofline_fraction=roof_ms / row["eager_ms"] if roof_ms and row["eager_ms"] else None,
               **{k: roof_facts.get(k) for k in ("flops", "bytes_moved", "dtype", *LAUNCH_FACTS)})
    verdict = check_triton_backend(module_source) if module_source is not None else None
    row.update(kb_triton_rules=verdict.passed if verdict else None,
               kb_rule_errors="; ".join(map(str, verdict.errors)) if verdict else "",
               kb_rule_warnings="; ".join(map(str, verdict.warnings)) if verdict else "")
    row.update(_optimize_fields(summary))
    timing = baseline.get("timing") or {}
    versions = baseline.get("versions") or (baseline.get("partial") or {}).get("versions") or {}
    row["baseline_steps_s"] = baseline.get("steps_s") or (baseline.get("partial") or {}).get("steps_s") or {}
    row["baseline_waited_s"] = baseline.get("waited_s")
    row["compile_s"] = {name: entry.get("compile_s") for name, entry in (baseline.get("contenders") or {}).items()
                        if entry.get("compile_s") is not None}
    # Below 0.9x of a torch.compile mode: the kernels of one call of each (baseline_worker.Bench.kernels).
    row["kernels"], row["kernels_error"] = baseline.get("kernels") or {}, baseline.get("kernels_error", "")
    row.update(timings_representative=bool(timing.get("representative")), l2_flush_bytes=timing.get("l2_flush_bytes"),
               timing_allocator=timing.get("allocator") or {},
               gpu=versions.get("device_name"), torch=versions.get("torch"), triton=versions.get("triton"))
    row.update(_status_fields(optimize_error, baseline))
    return row


def run_problem(problem: SuiteProblem, settings: EvalSettings, work_dir: Path, gpu: str | None,
                on_state: OnState = lambda *_: None) -> dict[str, Any]:
    """Optimize, then baselines, then the row, for one problem; work_dir gets run/, baseline/ and logs."""
    started = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    # The roofline needs only the reference's static features (no GPU): it is worked out meanwhile.
    roof: list[tuple[float | None, dict[str, Any]]] = []
    name = lane_device_name(settings.device, gpu)
    roof_thread = threading.Thread(target=lambda: roof.append(roofline_in_subprocess(problem.path, name)), daemon=True)
    roof_thread.start()
    # The baseline worker starts now and prepares (CUDA, torch.compile's imports) while optimize runs;
    # it launches nothing on the GPU before its job, which comes once optimize is done.
    baseline_env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else None
    CHILDREN.add(work_dir / "baseline")
    warm = start_worker(settings.baselines, work_dir / "baseline", baseline_env, settings.optimize_timeout_s())
    try:
        on_state(problem.id, "optimize", None)
        summary, optimize_error, optimize_s = run_optimize(problem, settings, work_dir / "run", env, on_state)
        model_new = work_dir / "run" / "model_new.py"
        candidate = model_new if summary is not None and summary.get("beats_reference") and model_new.is_file() else None
        CHILDREN.raise_if_stopping()
        on_state(problem.id, "baselines", summary.get("best_speedup") if summary else None)
        started_baselines = time.monotonic()
        baseline = run_baselines(problem.path, candidate, settings.baselines, work_dir / "baseline", baseline_env, warm)
    finally:
        warm.end()
        CHILDREN.discard(work_dir / "baseline")
    baseline_s = time.monotonic() - started_baselines
    CHILDREN.raise_if_stopping()
    roof_thread.join()
    roof_ms, roof_facts = roof[0] if roof else (None, {"roofline_note": "the feature pass did not report"})
    source = model_new.read_text(encoding="utf-8") if summary is not None and model_new.is_file() else None
    row = compose_row(problem, settings, summary, optimize_error, baseline, source, roof_ms, roof_facts)
    row.update(optimize_wall_s=round(optimize_s, 1), time_limit_s=settings.time_limit_s, baseline_wall_s=round(baseline_s, 1),
               wall_s=round(time.monotonic() - started, 1), roofline_note=roof_facts.get("roofline_note", ""),
               finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), **host_stamp())
    row["model_new"] = source  # kept in the row so a result from another host carries the module itself
    (work_dir / "baseline.json").write_text(json.dumps(baseline, indent=1, default=str))
    return row
