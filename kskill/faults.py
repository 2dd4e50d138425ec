"""Named points in a run where a fault can be injected, for the crash-consistency suite.

A run reaches each point as it works (before a new attempt is written, between the candidate's
file and its graph node, when a review result arrives, ...). With `KSKILL_FAULT_AT=POINT:K` set,
the K-th time the run reaches POINT it writes its pid to the file `KSKILL_FAULT_MARK` names and
then waits to be killed (`KSKILL_FAULT_MODE=pause`, the default), or goes on (`mark`: for a kill
while a review worker runs). The suite then kills the process, or its process group, with
SIGKILL. Unset, reaching a point does nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

POINTS = ("submit", "submit.disk", "review.start", "review.result", "review.disk", "decision", "diagnose",
          "finish", "finish.run")

_target = os.environ.get("KSKILL_FAULT_AT", "")
_mark = os.environ.get("KSKILL_FAULT_MARK", "")
_mode = os.environ.get("KSKILL_FAULT_MODE", "pause")
_reached: dict[str, int] = {}


def reach(point: str) -> None:
    """Count one arrival at `point`; at the configured arrival, mark it and wait (or go on)."""
    if not _target:
        return
    _reached[point] = _reached.get(point, 0) + 1
    name, _, count = _target.partition(":")
    if name != point or _reached[point] != int(count or 1):
        return
    Path(_mark).write_text(str(os.getpid()))
    while _mode == "pause":
        time.sleep(3600)
