"""Running untrusted candidate code in a subprocess the kskill process can always stop.

The child gets its own session (so the whole process group can be killed), a wall-clock
timeout, a memory limit (RLIMIT_AS on the CPU; on a GPU, where CUDA reserves a huge virtual
address space, a resident-memory watch by the parent instead), no core dumps, a cap on
file sizes, an environment without secrets, its own temp, build and cache directories,
and no network where `unshare` can create a network namespace. Whatever the child does, the parent gets a
SandboxOutcome back.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
MAX_FILE_BYTES = 4 * 1024**3  # a candidate printing or writing without end cannot fill the disk
LOG_TAIL_CHARS = 12_000
POLL_S = 0.1


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float
    memory_limit_mb: int
    address_space_limit: bool  # RLIMIT_AS: only where no CUDA context needs its huge mappings
    isolate_network: bool


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

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def scrubbed_environment(base: Mapping[str, str], extra: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The parent's environment without variables whose names suggest secrets, plus `extra`."""
    dropped = sorted(k for k in base if any(m in k.upper() for m in SECRET_MARKERS))
    env = {k: v for k, v in base.items() if k not in dropped}
    env.update(extra)
    return env, dropped


def workspace_environment(workdir: Path) -> dict[str, str]:
    """Per-candidate temp, build and cache directories, created under the candidate's workdir."""
    dirs = {"TMPDIR": "tmp", "TORCH_EXTENSIONS_DIR": "build", "TRITON_CACHE_DIR": "triton_cache",
            "TORCHINDUCTOR_CACHE_DIR": "inductor_cache", "CUDA_CACHE_PATH": "cuda_cache"}
    env = {}
    for var, name in dirs.items():
        path = workdir / name
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    env.update(TEMP=env["TMPDIR"], TMP=env["TMPDIR"], PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
               PYTHONUNBUFFERED="1")
    return env


@functools.lru_cache(maxsize=4)
def network_namespace_prefix(probe: tuple[str, ...] = ("true",)) -> tuple[tuple[str, ...], str]:
    """The command prefix that runs a program without network, and a note on what was possible.

    Tried once per process: `unshare --map-current-user --net` (keeps the uid), then
    `unshare --map-root-user --net`. `probe` is a command that must also work inside
    (on a GPU: initialising CUDA), so isolation is never bought with a broken run.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "network not isolated: unshare is not installed"
    for flags in (("--map-current-user", "--net"), ("--map-root-user", "--net")):
        prefix = (unshare, *flags)
        try:
            done = subprocess.run([*prefix, *probe], capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            last = str(exc)
            continue
        if done.returncode == 0:
            return prefix, f"network isolated with {' '.join(('unshare', *flags))}"
        last = done.stderr.decode(errors="replace").strip()[-300:]
    return (), f"network not isolated: unshare failed here ({last})"


def _limit_resources(memory_limit_mb: int, address_space_limit: bool) -> None:
    """Runs in the child between fork and exec."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    if address_space_limit:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _resident_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text if len(text) <= LOG_TAIL_CHARS else "...\n" + text[-LOG_TAIL_CHARS:]


def run_sandboxed(argv: Sequence[str], *, workdir: Path, limits: SandboxLimits,
                  extra_env: Mapping[str, str] | None = None,
                  network_probe: tuple[str, ...] = ("true",)) -> SandboxOutcome:
    """Run argv in workdir under the limits; never raises for anything the child does."""
    env, dropped = scrubbed_environment(os.environ, {**workspace_environment(workdir), **(extra_env or {})})
    prefix, note = (), "network not isolated: isolation was turned off"
    if limits.isolate_network:
        prefix, note = network_namespace_prefix(network_probe)
    log_path = workdir / "worker.log"
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*prefix, *argv], cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=functools.partial(_limit_resources, limits.memory_limit_mb, limits.address_space_limit),
        )
        timed_out = memory_exceeded = False
        while proc.poll() is None:
            elapsed = time.monotonic() - start
            if elapsed > limits.timeout_s:
                timed_out = True
            elif _resident_mb(proc.pid) > limits.memory_limit_mb:
                memory_exceeded = True
            if timed_out or memory_exceeded:
                _kill_group(proc)
                proc.wait()
                break
            time.sleep(POLL_S)
        _kill_group(proc)  # leftovers of a finished worker (a forked helper) go too
    return SandboxOutcome(
        returncode=proc.returncode, timed_out=timed_out, memory_exceeded=memory_exceeded,
        wall_s=time.monotonic() - start, log=_tail(log_path), network_isolated=bool(prefix),
        network_note=note, dropped_env=dropped,
    )


def python_module_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
