"""Cypher that the retrieval layer runs: the texts of searchable nodes and a cheap fingerprint of them.

Searchable kinds are Technique, Bottleneck, FailurePattern and Evidence. Rejected proposals
are left out of search. The fingerprint is count, newest creation time and total text size
per kind, so an added, removed, rejected or edited node changes it without reading every text.
"""

from __future__ import annotations

from .errors import SchemaError

# The properties each kind's search text is built from (see kskill.retrieval.records).
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "Technique": ("name", "description", "playbook"),
    "Bottleneck": ("name", "description"),
    "FailurePattern": ("name", "description", "remedy"),
}

_NOT_REJECTED = "WHERE n.status IS NULL OR n.status <> 'rejected' "

EVIDENCE_TEXTS = (
    "MATCH (n:Evidence) OPTIONAL MATCH (x)-[:SUPPORTED_BY]->(n) "
    "WITH n, collect(x.id) AS about "
    "RETURN n.id AS id, n.quote AS quote, about ORDER BY id"
)

EVIDENCE_FINGERPRINT = (
    "MATCH (n:Evidence) OPTIONAL MATCH (x)-[r:SUPPORTED_BY]->(n) "
    "WITH n, count(r) AS links "
    "RETURN count(n) AS n, max(n.created_at) AS latest, sum(size(n.quote)) AS chars, sum(links) AS links"
)


def _kind(kind: str) -> str:
    if kind not in TEXT_FIELDS and kind != "Evidence":
        raise SchemaError(f"{kind!r} is not a searchable kind")
    return kind


def node_texts(kind: str) -> str:
    """Rows of {id, <text fields>} for every searchable node of one kind, ordered by id."""
    if _kind(kind) == "Evidence":
        return EVIDENCE_TEXTS
    fields = ", ".join(f"n.{f} AS {f}" for f in TEXT_FIELDS[kind])
    extra = ", n.patterns AS patterns" if kind == "FailurePattern" else ""
    return f"MATCH (n:{kind}) {_NOT_REJECTED}RETURN n.id AS id, {fields}{extra} ORDER BY id"


def text_fingerprint(kind: str) -> str:
    """One row {n, latest, chars, ...} that changes whenever the kind's searchable texts change."""
    if _kind(kind) == "Evidence":
        return EVIDENCE_FINGERPRINT
    size = " + ".join(f"size(coalesce(n.{f}, ''))" for f in TEXT_FIELDS[kind])
    if kind == "FailurePattern":
        size += " + size(coalesce(n.patterns, []))"
    return (
        f"MATCH (n:{kind}) {_NOT_REJECTED}"
        f"RETURN count(n) AS n, max(n.created_at) AS latest, sum({size}) AS chars"
    )
