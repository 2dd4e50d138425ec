"""The line between the judge and the runner process: start it, ask one thing at a time, stop it.

Messages are JSON lines over two pipes handed to the runner when it starts, not its stdin or
stdout, which candidate code may print to (those go to the runner's log). A third line, a Unix
socket, carries the file descriptors of outputs shared on the GPU (transfer.py). Each request has a
deadline; while it waits, the judge watches the runner: exited (a crash, os._exit), over its
memory limit (resident size: on a GPU RLIMIT_AS cannot be used, CUDA maps a huge address
space), or past the deadline (a hang, in Python or in a kernel). Each ends in RunnerDied, whose
class and message become the verdict of the candidate in flight; the runner is killed and the
next request starts a fresh one.

Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kskill.agents.reviewer.sandbox_init import resident_bytes  # the sandbox's own reading, on the runner

RUNNER_MODULE = "kskill.agents.reviewer.runner"
MAX_REPLY_BYTES = 64 * 1024 * 1024
POLL_S = 0.05


class RunnerDied(Exception):
    """The runner stopped answering; failure_class is the Review's class for the candidate in flight."""

    def __init__(self, failure_class: str, message: str) -> None:
        super().__init__(message)
        self.failure_class = failure_class


def death(returncode: int, doing: str) -> RunnerDied:
    """How an exit status reads as a verdict."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if name == "SIGKILL":
            return RunnerDied("memory", f"the candidate's process was killed (SIGKILL, most likely out of memory) "
                                        f"while {doing}")
        return RunnerDied("runtime", f"the candidate's process died with {name} while {doing}")
    return RunnerDied("runtime", f"the candidate's process exited with status {returncode} while {doing} "
                                 "without finishing")


class RunnerProcess:
    """The judge's handle on one runner process."""

    def __init__(self, log_path: Path, device: str, memory_limit_mb: int, watch_memory: bool) -> None:
        to_runner, self._commands = os.pipe()
        self._replies, from_runner = os.pipe()
        self.fd_socket, fds_from_runner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_path = log_path
        self.memory_limit_mb, self.watch_memory = memory_limit_mb, watch_memory
        passed = (to_runner, from_runner, fds_from_runner.fileno())
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", RUNNER_MODULE, *map(str, passed), device],
                pass_fds=passed, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        os.close(to_runner)
        os.close(from_runner)
        fds_from_runner.close()
        self._buffer = b""

    def request(self, message: dict[str, Any], timeout_s: float, doing: str, limit_s: float | None = None
                ) -> dict[str, Any]:
        """Send one command and wait up to timeout_s for its reply; raises RunnerDied.

        limit_s is the limit a timeout is reported against (the candidate's whole budget, of which
        timeout_s may be what is left).
        """
        deadline = time.monotonic() + timeout_s
        try:
            os.write(self._commands, (json.dumps(message) + "\n").encode())
        except BrokenPipeError:
            raise self._dead(doing) from None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise RunnerDied("timeout", f"the candidate ran past the {limit_s or timeout_s:g} s limit while {doing}")
            ready, _, _ = select.select([self._replies], [], [], min(POLL_S, remaining))
            if ready:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise self._dead(doing)
                self._buffer += chunk
                if len(self._buffer) > MAX_REPLY_BYTES:
                    self.kill()
                    raise RunnerDied("other", f"the candidate's process sent an oversized reply while {doing}")
            elif self.proc.poll() is not None:
                raise self._dead(doing)
            elif self.watch_memory and resident_bytes(self.proc.pid) > self.memory_limit_mb * 2**20:
                self.kill()
                raise RunnerDied("memory", f"the candidate's process exceeded the {self.memory_limit_mb} MB memory "
                                           f"limit while {doing}")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            raise RunnerDied("other", f"the candidate's process sent a malformed reply while {doing}")
        return reply

    def _dead(self, doing: str) -> RunnerDied:
        try:
            returncode = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            returncode = self.proc.returncode
        return death(returncode, doing)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Ask the runner to leave, then make sure it has."""
        try:
            os.write(self._commands, b'{"op": "exit"}\n')
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
        for fd in (self._commands, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd_socket.close()


class JudgeLink:
    """The runner's end: commands in, replies out."""

    def __init__(self, command_fd: int, reply_fd: int, fd_socket: int) -> None:
        self.commands = os.fdopen(command_fd, "rb")
        self.reply_fd = reply_fd
        self.fd_socket = socket.socket(fileno=fd_socket)

    def receive(self) -> dict[str, Any] | None:
        line = self.commands.readline()
        return json.loads(line) if line else None

    def reply(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        while data:
            data = data[os.write(self.reply_fd, data):]
