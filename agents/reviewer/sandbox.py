"""Running untrusted candidate code where it can touch nothing but its own workdir.

A worker runs in fresh user, mount, PID, IPC, UTS and (unless asked otherwise) network
namespaces, made by bubblewrap when it is installed and by util-linux `unshare` otherwise. Its
first process is sandbox_init.py, PID 1 of the namespace: what it leaves running dies with it.
The file system it sees and the environment it gets are sandbox_layout.py's. Limits: a wall-clock
timeout (here), whole-sandbox memory and a process count (the init, every 0.1 s), RLIMIT_NPROC
inside the user namespace, RLIMIT_AS per process on the CPU, RLIMIT_FSIZE, no core dumps.

Which sandbox works is found out once per process by running a probe inside it (on a GPU: CUDA
initialising), strongest first. Where none works the worker runs without namespaces, and only
when the caller says the code is trusted (`SandboxLimits.unsandboxed_ok`); the outcome records
what was isolated and how. Whatever the child does, the parent gets a SandboxOutcome back.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kskill.agents.errors import ReviewError
from kskill.agents.reviewer import sandbox_init
from kskill.agents.reviewer.sandbox_layout import (
    SANDBOX_ROOT, Layout, allowed_environment, build_layout, bwrap_arguments, describe, workspace_environment)

MAX_FILE_BYTES = 4 * 1024**3  # a candidate printing or writing without end cannot fill the disk
LOG_TAIL_CHARS = 12_000
POLL_S = 0.1
STOP_GRACE_S = 5.0
PROBE_TIMEOUT_S = 120.0
BACKENDS = ("bwrap", "unshare")  # strongest first; "none" is what is left
NAMESPACES = ("user", "mount", "pid", "ipc", "uts", "net")
INIT = (sys.executable, "-I", "-S", sandbox_init.__file__)

_running: dict[int, tuple[subprocess.Popen, socket.socket, bool]] = {}  # pid -> what _stop needs
_running_lock = threading.Lock()


class SandboxUnavailable(ReviewError):
    """No sandbox works here and the code to run is not trusted."""


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float
    memory_limit_mb: int  # the whole sandbox: every process's proportional set size summed
    address_space_limit: bool  # RLIMIT_AS: only where no CUDA context needs its huge mappings
    isolate_network: bool
    max_processes: int = 256  # at once, threads not counted
    max_tasks: int = 8192  # RLIMIT_NPROC inside the user namespace (threads count)
    max_file_bytes: int = MAX_FILE_BYTES
    hidden: tuple[str, ...] = ()  # private paths kept out even where they lie in a bound directory
    unsandboxed_ok: bool = False  # run without namespaces where none work (trusted code only)


@dataclass(frozen=True)
class SandboxChoice:
    """The sandbox that works here for one kind of worker, and why stronger ones did not."""

    backend: str  # bwrap | unshare | none
    share_network: bool
    note: str = ""

    @property
    def namespaces(self) -> list[str]:
        if self.backend == "none":
            return []
        return [n for n in NAMESPACES if n != "net" or not self.share_network]


@dataclass
class SandboxOutcome:
    returncode: int | None
    timed_out: bool
    memory_exceeded: bool
    wall_s: float
    log: str
    network_isolated: bool
    network_note: str
    dropped_env: list[str] = field(default_factory=list)
    processes_exceeded: bool = False
    limit_detail: str = ""  # what the init saw when it stopped the sandbox for a limit
    isolation: dict[str, Any] = field(default_factory=dict)  # the fields of the review's Isolation record

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


# --- choosing the sandbox ----------------------------------------------------------------------

def _launcher(backend: str, layout: Layout | None, share_network: bool) -> list[str]:
    """The command that starts the init inside `backend`'s namespaces."""
    if backend == "bwrap":
        net = [] if share_network else ["--unshare-net"]
        return [shutil.which("bwrap"), "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", *net,
                "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL",
                *bwrap_arguments(layout), "--"]
    if backend == "unshare":
        net = [] if share_network else ["--net"]
        return [shutil.which("unshare"), "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount",
                "--ipc", "--uts", *net, "--"]
    return []


@functools.lru_cache(maxsize=8)
def choose_sandbox(probe: tuple[str, ...], share_network: bool = False) -> SandboxChoice:
    """The strongest sandbox in which `probe` (a command that must work inside) succeeds; tried once."""
    notes = []
    for backend in BACKENDS:
        if shutil.which(backend) is None:
            notes.append(f"{backend} is not installed")
            continue
        choice = SandboxChoice(backend, share_network)
        workdir = Path(tempfile.mkdtemp(prefix="kskill-probe-"))
        try:
            out = _run(list(probe), workdir, _probe_limits(), {}, choice)
        except ReviewError as exc:
            notes.append(f"{backend} failed: {exc}")
            continue
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if out.returncode == 0:
            return SandboxChoice(backend, share_network, "; ".join(notes))
        notes.append(f"{backend} failed ({out.returncode}): {out.log.strip()[-300:]}")
    return SandboxChoice("none", share_network, "; ".join(notes) or "no sandbox tool is installed")


