"""Processes, pid files, locks and logs, as the embedded server's lifecycle needs them.

Standard library only (kskill.run_state asks `alive` whether a run's process still lives).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path


def lock_fd(path: Path, mode: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, mode)
    return fd


def try_lock_fd(path: Path, mode: int) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes, once all its threads are gone (they hold its files)
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z":
            return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except (OSError, IndexError):
        return True


def is_server_of(pid: int, socket_path: Path) -> bool:
    """Whether `pid` is the redis-server of this socket (redis names its socket in its title),
    so that a stale pid file never makes kskill signal some other process."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"redis-server" in title and str(socket_path).encode() in title


def wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.01)
    return False


def socket_accepts(path: Path) -> bool:
    """True while some process listens on the socket (a busy listener counts: only refusal is stale)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True
    return True


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def warning_lines(text: str) -> list[str]:
    """Redis's warning lines (" # "), less the memory-overcommit notice every start prints."""
    return [line for line in text.splitlines() if " # " in line and "WARNING Memory overcommit" not in line]


def log_reason(path: Path, offset: int) -> str:
    """The line of the log (since `offset`) that best says why the server stopped: an assertion,
    else the last warning, else the last line."""
    lines = [line.strip() for line in read_from(path, max(offset, file_size(path) - 256_000)).splitlines()
             if line.strip()]
    assertions = [line for line in lines if "==>" in line]
    if assertions:
        return assertions[0]
    warnings = warning_lines("\n".join(lines))
    if warnings:
        return warnings[-1]
    return lines[-1] if lines else "its log is empty"
