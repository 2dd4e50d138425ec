"""Numbered schema migrations, each recorded in the store as a Migration node when applied.

A migration is a function of the store; it must be safe to run again (constraints and
indexes are created only when missing, so a migration cut short by a crash simply runs
again). New migrations are appended, never edited.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from . import queries
from .model import NODE_TYPES
from .store import GraphStore


def m001_unique_ids(store: GraphStore) -> None:
    """Every node kind is keyed by a unique id."""
    for label in NODE_TYPES:
        store.ensure_unique(label, "id")


def m002_lookup_indexes(store: GraphStore) -> None:
    """Indexes the Planner, the audit and ingest filter on."""
    for label, prop in [("Attempt", "run_id"), ("Attempt", "code_hash"), ("Condition", "metric"),
                        ("Source", "content_hash"), ("Technique", "status"), ("Bottleneck", "status")]:
        store.ensure_index(label, prop)


def m003_variant_ids(store: GraphStore) -> None:
    """Technique variants (added with skill base 1.1) are keyed by a unique id like every node kind."""
    store.ensure_unique("Variant", "id")


def m004_protocol_step_ids(store: GraphStore) -> None:
    """ProtocolStep nodes (the Reviewer's measurement protocol) are looked up by id: a store made before the
    label existed gets the index (new stores have the unique constraint from m001 already)."""
    store.ensure_index("ProtocolStep", "id")


MIGRATIONS: list[tuple[str, Callable[[GraphStore], None]]] = [
    ("m001", m001_unique_ids),
    ("m002", m002_lookup_indexes),
    ("m003", m003_variant_ids),
    ("m004", m004_protocol_step_ids),
]


def migrate(store: GraphStore) -> list[str]:
    """Apply the migrations the store has not recorded yet; return their ids.

    A store that keeps a write log starts folding it into a snapshot afterwards: the embedded
    store's log must not keep schema commands, which FalkorDB answers with errors when it
    replays them over a schema that already holds them (what the fold misses, the last client
    to leave folds)."""
    done = {row["id"] for row in store.run(queries.APPLIED_MIGRATIONS)}
    applied = []
    for mid, step in MIGRATIONS:
        if mid in done:
            continue
        step(store)
        store.write(queries.RECORD_MIGRATION, {"id": mid, "now": now_iso()})
        applied.append(mid)
    if applied:
        store.compact(wait=False)
    return applied


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
