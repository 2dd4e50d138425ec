"""Short-term memory: a run's trajectory written to the graph as it happens, and read back.

Every write validates the node with its pydantic model first and goes through the queries in
graph_schema/trajectory_queries.py. An attempt is written twice: when it is submitted (status
`pending`, with its parent, the technique it adds and the decision that chose it) and when its
review is in. A run killed in between leaves a pending attempt that `--resume` reviews again.
"""

from __future__ import annotations

import json
from typing import Any

from kskill.agents.diagnoser import Diagnosis
from kskill.agents.errors import AgentError
from kskill.graph_schema import trajectory_queries as q
from kskill.graph_schema.migrations import now_iso
from kskill.graph_schema.model import Attempt, Failure, Node, Run, stable_id
from kskill.graph_schema.store import GraphStore


def attempt_id(run_id: str, code_hash: str) -> str:
    return stable_id("att", run_id, code_hash)


def _settable(node: Node) -> dict[str, Any]:
    """The node's properties a write sets: the id is matched on and created_at is the store's."""
    return {k: v for k, v in node.properties().items() if k not in ("id", "created_at")}


class RunError(AgentError):
    """A run cannot be found, start or resume (unknown id, missing files, another process on it)."""


class Trajectory:
    """Reads and writes one store's Run and Attempt nodes."""

    def __init__(self, store: GraphStore):
        self.store = store

    # -- writes ------------------------------------------------------------------------------

    def write_run(self, run: Run) -> None:
        self.store.write(q.WRITE_RUN, {"id": run.id, "props": {**_settable(run), "origin": "run"}, "now": now_iso()})

    def write_attempt(self, attempt: Attempt, parent_id: str | None = None, technique: str | None = None,
                      decision_id: str | None = None) -> None:
        """The attempt with its run, parent, added technique and decision, in one transaction."""
        with self.store.transaction() as tx:
            tx.write(q.WRITE_ATTEMPT, {"run": attempt.run_id, "id": attempt.id,
                                       "props": {**_settable(attempt), "origin": "run"}, "now": now_iso()})
            if parent_id:
                tx.write(q.LINK_DERIVED_FROM, {"child": attempt.id, "parent": parent_id})
            if technique:
                tx.write(q.LINK_APPLIED, {"attempt": attempt.id, "techniques": [technique]})
            if decision_id:
                tx.write(q.LINK_DECIDED_BY, {"attempt": attempt.id, "decision": decision_id})

    def write_failure(self, attempt: str, diagnosis: Diagnosis) -> str:
        failure = Failure(id=stable_id("fail", attempt, diagnosis.failure_class), origin="run",
                          failure_class=diagnosis.failure_class, message=diagnosis.message[:2000] or "(no message)")
        with self.store.transaction() as tx:
            tx.write(q.WRITE_FAILURE, {"attempt": attempt, "id": failure.id, "props": _settable(failure),
                                       "now": now_iso()})
            tx.write(q.LINK_FAILURE_PATTERNS, {"failure": failure.id, "patterns": [m.id for m in diagnosis.patterns]})
        return failure.id

    # -- reads -------------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.store.run(q.RUN_BY_ID, {"id": run_id})
        return rows[0]["props"] if rows else None

    def require_run(self, run_id: str) -> dict[str, Any]:
        """The run's properties, or a RunError that says where to find the runs there are."""
        run = self.run(run_id)
        if run is None:
            raise RunError(f"no run {run_id!r} in the graph; `kskill runs list` shows the runs there")
        return run

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        """Rows of RUN_ATTEMPTS with the attempt's params JSON decoded."""
        rows = self.store.run(q.RUN_ATTEMPTS, {"run": run_id})
        for row in rows:
            row["params"] = json.loads(row["attempt"].get("params") or "{}")
        return rows

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        return self.store.run(q.LIST_RUNS, {"limit": limit})
