"""What the fault-suite tests share: a tiny CPU problem with a correct candidate, finding the
processes a test's code left on the host, and whether a sandbox tool can work on this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

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
