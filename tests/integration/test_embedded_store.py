"""The embedded FalkorDB store for real: lifecycle, persistence, sharing, crashes and bad directories."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kskill.graph_schema import datadir, queries
from kskill.graph_schema.embedded import EmbeddedServer, EmbeddedStore
from kskill.graph_schema.errors import GraphError, StoreUnavailable
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
