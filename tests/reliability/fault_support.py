"""Helpers of the fault suite: case sizes, the kskill command as a subprocess, the server's pid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kskill.graph_schema.embedded import EmbeddedServer


def count_setting(name: str, default: int) -> int:
    """A case's size: KSKILL_RELIABILITY_<NAME>, else the default that fits CI; slow cases are
    run once at full size by hand (the figures in the closing notes say which)."""
    return int(os.environ.get(f"KSKILL_RELIABILITY_{name}", default))


def kskill(home: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """`kskill ARGS` in a fresh process, on KSKILL_HOME=home."""
    environ = {**os.environ, "KSKILL_HOME": str(home), **env}
    return subprocess.run([sys.executable, "-m", "kskill", *args], capture_output=True, text=True,
                          env=environ, timeout=timeout)


def server_pid(home: Path) -> int:
    return int(EmbeddedServer(home / "graph").pid_path.read_text())


def one_line_error(result: subprocess.CompletedProcess) -> bool:
    """A failed command that said why in one line, with no traceback."""
    err = result.stderr.strip()
    return result.returncode != 0 and err.startswith("error: ") and "\n" not in err and "Traceback" not in err
