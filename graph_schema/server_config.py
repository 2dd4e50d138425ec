"""How kskill runs the embedded redis-server + FalkorDB: persistence, a bounded log, and a server
that answers only the commands kskill uses, on its Unix socket alone, with no way out to the network.

Why each setting:
- `appendonly yes`, `appendfsync always`: every acknowledged write survives a crash of kskill, of the
  server or of the machine. redis writes and fsyncs the log before it replies (one fsync for all the
  writes of an event-loop turn). Under `everysec`, redis may hold a write back for up to two seconds
  while a background fsync is still running, and reply meanwhile; a server killed then loses writes it
  has acknowledged. That is the likely cause of the one loss CI showed under load (the fault suite's
  server-kill case, one acknowledged batch of 60 gone), which did not recur in 40 runs under load here.
  The cost measured here: 0.5 ms a transaction (200 transactions of 50 nodes, 0.33 -> 0.43 s).
- `aof-load-truncated no`: redis would otherwise drop a damaged tail silently; kskill cuts it
  itself, keeping a copy (aof.py), so the user hears of it.
- `auto-aof-rewrite-*`: a long-lived server folds its log into a snapshot as it grows.
- `EFFECTS_THRESHOLD 0`: FalkorDB records every write as its effects (GRAPH.EFFECT) rather than
  as the query text. Replaying a query inside a MULTI block makes FalkorDB yield to clients
  while redis executes EXEC, and any client command arriving then aborts the server with
  `ASSERTION FAILED '!server.in_exec'` (FalkorDB 4.16 `QueryCtx_LockForCommit` ->
  `RedisModule_Yield`; redis `processCommand`). Effects are applied without that yield, and
  replay faster.
- the ACL allow-list: the default user may run the graph commands, transactions, PING, INFO
  and BGREWRITEAOF, nothing else. MIGRATE, REPLICAOF, CONFIG, DEBUG, MODULE, SHUTDOWN,
  FLUSHALL, scripting, GRAPH.CONFIG, GRAPH.UDF and the like are refused. kskill stops the
  server with SIGTERM (a clean shutdown that flushes the log), never with SHUTDOWN.
  GRAPH.EFFECT must stay allowed: redis replays the append-only file as the default user and
  checks its rights again at each EXEC, so a block of effects it may not run is dropped
  (with a CRITICAL line) and its writes are lost.
- `port 0`: no TCP listener; the socket is 0700 in a 0700 folder.
- FalkorDB's LOAD CSV reads only an empty private import folder; its https downloads go through
  a proxy address that refuses, and the server runs in a network namespace of its own where
  the system allows one (then it has no network at all).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

LOG_LEVEL = "notice"
REWRITE_PERCENTAGE = 100
REWRITE_MIN_SIZE = "16mb"
ALLOWED_COMMANDS = (
    "ping", "echo", "hello", "auth", "select", "quit", "reset", "info", "bgrewriteaof",
    "multi", "exec", "discard", "client|setinfo", "client|setname", "client|getname", "client|id",
    "graph.query", "graph.ro_query", "graph.explain", "graph.profile", "graph.delete", "graph.list",
    "graph.constraint", "graph.info", "graph.slowlog", "graph.copy", "graph.memory", "graph.effect",
)
# An address that refuses connections: FalkorDB's curl honours these for LOAD CSV FROM 'https://...'.
DEAD_PROXY = "http://127.0.0.1:9"


def server_args(redis_server: str, module: str, data_dir: Path, socket: Path, pid_path: Path,
                log_path: Path, import_dir: Path) -> list[str]:
    """The redis-server command line (no secrets in it: `ps` shows it)."""
    return [
        *network_isolation(), redis_server,
        "--port", "0",
        "--unixsocket", str(socket), "--unixsocketperm", "700",
        "--dir", str(data_dir), "--pidfile", str(pid_path),
        "--logfile", str(log_path), "--loglevel", LOG_LEVEL,
        "--daemonize", "yes",
        "--appendonly", "yes", "--appendfsync", "always", "--save", "",
        "--aof-use-rdb-preamble", "yes", "--aof-load-truncated", "no",
        "--auto-aof-rewrite-percentage", str(REWRITE_PERCENTAGE),
        "--auto-aof-rewrite-min-size", REWRITE_MIN_SIZE,
        "--enable-debug-command", "no", "--enable-module-command", "no",
        "--enable-protected-configs", "no",
        "--crash-memcheck-enabled", "no",  # a crash report's memory test takes tens of seconds
        "--user", "default", "reset", "on", "nopass", "~*", "resetchannels", "-@all",
        *(f"+{name}" for name in ALLOWED_COMMANDS),
        "--loadmodule", module, "EFFECTS_THRESHOLD", "0", "IMPORT_FOLDER", f"{import_dir}/",
    ]


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy",)}
    env.update({"https_proxy": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "ALL_PROXY": DEAD_PROXY,
                "all_proxy": DEAD_PROXY, "http_proxy": DEAD_PROXY, "HTTP_PROXY": DEAD_PROXY})
    return env


@functools.cache
def network_isolation() -> tuple[str, ...]:
    """`unshare` arguments that give the server an empty network namespace, or () where the
    system forbids unprivileged namespaces (the ACL and the dead proxy still apply there)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    prefix = (unshare, "--map-root-user", "--net") if os.geteuid() != 0 else (unshare, "--net")
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return prefix if ok else ()
