"""What retrieval searches: one text per Technique, Bottleneck, FailurePattern and Evidence node.

A `SearchRecord` is the unit both rankers index. Records come from the graph store
(`records_from_store`) or, where no store is at hand (evaluation, unit tests), straight from
the skill-base YAML files (`records_from_skill_files`); both build the text the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kskill.graph_schema import retrieval_queries
from kskill.graph_schema.model import stable_id
from kskill.graph_schema.store import GraphStore

from .errors import QueryError

SKILL_KINDS: tuple[str, ...] = tuple(retrieval_queries.TEXT_FIELDS)
SEARCHABLE_KINDS: tuple[str, ...] = (*SKILL_KINDS, "Evidence")
NAME_CHARS = 80


@dataclass(frozen=True)
class SearchRecord:
    """One searchable node: its id, label, display name and the text the rankers see."""

    id: str
    kind: str
    name: str
    text: str
    about: tuple[str, ...] = field(default=())  # for Evidence: ids of the nodes it supports


def check_kinds(kinds: Iterable[str] | None) -> tuple[str, ...]:
    """The kinds to search; None means all. Unknown kinds are an error naming the valid ones."""
    if kinds is None:
        return SEARCHABLE_KINDS
    chosen = tuple(dict.fromkeys(kinds))
    unknown = [k for k in chosen if k not in SEARCHABLE_KINDS]
    if unknown or not chosen:
        raise QueryError(f"unknown kind {', '.join(unknown) or '(none)'}: choose from {', '.join(SEARCHABLE_KINDS)}")
    return chosen


def record_from_row(kind: str, row: Mapping[str, Any]) -> SearchRecord:
    """Build a record from node properties (a store row or a YAML entry)."""
    if kind == "Evidence":
        quote = " ".join(str(row.get("quote") or "").split())
        name = quote if len(quote) <= NAME_CHARS else quote[: NAME_CHARS - 3].rstrip() + "..."
        return SearchRecord(id=row["id"], kind=kind, name=name, text=quote,
                            about=tuple(sorted(row.get("about") or ())))
    parts = [row.get(f) for f in retrieval_queries.TEXT_FIELDS[kind]]
    if kind == "FailurePattern":
        parts.extend(_readable_pattern(p) for p in row.get("patterns") or ())
    text = "\n".join(str(p).strip() for p in parts if p)
    return SearchRecord(id=row["id"], kind=kind, name=str(row.get("name") or row["id"]), text=text)


def _readable_pattern(pattern: str) -> str:
    """A regular expression over error logs, reduced to the words it looks for."""
    return re.sub(r"\\[sSdDwWbB]|[\\^$.*+?()\[\]{}|]", " ", pattern)


def records_from_store(store: GraphStore, kinds: Iterable[str] = SEARCHABLE_KINDS) -> list[SearchRecord]:
    """Read every searchable node of the given kinds from the graph."""
    records = []
    for kind in kinds:
        for row in store.run(retrieval_queries.node_texts(kind)):
            records.append(record_from_row(kind, row))
    return records


def graph_fingerprint(store: GraphStore) -> str:
    """A cheap digest that changes when searchable nodes are added, removed or edited."""
    rows = [store.run(retrieval_queries.text_fingerprint(kind)) for kind in SEARCHABLE_KINDS]
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def records_from_skill_files(folder: Path) -> list[SearchRecord]:
    """Records straight from skill-base YAML files (bottlenecks, techniques, failures and their evidence)."""
    # ProtocolStep nodes are not searched, but their evidence is, as the store indexes every Evidence node.
    files = {"Technique": "techniques.yaml", "Bottleneck": "bottlenecks.yaml", "FailurePattern": "failures.yaml",
             "ProtocolStep": "protocol.yaml"}
    records: list[SearchRecord] = []
    evidence: dict[str, dict[str, Any]] = {}
    for kind, filename in files.items():
        path = folder / filename
        if not path.exists():
            continue
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if kind in SKILL_KINDS:
                records.append(record_from_row(kind, entry))
            # A technique's variants cite evidence of their own (the variants are not searched).
            for owner in [entry, *(entry.get("variants") or [])]:
                for ev in owner.get("evidence") or []:
                    ev_id = stable_id("ev", ev["source"], ev["quote"])
                    row = evidence.setdefault(ev_id, {"id": ev_id, "quote": ev["quote"].strip(), "about": []})
                    row["about"].append(owner["id"])
    records.extend(record_from_row("Evidence", row) for row in evidence.values())
    return records
