"""The processes of the problems in flight, and how an interrupted evaluation stops them.

optimize runs behind a small launcher that asks Linux to kill it when the evaluation dies
(PR_SET_PDEATHSIG), so even a SIGKILLed evaluation leaves no optimize run behind. On SIGINT or
SIGTERM the evaluation stops every optimize process (SIGINT first, so it can stop its own review
workers) and kills the sandboxed baseline workers, which it finds by the folder they run in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# Started in front of optimize: asks Linux to SIGKILL the process when the evaluation that started it
# dies (PR_SET_PDEATHSIG, kept across exec), so a killed evaluation leaves no optimize run behind.
DIE_WITH_PARENT = ("import ctypes, os, sys\n"
                   "ctypes.CDLL(None, use_errno=True).prctl(1, 9)\n"
                   "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
                   "os.execv(sys.argv[2], sys.argv[2:])")


class ChildProcesses:
    """The processes of problems in flight, so an interrupted evaluation can stop them: optimize
    processes by their Popen, sandboxed baseline workers by the folder they run in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self._folders: set[Path] = set()
        self.stopping = threading.Event()  # set once: no problem starts a new step after it

    def add(self, item: subprocess.Popen | Path) -> None:
        with self._lock:
            (self._folders if isinstance(item, Path) else self._procs).add(item)

    def discard(self, item: subprocess.Popen | Path) -> None:
        with self._lock:
            (self._folders if isinstance(item, Path) else self._procs).discard(item)

    def raise_if_stopping(self) -> None:
        if self.stopping.is_set():
            raise Interrupted()

    def stop_all(self) -> None:
        """SIGINT first, so optimize stops its own review workers; SIGKILL what is left after 10 s."""
        self.stopping.set()
        with self._lock:
            procs, folders = list(self._procs), list(self._folders)
        for folder in folders:
            _kill_sessions_in(folder)
        for proc in procs:
            signal_group(proc, signal.SIGINT)
        deadline = time.monotonic() + 10
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)


def _kill_sessions_in(folder: Path) -> None:
    """Kill the process group of every process of ours whose working directory is `folder`:
    run_sandboxed starts its worker there, in a session of its own (Linux /proc)."""
    target = str(folder.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == target:
                os.killpg(os.getpgid(int(entry.name)), signal.SIGKILL)
        except OSError:  # gone already, or not ours to read
            continue


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


class Interrupted(Exception):
    """The evaluation is stopping: this problem gets no row and runs again on --resume."""


CHILDREN = ChildProcesses()  # one per evaluation process


def launcher_argv(argv: list[str]) -> list[str]:
    """argv behind the launcher that ties the process's life to this one (Linux only)."""
    if sys.platform != "linux":
        return argv
    return [sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *argv]
