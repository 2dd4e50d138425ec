"""Scores of an evaluation, per level and overall, at each tolerance.

Conventions, as KernelBench's scoring (src/score.py) has them: means are taken over the
problems whose returned module is correct; fast_p is the share of ALL problems that are correct
and more than p times faster (fast_0 is therefore the share correct). Against torch.compile, only
problems where torch.compile itself was correct at that tolerance count: a compiled reference
that fails the tolerance is reported (`compile_failed_tolerance`), never used as a baseline.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

P_VALUES = (0.0, 1.0, 1.5, 2.0)


def geomean(values: Iterable[float]) -> float | None:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def _key(p: float) -> str:
    return f"fast_{p:g}"


def vs_compile(rows: list[dict[str, Any]], label: str, mode: str) -> dict[str, Any]:
    """kskill against torch.compile in one mode, on the problems where that compile is correct."""
    name = f"compile_{mode}"
    valid = [r for r in rows if r.get(f"{name}_correct_{label}") and r.get(f"{name}_ms")]
    both = [r for r in valid if r.get(f"correct_{label}") and r.get(f"speedup_{name}")]
    speedups = [r[f"speedup_{name}"] for r in both]
    return {
        "problems": len(valid),
        "compile_failed_tolerance": sum(1 for r in rows if r.get(f"{name}_ms") and not r.get(f"{name}_correct_{label}")),
        "compile_not_run": sum(1 for r in rows if not r.get(f"{name}_ms")),
        "compile_geomean_vs_eager": geomean(r[f"{name}_vs_eager"] for r in valid if r.get(f"{name}_vs_eager")),
        "geomean_speedup": geomean(speedups), "mean_speedup": mean(speedups),
        "share_faster": sum(s > 1 for s in speedups) / len(speedups) if speedups else None,
        **{_key(p): (sum(1 for r in valid if r.get(f"correct_{label}") and (r.get(f"speedup_{name}") or 0) > p)
                     / len(valid) if valid else None) for p in P_VALUES},
    }


def score(rows: list[dict[str, Any]], label: str, compile_modes: tuple[str, ...]) -> dict[str, Any]:
    """Every figure of one tolerance (`strict` or `compatible`) over a group of rows."""
    n = len(rows)
    correct = [r for r in rows if r.get(f"correct_{label}")]
    speedups = [r["speedup_eager"] for r in correct if r.get("speedup_eager")]
    fast = {_key(p): (sum(1 for r in correct if (r.get("speedup_eager") or 0) > p) / n if n else None)
            for p in P_VALUES}
    fast["fast_0"] = len(correct) / n if n else None  # correct with or without a timing
    ruled = [r for r in correct if r.get("kb_triton_rules")]
    fractions = [r["roofline_fraction"] for r in correct if r.get("roofline_fraction")]
    return {
        "problems": n, "correct": len(correct),
        "geomean_speedup_eager": geomean(speedups), "mean_speedup_eager": mean(speedups),
        "eager": fast,
        "compile": {mode: vs_compile(rows, label, mode) for mode in compile_modes},
        "kb_triton_rules_pass": len(ruled),
        "fast_1_kb_triton_rules": sum(1 for r in ruled if (r.get("speedup_eager") or 0) > 1) / n if n else None,
        "median_roofline_fraction": statistics.median(fractions) if fractions else None,
    }


def run_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the evaluation cost: wall time, iterations to the best, LLM tokens and money."""
    its = [r["iterations_to_best"] for r in rows if r.get("iterations_to_best") is not None]
    return {
        "wall_s": round(sum(r.get("wall_s") or 0 for r in rows), 1),
        "mean_iterations_to_best": mean(its),
        "tokens": sum(r.get("tokens") or 0 for r in rows),
        "cost_usd": round(sum(r.get("cost_usd") or 0 for r in rows), 4),
        "failed": [r["problem"] for r in rows if r.get("status") != "done"],
        "returned_reference": sum(1 for r in rows if r.get("returned_reference")),
        **review_times(rows),
    }


def review_times(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per candidate in the batches after the seed (median), the slowest seed review, and the
    largest overrun of optimize's --time-limit (its wall time, problem check included, past the limit)."""
    per_candidate = sorted(b["seconds"] / b["candidates"] for r in rows for b in r.get("review_batches") or []
                           if not b.get("seed") and b.get("candidates"))
    seeds = [b["seconds"] for r in rows for b in r.get("review_batches") or [] if b.get("seed")]
    overruns = [r["optimize_wall_s"] - r["time_limit_s"] for r in rows
                if r.get("time_limit_s") and r.get("optimize_wall_s") is not None]
    return {"median_review_s_per_candidate": statistics.median(per_candidate) if per_candidate else None,
            "batches_after_seed": len(per_candidate), "max_seed_review_s": max(seeds, default=None),
            "max_overrun_s": round(max(overruns), 1) if overruns else None}


def summarize(rows: list[dict[str, Any]], labels: Iterable[str], compile_modes: tuple[str, ...]) -> dict[str, Any]:
    """{"overall": {label: score, ..., "run": ...}, "levels": {level: {...}}}."""
    labels = list(labels)

    def group(members: list[dict[str, Any]]) -> dict[str, Any]:
        return {**{label: score(members, label, compile_modes) for label in labels}, "run": run_figures(members)}

    levels = sorted({r["level"] for r in rows})
    return {"overall": group(rows), "levels": {str(lv): group([r for r in rows if r["level"] == lv]) for lv in levels}}
