"""The GraphStore port: the one interface every part of kskill uses to reach the graph.

Two adapters implement it and run the same Cypher text: the embedded FalkorDB server that
kskill starts itself (embedded.py) and Neo4j through the official driver (neo4j_store.py).
Where the engines differ (constraint and index DDL) the adapter owns the difference.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

NEO4J_SCHEMES = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")


@dataclass(frozen=True)
class Compaction:
    """What folding a store's write log into a snapshot changed on disk."""

    before_bytes: int
    after_bytes: int
    seconds: float


class GraphStore(ABC):
    """Run parameterised Cypher; rows come back as plain dicts of plain values."""

    engine: str = ""
    location: str = ""

    @abstractmethod
    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a query and return its rows."""

    def write(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a query that changes the graph."""
        return self.run(query, params)

    @abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[GraphStore]:
        """A unit of work: all writes inside it land together or not at all."""

    @abstractmethod
    def ensure_unique(self, label: str, prop: str) -> None:
        """Create a uniqueness constraint (and its index) unless it exists."""

    @abstractmethod
    def ensure_index(self, label: str, prop: str) -> None:
        """Create a property index unless it exists."""

    def compact(self, wait: bool = True) -> Compaction | None:
        """Fold the store's write log into a snapshot (without `wait`: start doing so); None where
        the store manages its own files."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release connections (and, for the embedded store, the server when no one else uses it)."""

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(uri: str, home: Path, *, user: str = "neo4j", password: str = "",
               graph_name: str = "kskill", notify: Callable[[str], None] | None = None) -> GraphStore:
    """Open the store a URI names: `embedded` (the default) or a Neo4j URI.

    Schema migrations are applied on open, so callers always see the current schema.
    `notify` receives what the embedded store has to tell on its way (progress of a long load,
    a damaged log tail that was cut); by default that goes to stderr.
    """
    from .migrations import migrate

    store: GraphStore
    if uri in ("", "embedded"):
        from .embedded import EmbeddedStore

        store = EmbeddedStore(home / "graph", graph_name=graph_name, notify=notify)
    elif uri.startswith(NEO4J_SCHEMES):
        from .neo4j_store import Neo4jStore

        store = Neo4jStore(uri, user=user, password=password)
    else:
        raise ConfigError(
            f"graph URI {uri!r} is not understood: use 'embedded' or a bolt://, neo4j:// or neo4j+s:// URI"
        )
    try:
        migrate(store)
    except BaseException:
        store.close()
        raise
    return store
