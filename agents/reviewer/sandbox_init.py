"""The first process of a review's sandbox: builds it, starts the worker, and ends every process in it.

sandbox.py runs `python -I -S sandbox_init.py FD`: as PID 1 of the sandbox's PID namespace under
bwrap or unshare, or, where no namespace can be made, as a child subreaper of the kskill process.
It reads its job from the socket FD (one JSON line), then:

- builds the root from the job's mounts and pivots into it (under unshare; bwrap builds it itself);
- drops every capability and sets no_new_privs, so nothing inside can undo a mount;
- starts the worker with the resource limits and the allowed environment;
- reaps every orphan, and sums memory (PSS) and counts processes over the whole sandbox;
- when the worker exits, a limit is passed, or the socket says stop (kskill stopped, was killed,
  or ran out of time), kills every process left and writes the worker's status back on the socket.

Only the standard library, and no `site`: it starts before, and outside, the Python environment.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import select
import signal
import socket
import stat
import sys
import time

POLL_S = 0.1
PAGE = os.sysconf("SC_PAGE_SIZE")

# <sys/mount.h>, <linux/prctl.h>, <linux/capability.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
# statvfs flag -> mount flag that a remount must repeat (the kernel refuses to clear locked ones)
KEPT_FLAGS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 16: 16, 64: 64,
              1024: 1024, 2048: 2048, 4096: MS_RELATIME}
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 36, 38, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41}  # syscall numbers; glibc has no wrapper
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
RLIMITS = {"CORE": "RLIMIT_CORE", "FSIZE": "RLIMIT_FSIZE", "AS": "RLIMIT_AS", "NPROC": "RLIMIT_NPROC"}

libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """The sandbox could not be built as asked; nothing of the worker has run."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


# --- building the root (unshare only: bwrap does this itself) -------------------------------------

def _mountpoints_under(path: str) -> list[str]:
    """Mount points at or below path, in the order they were mounted (from /proc/self/mountinfo)."""
    found = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if point == path or point.startswith(path.rstrip("/") + "/"):
                found.append(point)
    return found


def _remount_read_only(path: str) -> None:
    """Make a recursive bind read-only, every submount too, keeping each one's locked flags."""
    for point in _mountpoints_under(path):
        flags = os.statvfs(point).f_flag
        kept = sum(ms for st, ms in KEPT_FLAGS.items() if flags & st)
        _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def _make_target(path: str, like: str) -> None:
    """Create the mount point for `like` (a directory or a file) inside the new root."""
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    elif not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()


def _devfs(root: str, target: str) -> None:
    """A minimal /dev: a few harmless nodes bound from the host, the usual links, an empty shm."""
    dev = root + target
    os.makedirs(dev, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m")
    for name in DEV_NODES:
        if os.path.exists(f"/dev/{name}"):
            _make_target(f"{dev}/{name}", f"/dev/{name}")
            _mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                       ("stderr", "/proc/self/fd/2")):
        os.symlink(link, f"{dev}/{name}")
    os.makedirs(f"{dev}/shm", exist_ok=True)


