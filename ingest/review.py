"""Reviewing what ingest proposed: list proposals, accept or reject nodes and claim edges.

Accepting a node also accepts the proposed edges whose ends are then all accepted; the
Planner reads accepted nodes only (unless asked otherwise), so nothing ingested steers a run
before a person has looked at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kskill.graph_schema import ingest_queries as iq
from kskill.graph_schema.migrations import now_iso
from kskill.graph_schema.store import GraphStore

from .errors import IngestError


@dataclass(frozen=True)
class Proposals:
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]


def proposals(store: GraphStore) -> Proposals:
    return Proposals(store.run(iq.LIST_PROPOSALS), store.run(iq.LIST_PROPOSED_EDGES))


def decide_nodes(store: GraphStore, ids: list[str], accept: bool) -> dict[str, Any]:
    """Accept or reject proposed nodes; unknown or already-reviewed ids are an error naming them."""
    if not ids:
        return {"nodes": [], "status": ""}
    proposed = {r["id"] for r in store.run(iq.NODES_WITH_STATUS, {"ids": ids, "status": "proposed"})}
    missing = sorted(set(ids) - proposed)
    if missing:
        raise IngestError(f"not proposed skills: {', '.join(missing)}; `kskill skills review` lists the proposals")
    status = "accepted" if accept else "rejected"
    with store.transaction() as tx:
        tx.write(iq.SET_NODE_STATUS, {"ids": ids, "status": status, "now": now_iso()})
        if accept:
            tx.write(iq.ACCEPT_SETTLED_EDGES, {"ids": ids})
    return {"nodes": sorted(proposed), "status": status}


def decide_edge(store: GraphStore, rel: str, start: str, end: str, accept: bool) -> int:
    """Accept or reject one proposed claim edge. An edge to a condition no metric states (read from a clause such as
    "the last dimension must be divisible by 128") can be rejected but not accepted: the Planner could never evaluate
    it, so an accepted REQUIRES would block its technique on every problem."""
    unmeasured = store.run(iq.UNMEASURED_CONDITION, {"id": end}) if accept else []
    if unmeasured:
        raise IngestError(f"condition {end!r} ({unmeasured[0]['text']!r}) names no metric, so the Planner cannot "
                          "evaluate it: reject the edge, or state the condition over a metric in an engineering note")
    rows = store.write(iq.SET_EDGE_STATUS, {"rel": rel, "start": start, "end": end,
                                            "status": "accepted" if accept else "rejected"})
    count = rows[0]["edges"] if rows else 0
    if not count:
        raise IngestError(f"no proposed {rel} edge from {start!r} to {end!r}; `kskill skills review` lists them")
    return count
