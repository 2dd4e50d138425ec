"""Timing inside the worker: reference and candidate interleaved in one process.

On a GPU the method is triton.testing.do_bench's: CUDA events recorded on the current
stream around each call, a 256 MB buffer zeroed before every call to flush L2, a warm-up
sized in milliseconds, and a repetition count sized from an estimate. Calls of the
functions alternate (A B, B A, ...) so clock drift and thermal state hit all of them alike;
the first measured round is discarded. On the CPU, perf_counter around each call, and the
numbers are marked not representative (Triton runs in its interpreter there).

The timer, event and synchronise functions are bound when this module is imported, which
is before the candidate is, so a candidate that patches them does not patch these.
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