def _probe_limits() -> SandboxLimits:
    return SandboxLimits(timeout_s=PROBE_TIMEOUT_S, memory_limit_mb=8192, address_space_limit=False,
                         isolate_network=True, unsandboxed_ok=True)


def require_sandbox(probe: tuple[str, ...], share_network: bool = False) -> SandboxChoice:
    """The working sandbox, or SandboxUnavailable saying why there is none."""
    choice = choose_sandbox(probe, share_network)
    if choice.backend == "none":
        raise SandboxUnavailable(
            f"no sandbox works on this machine ({choice.note}); candidate code would run with your "
            "privileges and see your files. Install bubblewrap or allow unprivileged user namespaces, "
            "or pass --unsafe-no-sandbox for code you trust")
    return choice


# --- running ---------------------------------------------------------------------------------------

def run_sandboxed(argv: Sequence[str], *, workdir: Path, limits: SandboxLimits,
                  extra_env: Mapping[str, str] | None = None,
                  network_probe: tuple[str, ...] = (sys.executable, "-S", "-c", "pass"),
                  on_start: Callable[[dict[str, Any]], None] | None = None,
                  cancel: threading.Event | None = None, log_name: str = "worker.log") -> SandboxOutcome:
    """Run argv in workdir under the limits; never raises for anything the child does.
    `on_start(isolation)` hears what the sandbox isolates as soon as it runs (the outcome's record
    adds the peaks seen). Setting `cancel` ends the sandbox as its time limit would. What it prints
    goes to workdir/log_name (two sandboxes may share a workdir, not a log).

    Raises SandboxUnavailable when no sandbox works and `limits.unsandboxed_ok` is not set, and
    ReviewError when the sandbox that the probe chose cannot be built for this workdir.
    """
    pick = choose_sandbox if limits.unsandboxed_ok else require_sandbox
    choice = pick(tuple(network_probe), not limits.isolate_network)
    return _run(argv, workdir, limits, extra_env or {}, choice, on_start, cancel, log_name)


