"""Profiling: torch.profiler inside the worker, Nsight Compute around it, both mapped to the
Metric vocabulary. The raw ncu names and the combination rules come from the skill base's
metrics.yaml (the one definition of the vocabulary). What cannot be measured is returned
as unavailable with the reason; nothing is estimated in its place.

Nsight Compute reports one row per kernel; the observations describe the dominant kernel
of the forward (the longest), and every profiled kernel is listed in the detail.
"""

from __future__ import annotations

import csv
import functools
import io
import time
from collections.abc import Callable
from typing import Any

# --- torch.profiler (worker side) ---------------------------------------------------------

TORCH_PROFILER_METRICS = ("kernel_launches_per_forward", "gpu_kernel_time_ms", "cpu_overhead_pct",
                          "largest_kernel_share_pct", "distinct_kernels")


# torch.profiler's cost is its events, read back in Python: a recurrent network launches thousands of
# kernels a forward (GRU, 6 layers both ways over 512 steps, 84 ms a forward on the H200), and five
# profiled forwards of it took seconds of every review. Forwards are profiled within this window,
# at least one and at most the number asked for.
PROFILE_WINDOW_MS = 50.0


def calls_within(ms_per_call: float | None, calls: int = 5) -> int:
    """How many of `calls` profiled calls fit in PROFILE_WINDOW_MS (at least one)."""
    if not isinstance(ms_per_call, (int, float)) or ms_per_call <= 0:
        return calls
    return max(1, min(calls, int(PROFILE_WINDOW_MS / ms_per_call)))


def torch_profile(forward: Callable[[], Any], *, cuda: bool, calls: int = 5) -> tuple[dict, dict, dict]:
    """(observations, unavailable, detail) from profiling up to `calls` forwards with torch.profiler
    (as many as fit in PROFILE_WINDOW_MS)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    forward()
    sync()
    start = time.perf_counter()
    forward()
    sync()
    calls = calls_within((time.perf_counter() - start) * 1e3, calls)
    start = time.perf_counter()
    for _ in range(calls):
        forward()
    sync()
    wall_ms = (time.perf_counter() - start) * 1e3 / calls  # without the profiler's own overhead
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            forward()
        sync()
    detail: dict[str, Any] = {"wall_ms_per_forward": wall_ms, "calls": calls}
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    detail["cpu_ops"] = [{"name": e.key, "calls_per_forward": e.count / calls,
                          "self_cpu_ms_per_forward": e.self_cpu_time_total / 1e3 / calls} for e in ops[:12]]
    if not cuda:
        reason = "no CUDA device: torch.profiler saw CPU operations only (listed in profile.cpu_ops)"
        return {}, {name: reason for name in TORCH_PROFILER_METRICS}, detail
    events = _gpu_events(prof)
    kernels = device_events(prof, events)
    if not kernels:
        reason = "torch.profiler recorded no GPU activity for the forward"
        return {}, {name: reason for name in TORCH_PROFILER_METRICS}, detail
    per_name = {name: sum(times) / calls for name, times in kernels.items()}
    summed = sum(per_name.values())
    busy = busy_ms_per_call(events, calls)  # as the timing cross-check counts it
    detail["kernels"] = [{"name": n, "launches_per_forward": len(kernels[n]) / calls, "ms_per_forward": t}
                         for n, t in sorted(per_name.items(), key=lambda kv: -kv[1])]
    observations = {
        "kernel_launches_per_forward": sum(len(t) for t in kernels.values()) / calls,
        "gpu_kernel_time_ms": busy,
        "cpu_overhead_pct": max(0.0, 100.0 * (1.0 - busy / wall_ms)) if wall_ms > 0 else 0.0,
        "largest_kernel_share_pct": 100.0 * max(per_name.values()) / summed if summed > 0 else 0.0,
        "distinct_kernels": len(kernels),
    }
    return observations, {}, detail


def _gpu_events(prof: Any) -> list[Any]:
    """The kernels, copies and sets of a finished torch.profiler run."""
    return [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]


def device_events(prof: Any, events: list[Any] | None = None) -> dict[str, list[float]]:
    """Kernel (and memcpy/memset) name -> durations in ms, from a finished torch.profiler run."""
    kernels: dict[str, list[float]] = {}
    for event in _gpu_events(prof) if events is None else events:
        kernels.setdefault(event.name, []).append(event.time_range.elapsed_us() / 1e3)
    return kernels


def busy_ms(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: time the GPU was busy with any of them.
    Kernels that overlap (streams of a cuDNN RNN, branches of a CUDA graph) count once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def busy_ms_per_call(events: list[Any], calls: int) -> float:
    """Milliseconds per call the GPU was busy with the profiled `events` (their times are in us)."""
    return busy_ms([(e.time_range.start, e.time_range.end) for e in events]) / 1e3 / calls


def device_time_per_call(forward: Callable[[], Any], calls: int = 5) -> dict[str, Any]:
    """GPU time per call that CUPTI saw (ms the GPU was busy with any kernel, copy or set, overlaps
    counted once) and the kernels' names, over `calls` calls of a forward that is warm already (it was
    just timed).

    The timing cross-check: CUDA events bracket work on the current stream only, and a forged
    timer reports whatever it likes; the profiler sees every kernel the process launched. Kernels
    that run side by side are counted once: their summed durations exceed the elapsed time, which is
    no sign of untimed work (a GRU's CUDA-graph candidate had been rejected with 25 ms of summed kernel
    time against 9 ms of events; with overlaps counted once it passed, eval/runs/push-h200-s35).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            forward()
        torch.cuda.synchronize()
    events = _gpu_events(prof)  # read once: a profile of many small kernels holds many events
    kernels = device_events(prof, events)
    return {"ms": busy_ms_per_call(events, calls),
            "names": sorted(kernels, key=lambda n: -sum(kernels[n]))[:20]}


