"""The report's four figures, drawn with matplotlib (Agg) into PNG files.

- speedups.png: distribution of kskill's speedup over eager (and torch.compile's), log scale;
- levels.png: per level, geometric-mean speedup of kskill and torch.compile over eager, and of
  kskill over torch.compile;
- scatter.png: per problem, kskill's speedup over eager against torch.compile's;
- iterations.png: best verified speedup so far against the attempt number of the optimize run.
All at the strict tolerance; a problem that is not correct there is left out (or marked).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kskill.eval.metrics import geomean

PLOTS = {"speedups": "speedup distribution", "levels": "per level against eager and torch.compile",
         "scatter": "kskill against torch.compile, per problem", "iterations": "speedup against iteration"}
LEVEL_COLORS = {0: "tab:gray", 1: "tab:blue", 2: "tab:orange", 3: "tab:green"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _times_axis(axis: Any) -> None:
    """Plain '2x' tick labels on a log-scaled speedup axis."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _suffix(representative: bool) -> str:
    return "" if representative else "\n(CPU timings: not representative)"


def _level_label(level: Any) -> str:
    return "all" if level == "all" else f"level {level}"


def draw_all(rows: list[dict[str, Any]], summary: dict[str, Any], folder: Path, representative: bool) -> dict[str, Path]:
    """Every plot that has data, by name; a plot without any data is not drawn."""
    folder.mkdir(parents=True, exist_ok=True)
    plt = _pyplot()
    drawn = {}
    for name, draw in (("speedups", _speedups), ("levels", _levels), ("scatter", _scatter), ("iterations", _iterations)):
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
        if draw(ax, rows, summary, representative):
            fig.tight_layout()
            path = folder / f"{name}.png"
            fig.savefig(path)
            drawn[name] = path
        plt.close(fig)
    return drawn


def _correct(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("correct_strict") and r.get("speedup_eager")]


def _speedups(ax: Any, rows: list[dict[str, Any]], summary: dict[str, Any], representative: bool) -> bool:
    ours = [r["speedup_eager"] for r in _correct(rows)]
    compiled = [r["compile_default_vs_eager"] for r in rows
                if r.get("compile_default_correct_strict") and r.get("compile_default_vs_eager")]
    if not ours:
        return False
    values = ours + compiled
    low, high = math.log10(min(values)), math.log10(max(values))
    if high - low < 0.2:
        low, high = low - 0.1, high + 0.1
    bins = [10 ** (low + (high - low) * i / 24) for i in range(25)]
    ax.hist(ours, bins=bins, alpha=0.7, label=f"kskill (n={len(ours)})", color="tab:blue")
    if compiled:
        ax.hist(compiled, bins=bins, alpha=0.5, label=f"torch.compile (n={len(compiled)})", color="tab:orange")
    ax.set_xscale("log")
    _times_axis(ax.xaxis)
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("speedup over eager (log scale)")
    ax.set_ylabel("problems")
    ax.yaxis.set_major_locator(_integer_ticks())
    ax.set_title("Speedup over eager, correct at 1e-4" + _suffix(representative), fontsize=10)
    ax.legend(fontsize=8)
    return True


def _levels(ax: Any, rows: list[dict[str, Any]], summary: dict[str, Any], representative: bool) -> bool:
    groups = [(lv, s["strict"]) for lv, s in summary["levels"].items()] + [("all", summary["overall"]["strict"])]
    series = {"kskill / eager": [], "torch.compile / eager": [], "kskill / torch.compile": []}
    for _, s in groups:
        compiled = s["compile"].get("default", {})
        series["kskill / eager"].append(s["geomean_speedup_eager"])
        series["torch.compile / eager"].append(compiled.get("compile_geomean_vs_eager"))
        series["kskill / torch.compile"].append(compiled.get("geomean_speedup"))
    if not any(v for values in series.values() for v in values):
        return False
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        bars = ax.bar(xs, [v or 0 for v in values], width, label=label)
        for bar, v in zip(bars, values):
            if v:
                ax.annotate(f"{v:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                            va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)), [_level_label(lv) for lv, _ in groups])
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_ylabel("geometric-mean speedup")
    ax.set_title("Per level, correct at 1e-4" + _suffix(representative), fontsize=10)
    ax.legend(fontsize=8)
    return True


def _scatter(ax: Any, rows: list[dict[str, Any]], summary: dict[str, Any], representative: bool) -> bool:
    points = [r for r in rows if r.get("speedup_eager") and r.get("compile_default_vs_eager")]
    if not points:
        return False
    for level in sorted({r["level"] for r in points}):
        mine = [r for r in points if r["level"] == level]
        ok = [r for r in mine if r.get("correct_strict") and r.get("compile_default_correct_strict")]
        bad = [r for r in mine if r not in ok]
        color = LEVEL_COLORS.get(level, "tab:purple")
        if ok:
            ax.scatter([r["compile_default_vs_eager"] for r in ok], [r["speedup_eager"] for r in ok], color=color,
                       s=18, label=_level_label(level))
        if bad:
            ax.scatter([r["compile_default_vs_eager"] for r in bad], [r["speedup_eager"] for r in bad], color=color,
                       marker="x", s=24, label=f"{_level_label(level)}: one side fails 1e-4")
    values = [v for r in points for v in (r["speedup_eager"], r["compile_default_vs_eager"])]
    low, high = min(values + [1.0]) / 1.2, max(values + [1.0]) * 1.2
    ax.plot([low, high], [low, high], color="grey", linestyle="--", linewidth=0.8, label="kskill = torch.compile")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _times_axis(ax.xaxis)
    _times_axis(ax.yaxis)
    ax.set_xlabel("torch.compile speedup over eager")
    ax.set_ylabel("kskill speedup over eager")
    ax.set_title("Above the diagonal: kskill faster than torch.compile" + _suffix(representative), fontsize=10)
    ax.legend(fontsize=7)
    return True


def _iterations(ax: Any, rows: list[dict[str, Any]], summary: dict[str, Any], representative: bool) -> bool:
    curves = []
    for r in rows:
        best, curve = 1.0, []
        for step in sorted(r.get("trajectory") or [], key=lambda t: t["n"]):
            if step.get("status") == "verified" and step.get("speedup"):
                best = max(best, step["speedup"])
            curve.append((step["n"], best))
        if len(curve) > 1:
            curves.append((r["level"], curve))
    if not curves:
        return False
    for level, curve in curves:
        ax.plot([n for n, _ in curve], [s for _, s in curve], color=LEVEL_COLORS.get(level, "tab:purple"),
                alpha=0.35, linewidth=1)
    longest = max(len(c) for _, c in curves)
    typical = [geomean([c[min(i, len(c) - 1)][1] for _, c in curves]) for i in range(longest)]
    ax.plot(range(longest), typical, color="black", linewidth=2, label="geometric mean over problems")
    ax.set_yscale("log")
    _times_axis(ax.yaxis)
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("attempt of the optimize run")
    ax.set_ylabel("best verified speedup so far")
    ax.set_title("Speedup against iteration (optimize's own reviews)" + _suffix(representative), fontsize=10)
    ax.legend(fontsize=8)
    return True
