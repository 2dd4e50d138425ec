"""Shared fixtures: a private KSKILL_HOME per test session, and real embedded graph stores.

One embedded FalkorDB server serves the whole session; each test gets a graph of its own
(FalkorDB keeps many named graphs on one server), so tests never see each other's data.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# One thread per process: `make test` runs two test processes on two cores, each often beside the
# sandboxed workers or commands it started, on small tensors. With OpenMP's default of a thread
# per core, the processes' threads spin waiting on each other (an ingest beside three others took
# twice the CPU time). Set before torch is imported; subprocesses and review workers inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
_graph_numbers = itertools.count()
LONG_MARKS = ("slow", "reliability", "llm")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with long tests run first, those with the most tests first among them; each file keeps
    its order. `make test` hands whole files to its processes in this order (pytest-xdist's
    `--dist loadfile --no-loadscope-reorder`): a long file handed out last would leave the other
    core idle until it ends."""
    by_file: dict[Path, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)

    def rank(tests: list[pytest.Item]) -> tuple[bool, int]:
        long = any(test.get_closest_marker(mark) for test in tests for mark in LONG_MARKS)
        return not long, -len(tests)

    items[:] = [item for tests in sorted(by_file.values(), key=rank) for item in tests]


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


@pytest.fixture
def kskill_main(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """`kskill ARGS` as the shell runs it, through main() and its exit status, in this process:
    returns (status, stdout, stderr)."""
    from kskill.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["kskill", *args])
        with pytest.raises(SystemExit) as exit_info:
            main()
        out, err = capsys.readouterr()
        return exit_info.value.code, out, err

    return run


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


@pytest.fixture(scope="module")
def proposals():
    """The ingest proposal finder over the built-in base's bottlenecks, techniques and protocol steps (no
    embeddings: names and aliases only)."""
    from kskill.graph_schema.skillbase import read_builtin
    from kskill.ingest.linking import EntityLinker
    from kskill.ingest.proposals import ProposalFinder

    payload = read_builtin().payload
    nodes = [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
             for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]
    return ProposalFinder(EntityLinker(nodes, [], None))
