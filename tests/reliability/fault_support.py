"""What the fault-suite tests share: case sizes, the kskill command as a subprocess, the server's pid,
a tiny CPU problem with a correct candidate, finding the processes a test's code left on the host,
and whether a sandbox tool can work on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kskill.graph_schema.embedded import EmbeddedServer


def count_setting(name: str, default: int) -> int:
    """A case's size: KSKILL_RELIABILITY_<NAME>, else the default that fits CI; slow cases are
    run at full size by setting it."""
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

TINY_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
"""
TINY_MODEL_NEW = """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""
# The plain tool, without kskill: if this fails the machine cannot, and the test skips.
RAW_CHECKS = {
    "bwrap": ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
    "unshare": ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "true"],
}


def processes_with(token: str) -> list[int]:
    """Host processes whose command line carries the token."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def skip_unless_tool_works(backend: str) -> None:
    try:
        works = subprocess.run(RAW_CHECKS[backend], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    if not works:
        pytest.skip(f"{backend} is not installed or cannot make namespaces on this machine")
