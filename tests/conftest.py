"""Shared fixtures: a private KSKILL_HOME per test session, and real embedded graph stores.

One embedded FalkorDB server serves the whole session; each test gets a graph of its own
(FalkorDB keeps many named graphs on one server), so tests never see each other's data.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_graph_numbers = itertools.count()


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test touches the user's real data directory or settings."""
    home = tmp_path_factory.getbasetemp() / "kskill-home"
    monkeypatch.setenv("KSKILL_HOME", str(home))
    for var in ("KSKILL_GRAPH_URI", "KSKILL_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KSKILL_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="session")
def graph_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's embedded server. The session holds a client on it throughout: otherwise the
    last store of each test to close would stop the server, and the next test would start it again
    and replay its whole append-only file."""
    from kskill.graph_schema.embedded import EmbeddedServer
    from kskill.graph_schema.store import open_store

    home = tmp_path_factory.mktemp("graph-home")
    open_store("embedded", home, graph_name="session").close()  # creates the data directory and its marker
    server = EmbeddedServer(home / "graph")
    server.attach()
    yield home
    server.detach()
    server.shutdown()


@pytest.fixture(scope="session")
def home_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The embedded server of the private KSKILL_HOME, held for the session, for tests that run
    commands in-process (each command opens and closes the store, which would stop the server)."""
    from kskill.graph_schema.embedded import EmbeddedServer
    from kskill.graph_schema.store import open_store

    home = tmp_path_factory.getbasetemp() / "kskill-home"
    open_store("embedded", home).close()
    server = EmbeddedServer(home / "graph")
    server.attach()
    yield home
    server.detach()


@pytest.fixture
def empty_store(graph_home: Path):
    """A real embedded store with the schema and nothing else, in a graph of its own."""
    from kskill.graph_schema.store import open_store

    store = open_store("embedded", graph_home, graph_name=f"test{os.getpid()}_{next(_graph_numbers)}")
    yield store
    store.drop_graph()
    store.close()


@pytest.fixture
def store(empty_store):
    """A real embedded store with the built-in skill base loaded."""
    from kskill.graph_schema.skillbase import ensure_builtin

    ensure_builtin(empty_store)
    return empty_store


def neo4j_uri() -> str | None:
    return os.environ.get("KSKILL_NEO4J_URI") or None


@pytest.fixture
def neo4j_store():
    """A Neo4j store, only where KSKILL_NEO4J_URI names a server (none can be installed in CI)."""
    uri = neo4j_uri()
    if uri is None:
        pytest.skip("KSKILL_NEO4J_URI is not set: no Neo4j server to test against")
    from kskill.graph_schema.store import open_store

    store = open_store(uri, Path("."), user=os.environ.get("NEO4J_USER", "neo4j"),
                       password=os.environ.get("NEO4J_PASSWORD", ""))
    store.write("MATCH (n) DETACH DELETE n")
    yield store
    store.write("MATCH (n) DETACH DELETE n")
    store.close()
