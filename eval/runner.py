"""`kskill eval SUITE`: select the problems, run the unfinished ones, write tables and the report.

The results folder (results.py) is the only state: each problem's row is written as soon as it
finishes, so a killed evaluation loses at most the problems in flight, and `--resume` runs them
again. The tables and the report are rewritten from all rows at the end of every invocation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kskill.eval import engines
from kskill.eval.baselines import BaselineSettings
from kskill.eval.errors import EvalError
from kskill.eval.metrics import summarize
from kskill.eval.problem_run import EvalSettings, host_stamp
from kskill.eval.progress import EvalProgress
from kskill.eval.results import ResultsDir, write_tables
from kskill.eval.suite import SuiteProblem, read_suite, select
from kskill.eval.suite_report import write_report

COMPILE_MODES = ("max-autotune", "reduce-overhead")  # added to the default mode with --compile-modes


@dataclass
class EvalRequest:
    suite: Path
    out: Path
    levels: tuple[int, ...] = ()
    patterns: tuple[str, ...] = ()
    sample: int | None = None
    seed: int = 0
    resume: bool = False
    workers: int | None = None
    ray_address: str | None = None
    stop_after_s: float | None = None
    device: str = "auto"  # auto | cpu | cuda
    extra_compile_modes: tuple[str, ...] = ()
    optimize: dict[str, Any] = field(default_factory=dict)  # iterations, time_limit_s, brain, atol, rtol, options


@dataclass
class EvalOutcome:
    out: Path
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    not_started: list[str]
    selected: int


def _settings(request: EvalRequest, device: str) -> EvalSettings:
    modes = ("default", *request.extra_compile_modes) if device == "cuda" else ()
    o = request.optimize
    return EvalSettings(device=device, iterations=o.get("iterations"), time_limit_s=o.get("time_limit_s"),
                        brain=o.get("brain"), atol=o.get("atol"), rtol=o.get("rtol"),
                        optimize_options=tuple(o.get("options", ())), compile_modes=modes,
                        baselines=BaselineSettings(device=device, compile_modes=modes))


def _local_device(requested: str, gpus: list[str]) -> str:
    if requested == "cuda" and not gpus:
        raise EvalError("--device cuda was asked for but no CUDA device is visible; use --device cpu")
    return "cuda" if gpus and requested != "cpu" else "cpu"


def run_eval(request: EvalRequest) -> EvalOutcome:
    suite = read_suite(request.suite)
    selection = select(suite.problems, request.levels, request.patterns, request.sample, request.seed)
    results = ResultsDir(request.out)
    ray = None
    if request.ray_address:
        ray = _connect_ray(request.ray_address)
        has_gpu = ray.cluster_resources().get("GPU", 0) >= 1
        device = "cpu" if request.device == "cpu" or (request.device == "auto" and not has_gpu) else "cuda"
        lanes: list[str | None] = []
    else:
        gpus = engines.visible_gpus()
        device = _local_device(request.device, gpus)
        count = request.workers or (len(gpus) if device == "cuda" else 1)
        if device == "cuda" and count > len(gpus):
            raise EvalError(f"--workers {count}: only {len(gpus)} GPU(s) visible, one worker per GPU")
        lanes = list(gpus[:count]) if device == "cuda" else [None] * count
    settings = _settings(request, device)
    record = {"suite": str(suite.root), "selection": [p.id for p in selection], "settings": asdict(settings),
              "sample": {"n": request.sample, "seed": request.seed, "levels": list(request.levels),
                         "filters": list(request.patterns)},
              "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    results.begin(record, request.resume)
    done = results.rows()
    todo = [p for p in selection if p.id not in done]
    not_started: list[SuiteProblem] = []
    progress = EvalProgress([p.id for p in todo], len(lanes) or request.workers or 1, len(selection) - len(todo))

    def on_row(problem: SuiteProblem, row: dict[str, Any]) -> None:
        results.write_row(problem.slug, row)
        progress.finished(problem.id, row)

    def prepare(problem: SuiteProblem) -> Path:
        return results.fresh_problem_dir(problem.slug)

    try:
        with progress:
            if ray is not None:
                not_started = engines.run_ray(todo, settings, prepare, on_row, progress.update, request.stop_after_s,
                                              request.workers, ray)
            elif todo:
                not_started = engines.run_local(todo, settings, lanes, prepare, on_row, progress.update,
                                                request.stop_after_s)
    finally:
        if ray is not None:
            ray.shutdown()
    rows, summary = finalize(request.out)
    return EvalOutcome(request.out, rows, summary, [p.id for p in not_started], len(selection))


def _connect_ray(address: str) -> Any:
    try:
        import ray
    except ImportError as exc:
        raise EvalError("--ray needs Ray: pip install 'kskill[ray]'") from exc
    try:
        ray.init(address=address, log_to_driver=False)
    except Exception as exc:  # a wrong address or a cluster that is down: say so in one line
        raise EvalError(f"cannot connect to the Ray cluster at {address}: {str(exc).strip().splitlines()[-1]}") from exc
    return ray


def finalize(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """results.json, results.csv and the report from every row in `out`, in the selection's order."""
    results = ResultsDir(out)
    record = results.record()
    by_id = results.rows()
    rows = [by_id[pid] for pid in record["selection"] if pid in by_id]
    settings = record["settings"]
    labels = list(settings["baselines"]["tolerances"])
    modes = tuple(settings["compile_modes"])
    summary = summarize(rows, labels, modes)
    stamp = host_stamp()
    sample = record.get("sample") or {}
    meta = {
        "suite": record["suite"], "selected": len(record["selection"]), "finished": len(rows),
        "settings": settings, "representative": settings["device"] == "cuda",
        "l2_flush_bytes": max((r.get("l2_flush_bytes") or 0 for r in rows), default=0),
        "gpus": sorted({r["gpu"] for r in rows if r.get("gpu")}),
        "torch": sorted({r["torch"] for r in rows if r.get("torch")}),
        "triton": sorted({r["triton"] for r in rows if r.get("triton")}),
        "driver": ", ".join(sorted({r["driver"] for r in rows if r.get("driver")})) or stamp["driver"],
        # the rows' own stamps: a resumed evaluation may hold rows of several commits
        "kskill_version": ", ".join(sorted({str(r["kskill_version"]) for r in rows if r.get("kskill_version")}))
                          or stamp["kskill_version"],
        "git_commit": ", ".join(sorted({str(r["git_commit"]) for r in rows if r.get("git_commit")})) or stamp["git_commit"],
        "sample_note": (f"; a level-stratified sample of {sample['n']}, seed {sample['seed']}"
                        if sample.get("n") else ""),
        "started_at": record.get("started_at"),
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_tables(out, rows, meta, summary, modes)
    write_report(out, meta, summary, rows)
    return rows, summary


def default_out(home: Path) -> Path:
    return home / "evals" / time.strftime("eval-%Y%m%d-%H%M%S")

