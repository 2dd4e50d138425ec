"""Timing inside the worker: reference and candidate interleaved in one process.

On a GPU the method is triton.testing.do_bench's: CUDA events recorded on the current
stream around each call, a 256 MB buffer zeroed before every call to flush L2, a warm-up
sized in milliseconds, and a repetition count sized from an estimate. Calls of the
functions alternate (A B, B A, ...) so clock drift and thermal state hit all of them alike;
the first measured round is discarded. On the CPU, perf_counter around each call, and the
numbers are marked not representative (Triton runs in its interpreter there).

The timer, event and synchronise functions are bound when this module is imported, which
is before the candidate is, so a candidate that patches them does not patch these (and the
runner's Integrity check sees a candidate that patches this module instead).

timing_problems() is the judge's reading of the runner's numbers: the checks a timing must
pass before its speedup counts.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize

L2_FLUSH_BYTES = 256 * 1000 * 1000  # the buffer size triton.testing.do_bench zeroes


def summarize(times_ms: list[float]) -> dict[str, float]:
    """Median and spread of a list of per-call times, as a TimingStats dict."""
    ordered = sorted(times_ms)
    cuts = statistics.quantiles(ordered, n=5, method="inclusive") if len(ordered) > 1 else ordered * 4
    return {
        "median_ms": statistics.median(ordered), "mean_ms": statistics.fmean(ordered),
        "std_ms": statistics.pstdev(ordered), "min_ms": ordered[0], "max_ms": ordered[-1],
        "p20_ms": cuts[0], "p80_ms": cuts[3], "n": len(ordered),
    }


def _alternating(names: list[str], round_number: int) -> list[str]:
    return names if round_number % 2 == 0 else names[::-1]


def time_cuda(fns: dict[str, Callable[[], Any]], *, warmup_ms: float, rep_ms: float,
              min_reps: int, max_reps: int) -> dict[str, Any]:
    """Interleaved CUDA-event timing of each function; returns per-name stats and the settings used."""
    names = list(fns)
    cache = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    for fn in fns.values():
        fn()
    _synchronize()
    estimate: dict[str, float] = {}
    for name, fn in fns.items():
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        start.record()
        for _ in range(5):
            cache.zero_()
            fn()
        end.record()
        _synchronize()
        estimate[name] = max(start.elapsed_time(end) / 5, 1e-4)
    slowest = max(estimate.values())
    warmup = max(1, int(warmup_ms / slowest))
    reps = max(min_reps, min(max_reps, int(rep_ms / slowest)))
    for round_number in range(warmup):
        for name in _alternating(names, round_number):
            fns[name]()
    starts = {n: [_Event(enable_timing=True) for _ in range(reps + 1)] for n in names}
    ends = {n: [_Event(enable_timing=True) for _ in range(reps + 1)] for n in names}
    for i in range(reps + 1):
        for name in _alternating(names, i):
            cache.zero_()
            starts[name][i].record()
            fns[name]()
            ends[name][i].record()
    _synchronize()
    stats = {n: summarize([s.elapsed_time(e) for s, e in zip(starts[n][1:], ends[n][1:])]) for n in names}
    return {"stats": stats, "warmup_reps": warmup, "l2_flush_bytes": L2_FLUSH_BYTES}


def synchronized_wall_ms(fn: Callable[[], Any], calls: int = 5) -> float:
    """Median wall time of a call with the whole device synchronised before and after.

    Work hidden on other streams escapes CUDA events on the current stream but not a
    device-wide synchronise, so a large gap between the two exposes it.
    """
    times = []
    for _ in range(calls):
        _synchronize()
        start = _perf_counter()
        fn()
        _synchronize()
        times.append((_perf_counter() - start) * 1e3)
    return statistics.median(times)


def time_cpu(fns: dict[str, Callable[[], Any]], *, reps: int) -> dict[str, Any]:
    """Interleaved perf_counter timing on the CPU; one warm-up call each, first round discarded."""
    names = list(fns)
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(reps + 1):
        for name in _alternating(names, i):
            start = _perf_counter()
            fns[name]()
            times[name].append((_perf_counter() - start) * 1e3)
    return {"stats": {n: summarize(t[1:]) for n, t in times.items()}, "warmup_reps": 1, "l2_flush_bytes": 0}


# A candidate's CUDA-event median may sit below the GPU time the profiler saw by noise only; the
# profiler runs without the L2 flush, so its kernels are if anything faster than the timed ones.
UNCONFIRMED_FACTOR = 1.5
SLACK_MS = 0.02


def timing_problems(reply: dict[str, Any], indices: list[int], cuda: bool, judge_reference_ms: float | None,
                    cuda_claims: dict[int, list[str]]) -> list[tuple[int | None, str, str, str]]:
    """(candidate index or None for all, flag code, message, severity) for what the numbers give away.

    - results served again (the same output memory on two calls), where the reference computes;
    - inputs changed while timing;
    - on a GPU: events that claim less than the kernel time the profiler saw (work escaping the
      timed region, or a faked timer), no GPU work at all where the reference has some, CUDA
      kernels claimed by the source but never seen, work hidden from events on another stream,
      and a reference slower beside the candidates than in the judge's own process.
    """
    found: list[tuple[int | None, str, str, str]] = []
    stats, reused = reply.get("stats") or {}, reply.get("reused") or {}
    device, wall = reply.get("device") or {}, reply.get("wall_ms") or {}
    if reply.get("inputs_changed"):
        found.append((None, "inputs_mutated", "an input changed while the candidates were timed", "reject"))
    for i in indices:
        name = f"c{i}"
        if reused.get(name) and not reused.get("reference"):
            found.append((i, "outputs_reused", "two calls returned the same output memory: a result computed once "
                          "and served again", "reject"))
        events = (stats.get(name) or {}).get("median_ms")
        seen = (device.get(name) or {}).get("ms")
        if not cuda or not isinstance(events, (int, float)) or not isinstance(seen, (int, float)):
            continue
        if seen > UNCONFIRMED_FACTOR * events + SLACK_MS:
            found.append((i, "timing_unconfirmed", f"torch.profiler saw {seen:.4f} ms of GPU work per call but CUDA "
                          f"events measured {events:.4f} ms: the speedup is not confirmed", "reject"))
        reference_seen = (device.get("reference") or {}).get("ms") or 0.0
        if seen == 0 and reference_seen > 0:
            found.append((i, "no_gpu_work", f"the candidate ran no GPU work per call where the reference runs "
                          f"{reference_seen:.4f} ms: results are reused, not computed", "reject"))
        names = (device.get(name) or {}).get("names") or []
        claimed = cuda_claims.get(i) or []
        if claimed and not any(c in k for c in claimed for k in names):
            found.append((i, "kernel_not_launched", f"the candidate defines CUDA kernel(s) {', '.join(claimed)} but "
                          "the profiler saw none of them run", "reject"))
        if isinstance(wall.get(name), (int, float)) and wall[name] > 3 * events + 0.5:
            found.append((i, "untimed_work", f"a device-synchronised call takes {wall[name]:.3f} ms but CUDA events "
                          f"on the current stream see {events:.3f} ms: work may run on another stream", "warn"))
    reference = (stats.get("reference") or {}).get("median_ms")
    if cuda and judge_reference_ms and isinstance(reference, (int, float)) \
            and reference > UNCONFIRMED_FACTOR * judge_reference_ms + SLACK_MS:
        found.append((None, "reference_slowed", f"the reference took {reference:.4f} ms beside the candidates but "
                      f"{judge_reference_ms:.4f} ms in the judge's own process", "reject"))
    return found


def timing_record(reply: dict[str, Any], index: int, cuda: bool, judge_reference_ms: float | None) -> dict | None:
    """The Timing fields of one candidate out of the runner's timing reply (None if malformed)."""
    stats = reply.get("stats") or {}
    ref, cand = _stats(stats.get("reference")), _stats(stats.get(f"c{index}"))
    if ref is None or cand is None:
        return None
    compiled = _stats(stats.get("compiled_reference"))
    device = reply.get("device") or {}
    record = {"method": "cuda_events" if cuda else "perf_counter", "representative": cuda,
              "note": "" if cuda else "CPU timing (Triton interpreter): not representative of GPU speed",
              "reference": ref, "candidate": cand, "compiled_reference": compiled,
              "speedup": ref["median_ms"] / max(cand["median_ms"], 1e-9),
              "l2_flush_bytes": int(reply.get("l2_flush_bytes", 0)), "warmup_reps": int(reply.get("warmup_reps", 0)),
              "functions_timed": len(stats), "judge_reference_ms": judge_reference_ms,
              "candidate_device_ms": (device.get(f"c{index}") or {}).get("ms"),
              "reference_device_ms": (device.get("reference") or {}).get("ms")}
    if compiled is not None:
        record["speedup_vs_compiled"] = compiled["median_ms"] / max(cand["median_ms"], 1e-9)
    return record


def _stats(value: Any) -> dict[str, float] | None:
    keys = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "p20_ms", "p80_ms", "n")
    if not isinstance(value, dict) or not all(isinstance(value.get(k), (int, float)) for k in keys):
        return None
    return {k: value[k] for k in keys}
