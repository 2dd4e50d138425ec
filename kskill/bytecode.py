"""Whether torch's Python files have compiled bytecode for this interpreter.

Every review starts new Python processes (the judge, its runner, Nsight Compute's target, the
evaluation's baseline worker), each importing torch. Where the installed packages carry no bytecode
(an image built with PYTHONDONTWRITEBYTECODE, or an install with --no-compile) and none can be
written, each of those processes compiles thousands of torch's source files again: on an H200 host
(2026-12) that put 3-5 s into every process start, a third of a review. pip compiles bytecode when it
installs; `python -m compileall` does the same afterwards.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def missing_bytecode(package: str = "torch") -> str | None:
    """A one-line warning when `package` has no bytecode this interpreter would use, else None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    source = Path(spec.origin)
    try:
        cached = Path(importlib.util.cache_from_source(str(source)))
    except NotImplementedError:  # an interpreter that keeps no bytecode cache at all
        return None
    if cached.exists():
        return None
    why = " (PYTHONDONTWRITEBYTECODE is set, so none is written)" if sys.dont_write_bytecode else ""
    return (f"{package} has no compiled bytecode for this Python{why}: every review process compiles its sources "
            f"again, seconds each. Compile it once: {Path(sys.executable).name} -m compileall -q -j 0 "
            f"{source.parent.parent}")


def warn_missing_bytecode() -> None:
    """Log the warning, if any: commands that start review processes call this first."""
    note = missing_bytecode()
    if note:
        log.warning(note)
