"""Profiling: torch.profiler inside the worker, Nsight Compute around it, both mapped to the
Metric vocabulary (HELPERS "Shared names"). What cannot be measured is returned as
unavailable with the reason; nothing is estimated in its place.

Derived metrics, defined here because ncu does not name them:
- roofline_fraction = max(sm_throughput_pct, memory_throughput_pct) / 100 (speed-of-light
  fraction of the dominant kernel); headroom = 1 - roofline_fraction.
- memory_bound: memory throughput above compute throughput and at least 60% of peak;
  compute_bound: the converse (ncu's own rule of thumb; both false means latency-bound).
- arithmetic_intensity = FP32+FP16+FP64 SASS FLOPs (FMA counted twice) / DRAM bytes;
  unavailable when tensor cores ran, because their FLOPs are not in those counters.
- memory_stall_share = share of the cycles between issues spent in memory stalls
  (long/short scoreboard, LG/MIO/TEX throttle, drain, IMC miss).
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Callable
from typing import Any

# --- torch.profiler (worker side) ---------------------------------------------------------

TORCH_PROFILER_METRICS = ("kernel_launches_per_forward", "gpu_kernel_time_ms", "cpu_overhead_pct",
                          "largest_kernel_share_pct", "distinct_kernels")


def torch_profile(forward: Callable[[], Any], *, cuda: bool, calls: int = 5) -> tuple[dict, dict, dict]:
    """(observations, unavailable, detail) from profiling `calls` forwards with torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    forward()
    sync()
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
    kernels: dict[str, list[float]] = {}
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA"):
            kernels.setdefault(event.name, []).append(event.time_range.elapsed_us() / 1e3)
    if not kernels:
        reason = "torch.profiler recorded no GPU activity for the forward"
        return {}, {name: reason for name in TORCH_PROFILER_METRICS}, detail
    per_name = {name: sum(times) / calls for name, times in kernels.items()}
    busy = sum(per_name.values())
    detail["kernels"] = [{"name": n, "launches_per_forward": len(kernels[n]) / calls, "ms_per_forward": t}
                         for n, t in sorted(per_name.items(), key=lambda kv: -kv[1])]
    observations = {
        "kernel_launches_per_forward": sum(len(t) for t in kernels.values()) / calls,
        "gpu_kernel_time_ms": busy,
        "cpu_overhead_pct": max(0.0, 100.0 * (1.0 - busy / wall_ms)) if wall_ms > 0 else 0.0,
        "largest_kernel_share_pct": 100.0 * max(per_name.values()) / busy if busy > 0 else 0.0,
        "distinct_kernels": len(kernels),
    }
    return observations, {}, detail


# --- Nsight Compute (parent side) -------------------------------------------------------------

NCU_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables", "Occupancy",
                "LaunchStats", "WarpStateStats", "SourceCounters", "ComputeWorkloadAnalysis")
FLOP_METRICS = {  # metric -> FLOPs per instruction
    **{f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": w
       for p in ("f", "h", "d") for op, w in (("add", 1), ("mul", 1), ("fma", 2))},
}
NCU_EXTRA_METRICS = (*FLOP_METRICS, "dram__bytes.sum", "gpu__time_duration.sum")

# Vocabulary name -> raw ncu names or regular expressions (first present wins).
NCU_METRIC_MAP: dict[str, tuple[str, ...]] = {
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_throughput_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "l2_throughput_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "l1_throughput_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
    "memory_throughput_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "branch_efficiency_pct": ("smsp__sass_average_branch_targets_threads_uniform.pct",),
    "global_load_sectors_per_request": ("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",),
    "tensor_pipe_utilization_pct": (r"re:^sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active$",
                                    r"re:^sm__inst_executed_pipe_tensor.*pct_of_peak_sustained_active$"),
    "waves_per_sm": ("launch__waves_per_multiprocessor",),
    "grid_size": ("launch__grid_size",),
    "block_size": ("launch__block_size",),
}
STALL_PATTERN = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
STALL_METRICS = {"long_scoreboard": "warp_stall_long_scoreboard_pct", "barrier": "warp_stall_barrier_pct",
                 "math_pipe_throttle": "warp_stall_math_pipe_pct", "not_selected": "warp_stall_not_selected_pct"}
MEMORY_STALLS = ("long_scoreboard", "short_scoreboard", "lg_throttle", "mio_throttle", "tex_throttle",
                 "drain", "imc_miss")
OCCUPANCY_LIMITS = {"registers": "launch__occupancy_limit_registers", "shared_memory":
                    "launch__occupancy_limit_shared_mem", "warps": "launch__occupancy_limit_warps",
                    "blocks": "launch__occupancy_limit_blocks"}
NCU_VOCABULARY = (*NCU_METRIC_MAP, *STALL_METRICS.values(), "shared_mem_per_block_bytes", "occupancy_limiter",
                  "shared_bank_conflicts")
DERIVED_VOCABULARY = ("arithmetic_intensity", "roofline_fraction", "memory_bound", "compute_bound", "headroom",
                      "memory_stall_share")


def ncu_arguments(report_path: str) -> list[str]:
    """The ncu options: no clock locking, only the range between cudaProfilerStart and Stop."""
    args = ["--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--csv", "--page", "raw", "--log-file", report_path, "--metrics", ",".join(NCU_EXTRA_METRICS)]
    for section in NCU_SECTIONS:
        args += ["--section", section]
    return args


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
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