# --- Nsight Compute (parent side) -------------------------------------------------------------

# The counters below, besides those the vocabulary names (metrics.yaml), are asked for by name
# rather than through ncu's sections: a section collects dozens of counters nobody reads, and each
# costs replay passes over the kernel's memory. On an H200 (2026-12) the named list took 7.1 s where
# the six sections (SpeedOfLight, MemoryWorkloadAnalysis, Occupancy, LaunchStats, WarpStateStats,
# ComputeWorkloadAnalysis) took 12.5 s on a 1.6 GB pointwise kernel, and 6.4 s against 7.5 s on a
# 4096^3 matmul (ncu and its target's start included), and it returned every counter the sections
# did. A name a GPU lacks is left out of ncu's report, not an error.
NCU_EXTRA_METRICS = ("dram__bytes.sum", "gpu__time_duration.sum", "lts__t_sector_hit_rate.pct",
                     "smsp__sass_branch_targets.sum", "smsp__sass_average_branch_targets_threads_uniform.pct",
                     "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
                     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
                     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
NCU_DERIVED = ("memory_bound", "compute_bound", "memory_stall_share", "wave_efficiency")


@functools.lru_cache(maxsize=1)
def ncu_vocabulary() -> dict[str, tuple[str, ...]]:
    """Vocabulary name -> raw ncu names, for every metric with source ncu in metrics.yaml."""
    from kskill.agents.observations import vocabulary

    return {m.id: tuple(m.ncu_names) for m in vocabulary().values() if m.source == "ncu"}


def ncu_metric_names() -> tuple[str, ...]:
    """Every vocabulary name an ncu run can fill, the derived ones included."""
    return (*ncu_vocabulary(), *NCU_DERIVED)


def ncu_counters() -> list[str]:
    """The raw counters ncu is asked for: every one the vocabulary maps from, and the extras. The warp
    stall metrics' PC-sampling alternates (smsp__pcsamp_*) are left out: their first names are counters,
    which ncu returned on the H200."""
    names = {n for raw in ncu_vocabulary().values() for n in raw if "__pcsamp_" not in n}
    return sorted(names | set(NCU_EXTRA_METRICS))


# ncu replays each kernel it profiles, about a second per kernel with the counters above on the H200
# (2026-12: 1.0 s for a one-kernel matmul, 3.4-4.4 s for a ConvTranspose2d + GELU + GroupNorm forward).
# A network of a hundred kernels then takes minutes: MobileNetV2's forward ran past the 17 s its run had
# left and gave no profile at all. So only the forward's first kernels are profiled: all of a one-op or
# fused forward's; on a longer forward the observations describe the longest of those first kernels,
# and nsight.confirm_runtime compares CUDA events with their sum, which cannot exceed the whole
# forward's, so a time it rejects stays a time no honest forward takes.
NCU_KERNEL_CAP = 8


def ncu_arguments(report_path: str) -> list[str]:
    """The ncu options: no clock locking, only the range between cudaProfilerStart and Stop, and in it
    the first NCU_KERNEL_CAP kernels."""
    return ["--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--launch-count", str(NCU_KERNEL_CAP),
            "--csv", "--page", "raw", "--log-file", report_path, "--metrics", ",".join(ncu_counters())]


def _number(text: str | None) -> float | None:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[dict[str, str]]:
    """Rows (one per profiled kernel) of `ncu --csv --page raw` output; other log lines are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    body = [lines[start]] + [line for line in lines[start + 2:] if line.startswith('"')]  # skip the units row
    return list(csv.DictReader(io.StringIO("\n".join(body))))


def ncu_failure_reason(log: str) -> str:
    """Why ncu gave no metrics, in words a user can act on."""
    if "ERR_NVGPUCTRPERM" in log:
        return ("GPU performance counters are not readable by this user (ERR_NVGPUCTRPERM); allow "
                "profiling for non-admin users (NVreg_RestrictProfilingToAdminUsers=0)")
    if "No kernels were profiled" in log:
        return "ncu profiled no kernels between cudaProfilerStart and cudaProfilerStop"
    errors = [line for line in log.splitlines() if "==ERROR==" in line]
    return "ncu failed: " + (errors[0].strip() if errors else "no report was written")


def ncu_observations(rows: list[dict[str, str]]) -> tuple[dict, dict, dict]:
    """(observations, unavailable, detail) of the dominant kernel (longest duration) of the forward.

    The raw names map to the vocabulary through Observations.from_raw_ncu, the one mapping of
    Nsight Compute metrics in kskill (driven by the ncu_names of metrics.yaml).
    """
    from kskill.agents.observations import Observations, derive_from_counters

    names = ncu_metric_names()
    if not rows:
        return {}, {n: "ncu report held no kernel rows" for n in names}, {}
    row = max(rows, key=lambda r: _number(r.get("gpu__time_duration.sum")) or 0.0)
    measured = Observations.from_raw_ncu(row)
    derive_from_counters(measured)
    obs: dict[str, Any] = dict(measured.values)
    unavailable = {n: "ncu did not report it for this kernel" for n in names if n not in obs}
    detail = {"profiled_kernel": row.get("Kernel Name", ""), "kernels": [
        {"name": r.get("Kernel Name", ""), "duration_ns": _number(r.get("gpu__time_duration.sum"))} for r in rows]}
    if len(rows) >= NCU_KERNEL_CAP:
        detail["note"] = (f"Nsight Compute profiled the forward's first {NCU_KERNEL_CAP} kernels only; "
                          "the observations are those of the longest of them")
    return obs, unavailable, detail



def timing_observations(timing: dict[str, Any] | None, representative: bool) -> tuple[dict, dict]:
    """runtime_ms, reference_runtime_ms and speedup from the medians, when they mean something."""
    names = ("runtime_ms", "reference_runtime_ms", "speedup")
    if timing is None:
        return {}, {n: "the candidate was not timed" for n in names}
    if not representative:
        return {}, {n: "CPU timings are not representative (Triton interpreter); see timing" for n in names}
    return {"runtime_ms": timing["candidate"]["median_ms"],
            "reference_runtime_ms": timing["reference"]["median_ms"], "speedup": timing["speedup"]}, {}

