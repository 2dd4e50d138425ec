"""The evaluation's progress: a live table on a terminal (problem, state, best so far, time), one
line per change otherwise (logs, CI), and an ETA from the mean time of the problems finished."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

SHOWN_ROWS = 24  # running problems first, then the latest finished


@dataclass
class _Line:
    state: str = "waiting"
    best: float | None = None
    started: float | None = None
    wall: float | None = None
    done: bool = False


class EvalProgress:
    """Thread-safe: lanes call update() and finished(); a terminal gets a table refreshed twice a second."""

    def __init__(self, problem_ids: list[str], lanes: int, already_done: int = 0) -> None:
        self.lines = {pid: _Line() for pid in problem_ids}
        self.lanes, self.already_done = max(lanes, 1), already_done
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.console = Console(file=sys.stderr)
        self._live: Live | None = None

    def __enter__(self) -> EvalProgress:
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=2, get_renderable=self._render)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, problem_id: str, state: str, best: float | None) -> None:
        with self._lock:
            line = self.lines[problem_id]
            if line.started is None and not state.startswith("not started"):
                line.started = time.monotonic()
            changed = (state, best) != (line.state, line.best) and not (best is None and state == line.state)
            line.state = state
            line.best = best if best is not None else line.best
        if self._live is None and changed:
            shown = f" (best {best:.2f}x)" if best is not None else ""
            self.console.print(f"{problem_id}: {state}{shown}", highlight=False, soft_wrap=True)

    def finished(self, problem_id: str, row: dict[str, Any]) -> None:
        with self._lock:
            line = self.lines[problem_id]
            line.done, line.wall = True, row.get("wall_s")
            speedup = row.get("speedup_eager")
            line.best = speedup if speedup is not None else line.best
            ok = "correct" if row.get("correct_strict") else "not correct at 1e-4"
            line.state = f"{row.get('status')}, {ok}" + (f": {row['error'][:60]}" if row.get("error") else "")
        if self._live is None:
            speed = f", {speedup:.2f}x eager" if speedup is not None else ""
            self.console.print(f"{problem_id}: {line.state}{speed} [{self.eta()}]", highlight=False, soft_wrap=True)

    def eta(self) -> str:
        walls = [ln.wall for ln in self.lines.values() if ln.done and ln.wall]
        left = sum(1 for ln in self.lines.values() if not ln.done)
        done = len(self.lines) - left
        if not walls:
            return f"{done}/{len(self.lines)} done"
        seconds = sum(walls) / len(walls) * left / self.lanes
        return f"{done}/{len(self.lines)} done, ETA {seconds / 60:.0f} min"

    def _render(self) -> Group:
        with self._lock:
            items = list(self.lines.items())
        now = time.monotonic()
        running = [(p, ln) for p, ln in items if ln.started is not None and not ln.done]
        finished = [(p, ln) for p, ln in items if ln.done][::-1]
        table = Table(expand=False, show_edge=False, header_style="bold")
        for column in ("problem", "state", "best so far", "time"):
            table.add_column(column)
        for pid, ln in (running + finished)[:SHOWN_ROWS]:
            elapsed = ln.wall if ln.done else (now - ln.started if ln.started else None)
            table.add_row(pid, ln.state, f"{ln.best:.2f}x" if ln.best is not None else "-",
                          f"{elapsed:.0f} s" if elapsed is not None else "-")
        head = Text(f"kskill eval: {self.eta()}, {self.lanes} lane(s), {now - self.started:.0f} s"
                    + (f"; {self.already_done} finished earlier" if self.already_done else ""))
        return Group(head, table)
