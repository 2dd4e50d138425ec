"""Where problems run: one lane per local GPU, or Ray tasks across a cluster.

Local: `workers` lanes (default one per visible GPU, one without a GPU), each owning one GPU;
a lane runs its problems one after another, and every process of a problem (optimize, its
review workers, the baseline worker) sees only that GPU through CUDA_VISIBLE_DEVICES. All lanes
share one graph store: the optimize processes open the same KSKILL_HOME (or graph URI).

Ray: each problem is a Ray task asking for one GPU (one CPU in correctness-only mode); Ray
places it and sets CUDA_VISIBLE_DEVICES. No scheduling here beyond keeping at most as many
tasks in flight as the cluster can run, so that `stop_after` can stop new work.

Either way a problem that crashes is recorded as a failed row and the others go on.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kskill.eval.errors import EvalError
from kskill.eval.problem_run import EvalSettings, OnState, run_problem
from kskill.eval.processes import CHILDREN, Interrupted
from kskill.eval.suite import SuiteProblem

OnRow = Callable[[SuiteProblem, dict[str, Any]], None]
Prepare = Callable[[SuiteProblem], Path]  # the problem's fresh work folder


def crashed_row(problem: SuiteProblem, stage: str, error: str) -> dict[str, Any]:
    """The row of a problem whose run itself failed (not its module): recorded, never retried silently."""
    return {"problem": problem.id, "level": problem.level, "name": problem.name, "status": "failed", "stage": stage,
            "error": error[:1000], "correct_strict": False, "correct_compatible": False, "trajectory": []}


def visible_gpus() -> list[str]:
    """Indices of the GPUs this process may use, as CUDA_VISIBLE_DEVICES would name them."""
    import os

    import torch

    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed:
        return [d.strip() for d in listed.split(",") if d.strip()][: torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


def run_local(problems: list[SuiteProblem], settings: EvalSettings, gpus: list[str | None], prepare: Prepare,
              on_row: OnRow, on_state: OnState, stop_after: float | None) -> list[SuiteProblem]:
    """Run on lanes (one per entry of `gpus`); returns the problems not started because of stop_after."""
    lanes: queue.Queue[str | None] = queue.Queue()
    for gpu in gpus:
        lanes.put(gpu)
    deadline = None if stop_after is None else time.monotonic() + stop_after
    not_started: list[SuiteProblem] = []

    def lane(problem: SuiteProblem) -> None:
        gpu = lanes.get()
        try:
            if CHILDREN.stopping.is_set():
                return
            if deadline is not None and time.monotonic() > deadline:
                not_started.append(problem)
                on_state(problem.id, "not started (--stop-after)", None)
                return
            try:
                row = run_problem(problem, settings, prepare(problem), gpu, on_state)
                row["engine"] = "local" + (f" gpu {gpu}" if gpu is not None else "")
            except Interrupted:
                return
            except Exception as exc:  # kskill's own failure on this problem: recorded, the rest go on
                row = crashed_row(problem, "eval", f"{type(exc).__name__}: {exc}")
            on_row(problem, row)
        finally:
            lanes.put(gpu)

    pool = ThreadPoolExecutor(max_workers=len(gpus), thread_name_prefix="kskill-eval-lane")
    try:
        for future in [pool.submit(lane, p) for p in problems]:
            future.result()
    except BaseException:  # interrupted: stop what runs now, start nothing more
        pool.shutdown(wait=False, cancel_futures=True)
        CHILDREN.stop_all()
        raise
    pool.shutdown()
    return not_started


def run_ray(problems: list[SuiteProblem], settings: EvalSettings, prepare: Prepare, on_row: OnRow,
            on_state: OnState, stop_after: float | None, in_flight: int | None, ray: Any) -> list[SuiteProblem]:
    """Run each problem as a Ray task on the connected cluster; returns the problems not started."""
    resources = ray.cluster_resources()
    gpu_task = settings.device == "cuda"
    if gpu_task and resources.get("GPU", 0) < 1:
        raise EvalError("the Ray cluster has no GPU; use --device cpu for a correctness-only run")
    slots = int(resources.get("GPU" if gpu_task else "CPU", 1))
    task = ray.remote(_ray_task).options(num_gpus=1 if gpu_task else 0, num_cpus=1, max_retries=0)
    return _drain(problems, lambda p: task.remote(p, settings, str(prepare(p))), in_flight or max(slots, 1),
                  on_row, on_state, stop_after, ray)


def _ray_task(problem: SuiteProblem, settings: EvalSettings, work_dir: str) -> dict[str, Any]:
    """Runs inside a Ray worker: Ray has already pinned CUDA_VISIBLE_DEVICES to the task's GPU."""
    import ray

    row = run_problem(problem, settings, Path(work_dir), gpu=None)
    row["engine"] = f"ray node {ray.get_runtime_context().get_node_id()[:12]}"
    return row


def _drain(problems: Iterable[SuiteProblem], submit: Callable[[SuiteProblem], Any], in_flight: int, on_row: OnRow,
           on_state: OnState, stop_after: float | None, ray: Any) -> list[SuiteProblem]:
    pending = list(problems)
    deadline = None if stop_after is None else time.monotonic() + stop_after
    running: dict[Any, SuiteProblem] = {}
    while pending or running:
        while pending and len(running) < in_flight and (deadline is None or time.monotonic() <= deadline):
            problem = pending.pop(0)
            on_state(problem.id, "ray task", None)
            running[submit(problem)] = problem
        if not running:
            break
        done, _ = ray.wait(list(running), num_returns=1)
        problem = running.pop(done[0])
        try:
            row = ray.get(done[0])
        except Exception as exc:  # the task's worker died or raised: this problem fails, the others go on
            row = crashed_row(problem, "ray", f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:400]}")
        on_row(problem, row)
    for problem in pending:
        on_state(problem.id, "not started (--stop-after)", None)
    return pending

