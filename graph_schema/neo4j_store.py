"""GraphStore over a Neo4j server through the official driver (bolt://, neo4j://, neo4j+s://)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .errors import GraphError, StoreUnavailable
from .store import GraphStore


class Neo4jStore(GraphStore):
    """Connectivity and credentials are checked when the store opens, not at the first query."""

    engine = "neo4j"

    def __init__(self, uri: str, user: str = "neo4j", password: str = "", database: str | None = None):
        import neo4j
        from neo4j import exceptions as nx

        self.location = uri
        self._database = database
        self._tx: Any = None
        try:
            self._driver = neo4j.GraphDatabase.driver(uri, auth=(user, password))
            self._driver.verify_connectivity()
        except nx.AuthError as exc:
            raise StoreUnavailable(
                f"Neo4j at {uri} refused the credentials for user {user!r}; set NEO4J_USER and NEO4J_PASSWORD"
            ) from exc
        except (nx.ServiceUnavailable, OSError) as exc:
            raise StoreUnavailable(
                f"cannot reach Neo4j at {uri} ({_one_line(exc)}); start the server or fix KSKILL_GRAPH_URI"
            ) from exc
        except (nx.ConfigurationError, ValueError) as exc:
            raise StoreUnavailable(f"Neo4j URI {uri!r} is not usable: {exc}") from exc

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        from neo4j import exceptions as nx

        try:
            if self._tx is not None:
                return [_plain(r.data()) for r in self._tx.run(query, params or {})]
            records, _, _ = self._driver.execute_query(query, params or {}, database_=self._database)
            return [_plain(r.data()) for r in records]
        except nx.Neo4jError as exc:
            raise GraphError(f"query failed: {exc.message or exc}") from exc
        except (nx.DriverError, OSError) as exc:  # the connection went away, a session expired
            raise StoreUnavailable(f"lost the connection to Neo4j at {self.location}: {_one_line(exc)}") from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[GraphStore]:
        from neo4j import exceptions as nx

        if self._tx is not None:
            yield self
            return
        with self._driver.session(database=self._database) as session:
            tx = session.begin_transaction()
            self._tx = tx
            try:
                yield self
                tx.commit()
            except (nx.DriverError, OSError) as exc:
                with contextlib.suppress(nx.DriverError, OSError):
                    tx.rollback()
                raise StoreUnavailable(
                    f"lost the connection to Neo4j at {self.location} during a transaction (nothing of it "
                    f"was committed unless the commit itself was cut off): {_one_line(exc)}") from exc
            except BaseException:
                with contextlib.suppress(nx.DriverError, OSError):
                    tx.rollback()
                raise
            finally:
                self._tx = None

    def ensure_unique(self, label: str, prop: str) -> None:
        # Labels and property names come from the schema module, never from users.
        self.run(f"CREATE CONSTRAINT {label.lower()}_{prop}_unique IF NOT EXISTS "
                 f"FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE")

    def ensure_index(self, label: str, prop: str) -> None:
        self.run(f"CREATE INDEX {label.lower()}_{prop}_index IF NOT EXISTS FOR (n:{label}) ON (n.{prop})")

    def close(self) -> None:
        self._driver.close()


def _one_line(exc: BaseException) -> str:
    # The driver's messages span lines; errors are shown as one.
    return " ".join(str(exc).split())


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
