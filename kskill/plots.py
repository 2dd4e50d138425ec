"""The speedup-per-attempt plot, drawn once for report.md (PNG) and the audit page (inline SVG)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Point:
    """One reviewed attempt: its number, its speedup (None: it failed) and what it added."""

    n: int
    speedup: float | None
    label: str


NOT_REPRESENTATIVE = "timings not representative (no GPU)"


def speedup_plot(points: list[Point], title: str, representative: bool | None, target: Path | None = None) -> str:
    """Draw the plot; write a PNG to `target` and return its path, or return the SVG text when
    `target` is None. Empty when nothing was timed."""
    figure = speedup_figure(points, title, representative)
    if figure is None:
        return ""
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(target if target is not None else buffer, **({} if target is not None else {"format": "svg"}))
    plt.close(figure)
    return str(target) if target is not None else buffer.getvalue()


def speedup_figure(points: list[Point], title: str, representative: bool | None) -> Any:
    """The matplotlib Figure: each attempt's speedup labelled with what it added, the best so far,
    whole-number attempt ticks, and a mark when the timings are not representative; None when
    nothing was timed."""
    if not any(p.speedup is not None for p in points):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    best, running = [], 1.0
    for p in points:
        running = max(running, p.speedup or 0.0)
        best.append(running)
    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=120)
    ok = [p for p in points if p.speedup is not None]
    failed = [p for p in points if p.speedup is None]
    ax.plot([p.n for p in points], best, "-", color="tab:blue", label="best so far (reference = 1)")
    ax.scatter([p.n for p in ok], [p.speedup for p in ok], color="tab:green", zorder=3, label="verified attempt")
    if failed:
        ax.scatter([p.n for p in failed], [0.0] * len(failed), marker="x", color="tab:red", zorder=3,
                   label="failed attempt")
    for p in points:
        ax.annotate(p.label, (p.n, p.speedup or 0.0), textcoords="offset points", xytext=(0, 7), ha="center",
                    fontsize=6.5, rotation=20, color="#333")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # attempts are whole numbers
    ax.set_xlabel("attempt")
    ax.set_ylabel("speedup vs reference")
    ax.set_ylim(bottom=0, top=max(best) * 1.25)
    ax.set_title(title, fontsize=10)
    if representative is False:
        ax.text(0.5, 0.5, NOT_REPRESENTATIVE, transform=ax.transAxes, ha="center", va="center", fontsize=14,
                color="#c0392b", alpha=0.35, rotation=12)
    ax.margins(x=0.1)  # room for the labels of the first and last attempts
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
