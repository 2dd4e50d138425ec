"""Escapes a hostile candidate tries, written with the standard library only.

The fault suite pastes this file into a candidate (so it runs inside the review's sandbox) and
also runs it as a plain script (`python escapes.py TARGETS_JSON NAME...`, no sandbox): the plain
run shows each escape really works where nothing contains it, so a contained one means something.
Each escape prints one `ESCAPE name: outcome` line; the tests judge by the effects, not the lines.
"""

import ctypes
import json
import os
import shutil
import socket
import sys
import time


def report(name, outcome):
    print(f"ESCAPE {name}: {outcome}", flush=True)


def resp(*args):
    """One redis command in the server's wire protocol."""
    out = f"*{len(args)}\r\n"
    for arg in args:
        out += f"${len(str(arg).encode())}\r\n{arg}\r\n"
    return out.encode()


def graph_socket(t):
    """Open the embedded graph's Unix socket, add a node and delete the others."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(t["socket"])
            s.sendall(resp("GRAPH.QUERY", t["graph"], f"CREATE (:Escaped {{token: '{t['token']}'}})"))
            created = s.recv(4096)
            s.sendall(resp("GRAPH.QUERY", t["graph"], "MATCH (n:Kept) DELETE n"))
            s.recv(4096)
        report("graph_socket", f"connected, wrote {created[:40]!r}")
    except OSError as exc:
        report("graph_socket", f"refused: {exc}")


def env_to_file(t):
    """Write the whole environment (with its secret) outside the workdir and into the host's /tmp."""
    dumped = json.dumps(dict(os.environ))
    report("env_secret", "present" if t["secret"] in dumped else "absent")
    for path in (t["outside_file"], t["host_tmp_file"]):
        try:
            with open(path, "w") as f:
                f.write(dumped)
            report("env_to_file", f"wrote {path}")
        except OSError as exc:
            report("env_to_file", f"refused {path}: {exc}")


def _write(name, path):
    try:
        with open(path, "w") as f:
            f.write("escaped")
        report(name, f"wrote {path}")
    except OSError as exc:
        report(name, f"refused: {exc}")


def write_home(t):
    _write("write_home", t["home_file"])


def delete_kskill_home(t):
    try:
        os.remove(t["victim_file"])
        report("delete_kskill_home", f"deleted {t['victim_file']}")
    except OSError as exc:
        report("delete_kskill_home", f"refused: {exc}")
    shutil.rmtree(t["kskill_home"], ignore_errors=True)


def outlive(t):
    """Start processes meant to outlive the review: posix_spawn, and fork + setsid + fork."""
    sleeper = [sys.executable, "-c", f"import time; time.sleep(60)  # {t['token']}"]
    pid = os.posix_spawn(sys.executable, sleeper, dict(os.environ))
    report("posix_spawn", f"spawned {pid}")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, sleeper)
        os._exit(0)
    report("fork_setsid", "forked a session leader's child")


def proc_environ(t):
    """Read the secret from the environ of the parent, the kskill process, or any process in sight."""
    pids = {t["parent_pid"], os.getppid()} | {int(p) for p in os.listdir("/proc") if p.isdigit()}
    found = []
    for pid in sorted(pids):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if t["secret"].encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    report("proc_environ", f"secret read from {found}" if found else "secret not readable")


def ptrace_parent(t):
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in sorted({t["parent_pid"], os.getppid()}):
        if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
            report("ptrace", f"attached {pid}")
            time.sleep(0.2)
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH: the proof is the attach
        else:
            report("ptrace", f"refused {pid}: {os.strerror(ctypes.get_errno())}")


def write_shm(t):
    _write("write_shm", t["shm_file"])


ESCAPES = {f.__name__: f for f in (graph_socket, env_to_file, write_home, delete_kskill_home, outlive,
                                   proc_environ, ptrace_parent, write_shm)}


def run(targets, names):
    for name in names:
        ESCAPES[name](targets)


if __name__ == "__main__":
    run(json.loads(sys.argv[1]), sys.argv[2:])