def _lookup(row: dict[str, str], names: tuple[str, ...]) -> float | None:
    for name in names:
        if name.startswith("re:"):
            pattern = re.compile(name[3:])
            keys = [k for k in row if pattern.match(k)]
        else:
            keys = [name] if name in row else []
        for key in keys:
            value = _number(row[key])
            if value is not None:
                return value
    return None


def ncu_observations(rows: list[dict[str, str]]) -> tuple[dict, dict, dict]:
    """(observations, unavailable, detail) of the dominant kernel (longest duration) of the forward."""
    if not rows:
        reason = "ncu report held no kernel rows"
        return {}, {n: reason for n in (*NCU_VOCABULARY, *DERIVED_VOCABULARY)}, {}
    row = max(rows, key=lambda r: _number(r.get("gpu__time_duration.sum", "")) or 0.0)
    obs: dict[str, Any] = {}
    for name, raw in NCU_METRIC_MAP.items():
        value = _lookup(row, raw)
        if value is not None:
            obs[name] = int(value) if name in ("registers_per_thread", "grid_size", "block_size") else value
    shared = [_lookup(row, (f"launch__shared_mem_per_block_{k}",)) for k in ("static", "dynamic")]
    if any(v is not None for v in shared):
        obs["shared_mem_per_block_bytes"] = int(sum(v or 0 for v in shared))
    conflicts = [_lookup(row, (f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{k}.sum",)) for k in ("ld", "st")]
    if any(v is not None for v in conflicts):
        obs["shared_bank_conflicts"] = int(sum(v or 0 for v in conflicts))
    limits = {k: _lookup(row, (raw,)) for k, raw in OCCUPANCY_LIMITS.items()}
    if all(v is not None for v in limits.values()):
        theoretical = obs.get("theoretical_occupancy_pct")
        obs["occupancy_limiter"] = ("none" if theoretical is not None and theoretical >= 99.9
                                    else min(limits, key=lambda k: limits[k]))
    stalls = {m.group(1): _number(v) for k, v in row.items() if (m := STALL_PATTERN.match(k))}
    stalls = {k: v for k, v in stalls.items() if v is not None}
    cycles = _lookup(row, ("smsp__average_warps_active_per_issue_active.ratio",)) or sum(stalls.values())
    if stalls and cycles > 0:
        for reason, name in STALL_METRICS.items():
            if reason in stalls:
                obs[name] = 100.0 * stalls[reason] / cycles
        obs["memory_stall_share"] = sum(stalls.get(r, 0.0) for r in MEMORY_STALLS) / cycles
    obs.update(_derived(row, obs))
    unavailable = {n: "ncu did not report it for this kernel" for n in (*NCU_VOCABULARY, *DERIVED_VOCABULARY)
                   if n not in obs}
    if "arithmetic_intensity" not in obs and "arithmetic_intensity" in unavailable:
        unavailable["arithmetic_intensity"] = _intensity_reason(row, obs)
    detail = {"profiled_kernel": row.get("Kernel Name", ""), "kernels": [
        {"name": r.get("Kernel Name", ""), "duration": _number(r.get("gpu__time_duration.sum", ""))} for r in rows]}
    return obs, unavailable, detail


def _flops(row: dict[str, str]) -> float | None:
    counts = [(_lookup(row, (m,)), w) for m, w in FLOP_METRICS.items()]
    if all(c is None for c, _ in counts):
        return None
    return sum((c or 0.0) * w for c, w in counts)


def _intensity_reason(row: dict[str, str], obs: dict[str, Any]) -> str:
    if obs.get("tensor_pipe_utilization_pct", 0.0) > 1.0:
        return "tensor cores ran; their FLOPs are not in the SASS FLOP counters"
    if not _lookup(row, ("dram__bytes.sum",)):
        return "no DRAM traffic was measured"
    return "ncu reported no FLOP counters"


def _derived(row: dict[str, str], obs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sm, mem = obs.get("sm_throughput_pct"), obs.get("memory_throughput_pct")
    if sm is not None and mem is not None:
        out["roofline_fraction"] = max(sm, mem) / 100.0
        out["headroom"] = 1.0 - out["roofline_fraction"]
        out["memory_bound"] = mem > sm and mem >= 60.0
        out["compute_bound"] = sm >= mem and sm >= 60.0
    flops, dram = _flops(row), _lookup(row, ("dram__bytes.sum",))
    if flops is not None and dram and obs.get("tensor_pipe_utilization_pct", 0.0) <= 1.0:
        out["arithmetic_intensity"] = flops / dram
    return out


def timing_observations(timing: dict[str, Any] | None, representative: bool) -> tuple[dict, dict]:
    """runtime_ms, reference_runtime_ms and speedup from the medians, when they mean something."""
    names = ("runtime_ms", "reference_runtime_ms", "speedup")
    if timing is None:
        return {}, {n: "the candidate was not timed" for n in names}
    if not representative:
        return {}, {n: "CPU timings are not representative (Triton interpreter); see timing" for n in names}
    return {"runtime_ms": timing["candidate"]["median_ms"],
            "reference_runtime_ms": timing["reference"]["median_ms"], "speedup": timing["speedup"]}, {}