def _run(argv: Sequence[str], workdir: Path, limits: SandboxLimits, extra_env: Mapping[str, str],
         choice: SandboxChoice, on_start: Callable[[dict[str, Any]], None] | None = None,
         cancel: threading.Event | None = None, log_name: str = "worker.log") -> SandboxOutcome:
    env, passed, dropped = allowed_environment(os.environ, {**workspace_environment(workdir), **extra_env})
    layout = None if choice.backend == "none" else build_layout(workdir, env, limits.hidden, argv[0])
    job = {
        "argv": list(argv), "env": env, "cwd": str(workdir), "pid_namespace": choice.backend != "none",
        "mounts": layout.ops if choice.backend == "unshare" else None, "root": str(workdir / SANDBOX_ROOT),
        "worker_rlimits": _rlimits(limits, choice), "max_processes": limits.max_processes,
        "memory_limit_bytes": limits.memory_limit_mb * 2**20,
    }
    if job["mounts"] is not None:
        (workdir / SANDBOX_ROOT).mkdir(exist_ok=True)
    start = time.monotonic()
    ours, theirs = socket.socketpair()
    with open(workdir / log_name, "wb") as log, ours:
        try:
            proc = subprocess.Popen(
                [*_launcher(choice.backend, layout, choice.share_network), *INIT, str(theirs.fileno())],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        if on_start is not None:
            on_start(_isolation(choice, layout, limits, passed, dropped, {}))
        timed_out = _supervise(proc, ours, job, limits.timeout_s, own_namespace=choice.backend != "none",
                               cancel=cancel or threading.Event())
        status = _read_status(ours)
    if status.get("error"):
        raise ReviewError(f"the {choice.backend} sandbox could not be set up: {status['error']}")
    limit = status.get("limit")
    return SandboxOutcome(
        returncode=status["returncode"] if "returncode" in status else proc.returncode, timed_out=timed_out,
        memory_exceeded=limit == "memory", wall_s=time.monotonic() - start, log=_tail(workdir / log_name),
        network_isolated="net" in choice.namespaces, network_note=_network_note(choice), dropped_env=dropped,
        processes_exceeded=limit == "processes",
        limit_detail=status.get("detail", "") if limit in ("memory", "processes") else "",
        isolation=_isolation(choice, layout, limits, passed, dropped, status))


def _supervise(proc: subprocess.Popen, channel: socket.socket, job: dict[str, Any], timeout_s: float,
               own_namespace: bool, cancel: threading.Event) -> bool:
    """Hand the init its job and wait for the sandbox to end; whether it ran out of time (or was cancelled)."""
    with _running_lock:
        _running[proc.pid] = (proc, channel, own_namespace)
    deadline = time.monotonic() + timeout_s
    try:
        channel.sendall(json.dumps(job).encode() + b"\n")
        while proc.poll() is None:
            if time.monotonic() > deadline or cancel.is_set():
                return True
            try:
                proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
    except BrokenPipeError:
        pass  # the init died before reading its job; the log says why
    finally:  # also on KeyboardInterrupt: nothing of the sandbox outlives this call
        _stop(proc, channel, own_namespace)
        with _running_lock:
            _running.pop(proc.pid, None)
    return False


def _rlimits(limits: SandboxLimits, choice: SandboxChoice) -> dict[str, int | None]:
    return {"CORE": 0, "FSIZE": limits.max_file_bytes,
            "AS": limits.memory_limit_mb * 2**20 if limits.address_space_limit else None,
            # Without a user namespace RLIMIT_NPROC would count every process of the user.
            "NPROC": limits.max_tasks if "user" in choice.namespaces else None}


def _stop(proc: subprocess.Popen, channel: socket.socket, own_namespace: bool) -> None:
    """End the sandbox: ask the init (it kills everything and reports), then kill what is left."""
    if proc.poll() is None:
        try:
            channel.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            # Killing PID 1 of a namespace kills all of it; without one, its descendants go one by one.
            leftovers = [] if own_namespace else sandbox_init.descendants(proc.pid)
            proc.kill()
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group outlives its leader only if something of it is left
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def stop_all() -> None:
    """Stop every sandbox this process still runs (other threads' too): on a stop signal, and at exit."""
    with _running_lock:
        running = list(_running.values())
    for proc, channel, own_namespace in running:
        _stop(proc, channel, own_namespace)


def _read_status(channel: socket.socket) -> dict[str, Any]:
    """The init's last line on the channel ({} when it died without one)."""
    channel.settimeout(1.0)
    data = b""
    try:
        while chunk := channel.recv(65536):
            data += chunk
    except OSError:
        pass
    lines = [line for line in data.splitlines() if line.strip()]
    try:
        return json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}


def _network_note(choice: SandboxChoice) -> str:
    if "net" in choice.namespaces:
        return f"network isolated: own network namespace ({choice.backend})"
    if choice.share_network:
        return "network not isolated: this run needs the host's network (Nsight Compute talks over loopback)"
    return f"network not isolated: no sandbox works here ({choice.note})"


def _isolation(choice: SandboxChoice, layout: Layout | None, limits: SandboxLimits, passed: list[str],
               dropped: list[str], status: dict[str, Any]) -> dict[str, Any]:
    """What was isolated and how, as fields of the review's Isolation record."""
    tasks = ("RLIMIT_NPROC has no effect for root" if os.getuid() == 0 else f"RLIMIT_NPROC {limits.max_tasks} tasks")
    limits_note = (
        f"processes: at most {limits.max_processes} at once, counted by the sandbox's init every {POLL_S:g} s"
        + (f" ({tasks} in the user namespace)" if "user" in choice.namespaces else "")
        + f"; file size: RLIMIT_FSIZE {limits.max_file_bytes // 2**20} MB; no core dumps")
    memory = (("RLIMIT_AS (virtual memory) per process; " if limits.address_space_limit else "")
              + f"the whole sandbox's memory (PSS summed over its processes) checked every {POLL_S:g} s")
    peak = status.get("peak_memory_bytes")
    return {"network_isolated": "net" in choice.namespaces, "network_note": _network_note(choice),
            "dropped_env": dropped, "sandbox": choice.backend, "namespaces": choice.namespaces,
            **describe(layout), "env_passed": passed, "process_limit": limits.max_processes,
            "limits_note": limits_note, "memory_strategy": memory, "sandbox_note": choice.note,
            # rounded up to 0.1 MB, so that a peak over the memory limit never reads as the limit itself
            "peak_memory_mb": -(-peak * 10 // 2**20) / 10 if peak else None,
            "peak_processes": status.get("peak_processes")}


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text if len(text) <= LOG_TAIL_CHARS else "...\n" + text[-LOG_TAIL_CHARS:]


def python_module_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
