"""The embedded graph store: GraphStore over a FalkorDB server that kskill starts, shares and
stops itself (embedded_server.py), through the `falkordb` client.

Every call to the server goes through one path: when the connection breaks (the server was
killed or crashed) the server is started again and the call is sent once more; if that fails
too, the caller gets StoreUnavailable, one line that names the socket and the log.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .embedded_server import EmbeddedServer, Notify
from .processes import alive as _alive  # noqa: F401  (kskill.run_state asks whether a run's process lives)
from .errors import GraphError, StoreUnavailable
from .store import Compaction, GraphStore

__all__ = ["EmbeddedServer", "EmbeddedStore"]

T = TypeVar("T")
# Lost connections, whatever layer notices them first.
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError, ConnectionError, BrokenPipeError)
# A reply that takes longer means a stuck server (kskill's queries take milliseconds to seconds): the
# exchange is then treated as a lost connection, and the server is checked, restarted if it is
# stuck, and asked once more (_call).
REPLY_TIMEOUT_S = 120.0
# Schema statements change indexes, which FalkorDB records as query text and replays with a
# yield to clients: inside a MULTI block that aborts the server on its next start.
SCHEMA_STATEMENT = re.compile(r"\b(CREATE|DROP)\s+(VECTOR\s+|FULLTEXT\s+|RANGE\s+)?INDEX\b|\bdb\.idx\.", re.I)


class EmbeddedStore(GraphStore):
    """GraphStore over the embedded FalkorDB server."""

    engine = "falkordb"

    def __init__(self, data_dir: Path, graph_name: str = "kskill", notify: Notify | None = None):
        self.server = EmbeddedServer(data_dir, notify)
        self.graph_name = graph_name
        self.location = str(self.server.data_dir)
        self._pending: list[tuple[str, dict[str, Any]]] | None = None
        self.server.attach()
        try:
            self._call(self._connect)
        except BaseException:
            self.server.detach()
            raise

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._call(lambda: self._query(query, params))

    def write(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._pending is not None:
            self._pending.append((query, params or {}))
            return []
        return self.run(query, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[GraphStore]:
        """Writes are buffered, each is planned with GRAPH.EXPLAIN (a malformed statement stops the
        block before any of it runs), then all go as one MULTI/EXEC block.

        What that gives: readers never see half of the block; the append-only file records the
        block whole or not at all (a tail cut inside a block loses the whole block, see aof.py);
        the block replays safely at the next start (it is recorded as FalkorDB effects, never as
        query text: see server_config.py). What it does not give, unlike a Neo4j transaction:
        reads inside the block do not see its buffered writes, and FalkorDB cannot roll a block
        back, so a statement that fails while running (after planning succeeded) leaves the
        earlier ones of the block applied. Index changes are refused inside a block.
        """
        if self._pending is not None:
            yield self
            return
        self._pending = []
        try:
            yield self
            pending, self._pending = self._pending, None
            if pending:
                self._call(lambda: self._commit(pending))
        finally:
            self._pending = None

    # Schema changes are looked up first, so that one that exists writes nothing to the log; two
    # processes opening a new store at once can still both miss it, and the second one's
    # "already exists" then means the work is done.

    def ensure_unique(self, label: str, prop: str) -> None:
        self.ensure_index(label, prop)
        if (label, [prop]) in self._call(self._constraints):
            return
        try:
            self._call(lambda: self._db.connection.execute_command(
                "GRAPH.CONSTRAINT", "CREATE", self.graph_name, "UNIQUE", "NODE", label, "PROPERTIES", "1", prop))
        except redis.ResponseError as exc:
            if "already exists" not in str(exc):
                raise GraphError(f"cannot create the unique constraint on {label}.{prop}: {exc}") from exc

    def ensure_index(self, label: str, prop: str) -> None:
        # Labels and property names come from the schema module, never from users.
        if any(row["label"] == label and prop in row["properties"] for row in self._call(self._indexes)):
            return
        try:
            self.run(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
        except GraphError as exc:
            if "already indexed" not in str(exc):
                raise

    def compact(self, wait: bool = True) -> Compaction:
        return self._call(lambda: self.server.compact(wait))

    def drop_graph(self) -> None:
        """Delete this graph with its indexes and constraints (other graphs on the server stay)."""
        with contextlib.suppress(redis.ResponseError):  # already gone
            self._call(self._graph.delete)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.connection.close()
        self.server.detach()

    # -- internals -----------------------------------------------------------------------

    def _call(self, operation: Callable[[], T]) -> T:
        """Run one exchange with the server; after a lost connection, restart it and try once more.

        A write whose reply was lost with the server is sent again: kskill's writes are MERGEs
        keyed by id, so that changes nothing, except that one outcome counter
        (planner_queries.RECORD_OUTCOME) could count a trial twice."""
        for attempt in (1, 2):
            try:
                return operation()
            except CONNECTION_ERRORS as exc:
                if attempt == 2:
                    raise StoreUnavailable(
                        f"lost the embedded graph server at {self.server.socket_path} again right after "
                        f"restarting it ({exc}); see {self.server.log_path}"
                    ) from exc
                self.server.restart_after_crash()
                self._connect()
        raise AssertionError("unreachable")

    def _connect(self) -> None:
        from falkordb import FalkorDB

        if hasattr(self, "_db"):
            with contextlib.suppress(Exception):
                self._db.connection.close()
        self._db = FalkorDB(unix_socket_path=str(self.server.socket_path), retry=Retry(NoBackoff(), 0),
                            socket_timeout=REPLY_TIMEOUT_S)
        self._graph = self._db.select_graph(self.graph_name)

    def _query(self, query: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        try:
            result = self._graph.query(query, params or None)
        except redis.ResponseError as exc:
            raise GraphError(f"query failed: {exc}") from exc
        names = [_text(col[1]) for col in result.header]
        return [{name: _plain(value) for name, value in zip(names, row)} for row in result.result_set]

    def _indexes(self) -> list[dict[str, Any]]:
        return self._query("CALL db.indexes() YIELD label, properties RETURN label, properties", None)

    def _constraints(self) -> list[tuple[str, list[str]]]:
        rows = self._query("CALL db.constraints() YIELD label, properties RETURN label, properties", None)
        return [(row["label"], list(row["properties"])) for row in rows]

    def _commit(self, pending: list[tuple[str, dict[str, Any]]]) -> None:
        texts = [(self._graph._build_params_header(params) if params else "") + query for query, params in pending]
        for i, (query, _) in enumerate(pending):
            if SCHEMA_STATEMENT.search(query):
                raise GraphError(f"statement {i + 1} of {len(texts)} in a transaction changes an index; "
                                 "index changes run outside transactions (ensure_index)")
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
        results = pipe.execute(raise_on_error=False)
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