def _apply(root: str, op: list[str]) -> None:
    kind, *args = op
    if kind in ("ro", "rw", "dev"):
        source, target = args
        _make_target(root + target, source)
        _mount(source, root + target, None, MS_BIND | (MS_REC if kind == "ro" else 0))
        if kind == "ro":
            _remount_read_only(root + target)
    elif kind == "mask":
        (target,) = args
        if os.path.isdir(root + target):
            _mount("tmpfs", root + target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k")
        else:
            _mount("/dev/null", root + target, None, MS_BIND)
            _remount_read_only(root + target)
    elif kind == "devfs":
        _devfs(root, args[0])
    elif kind == "proc":
        os.makedirs(root + args[0], exist_ok=True)
        _mount("proc", root + args[0], "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    elif kind == "symlink":
        link_target, path = args
        os.makedirs(os.path.dirname(root + path), exist_ok=True)
        os.symlink(link_target, root + path)
    else:
        raise SetupError(f"unknown mount operation {kind!r}")


def build_root(root: str, ops: list[list[str]]) -> None:
    """Mount `ops` under `root` (an empty directory), then make it `/` with nothing of the old root left."""
    number = PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SetupError(f"pivot_root is not known on {platform.machine()}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    for op in ops:
        _apply(root, op)
    os.makedirs(root + "/.oldroot")
    _check(libc.syscall(number, root.encode(), (root + "/.oldroot").encode()), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.oldroot", MNT_DETACH), "detach the old root")
    os.rmdir("/.oldroot")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


# --- privileges and limits --------------------------------------------------------------------------

def drop_privileges(last_cap: int) -> None:
    """No capability in any set, no way to gain one (no_new_privs), and this process not traceable."""
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for cap in range(last_cap + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails without CAP_SETPCAP: checked below
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    libc.capset(header, (ctypes.c_uint32 * 6)())
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    with open("/proc/self/status") as status:
        caps = {k: v.strip() for k, v in (line.split(":", 1) for line in status) if k.startswith("Cap")}
    held = {k: v for k, v in caps.items() if int(v, 16)}
    if held:
        raise SetupError(f"capabilities could not be dropped: {held}")


def set_limits(limits: dict[str, int | None]) -> None:
    import resource

    for name, value in limits.items():
        if value is not None:
            resource.setrlimit(getattr(resource, RLIMITS[name]), (value, value))


# --- watching the sandbox ----------------------------------------------------------------------------

def _parents() -> dict[int, int]:
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
                table[int(entry)] = int(text[text.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    return table


def descendants(root: int) -> list[int]:
    """Every process below root, by the parent links in /proc."""
    parents, found, frontier = _parents(), [], {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found.extend(frontier)
    return found


def sandbox_processes(own_namespace: bool) -> list[int]:
    """Every process of the sandbox but this one: all of /proc in its own PID namespace, else descendants."""
    me = os.getpid()
    if own_namespace:
        return [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != me]
    return descendants(me)


def resident_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def proportional_bytes(pid: int) -> int:
    """Proportional set size (shared pages split between sharers); resident size when PSS is not readable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return resident_bytes(pid)


def memory_bytes(pids: list[int], limit: int) -> int:
    """The sandbox's memory: PSS summed, read only where the cheaper resident sum (never less) is over."""
    resident = sum(resident_bytes(pid) for pid in pids)
    return resident if resident <= limit else sum(proportional_bytes(pid) for pid in pids)


def kill_all(own_namespace: bool) -> dict[int, int]:
    """SIGKILL every other process of the sandbox and reap them all; their wait statuses."""
    statuses: dict[int, int] = {}
    if own_namespace:
        try:
            os.kill(-1, signal.SIGKILL)  # PID 1 of a namespace: every process in it but itself
        except ProcessLookupError:
            pass
    else:
        for _ in range(100):
            pids = sandbox_processes(False)
            if not pids:
                break
            for sig in (signal.SIGSTOP, signal.SIGKILL):  # stopped first, so none forks meanwhile
                for pid in pids:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            statuses.update(_reap(block=False))
            time.sleep(0.01)
    statuses.update(_reap(block=True))
    return statuses


def _reap(block: bool) -> dict[int, int]:
    statuses = {}
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return statuses
        if pid == 0:
            return statuses
        statuses[pid] = status


# --- the job -------------------------------------------------------------------------------------------

def start_worker(job: dict) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        for signum in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess restores them
            signal.signal(signum, signal.SIG_DFL)
        set_limits(job["worker_rlimits"])
        os.chdir(job["cwd"])
        os.execvpe(job["argv"][0], job["argv"], job["env"])
    except BaseException as exc:  # noqa: BLE001 - nothing above this frame may run in the child
        os.write(2, f"kskill sandbox: cannot start {job['argv'][0]}: {exc}\n".encode())
    os._exit(127)


def supervise(job: dict, channel: socket.socket, worker: int) -> dict:
    """Wait for the worker while enforcing the limits; the worker's status and what ended it."""
    own_namespace = job["pid_namespace"]
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    result = {"returncode": None, "limit": None, "detail": "", "peak_memory_bytes": 0, "peak_processes": 0}
    next_check = 0.0
    while True:
        ready, _, _ = select.select([channel, wake_r], [], [], POLL_S)
        if wake_r in ready:
            os.read(wake_r, 4096)
        if channel in ready and not _receive(channel):
            result["limit"], result["detail"] = "stopped", "stopped by kskill"
            break
        status = _reap(block=False).get(worker)
        if status is not None:
            result["returncode"] = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + POLL_S
            exceeded = _check_limits(job, own_namespace, result)
            if exceeded:
                break
    status = kill_all(own_namespace).get(worker)
    if result["returncode"] is None and status is not None:
        result["returncode"] = os.waitstatus_to_exitcode(status)
    return result


def _receive(channel: socket.socket) -> bytes:
    """What kskill sent; empty when it closed its end, or went away."""
    try:
        return channel.recv(4096)
    except OSError:
        return b""


def _check_limits(job: dict, own_namespace: bool, result: dict) -> bool:
    pids = sandbox_processes(own_namespace)
    result["peak_processes"] = max(result["peak_processes"], len(pids))
    if len(pids) > job["max_processes"]:
        result["limit"] = "processes"
        result["detail"] = f"more than {job['max_processes']} processes at once ({len(pids)})"
        return True
    used = memory_bytes(pids, job["memory_limit_bytes"])
    result["peak_memory_bytes"] = max(result["peak_memory_bytes"], used)
    if used > job["memory_limit_bytes"]:
        result["limit"] = "memory"
        result["detail"] = (f"{-(-used * 10 // 2**20) / 10:.1f} MB in {len(pids)} process(es), above the "
                            f"{job['memory_limit_bytes'] / 2**20:.0f} MB limit")
        return True
    return False


def _read_job(channel: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = channel.recv(65536)
        if not chunk:
            raise SetupError("kskill closed the sandbox's channel before sending the job")
        data += chunk
    return json.loads(data)


def main() -> int:
    channel = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(channel.fileno(), False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker's own signals never end the sandbox
    try:
        job = _read_job(channel)
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last_cap = int(f.read())
        if job["mounts"] is not None:
            build_root(job["root"], job["mounts"])
        if not job["pid_namespace"]:
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans stay ours to find and kill
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        drop_privileges(last_cap)
    except (SetupError, OSError, ValueError, KeyError) as exc:
        channel.sendall(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        return 125
    result = supervise(job, channel, start_worker(job))
    try:
        channel.sendall(json.dumps(result).encode() + b"\n")
    except OSError:
        pass  # kskill is gone; everything is dead already
    return 0


def _is_socket(fd: int) -> bool:
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or not _is_socket(int(sys.argv[1])):
        sys.exit("usage: sandbox_init.py FD (a socket from kskill's sandbox)")
    sys.exit(main())
