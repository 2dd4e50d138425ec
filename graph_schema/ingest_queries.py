"""Cypher that `kskill ingest` and `kskill skills review` run.

Ingest never overwrites what it did not create: skill nodes and conditions are created only
when absent (a merge into an existing node adds evidence, nothing else), and a claim edge
that already exists only gains the new source and evidence ids. Every edge ingest touches
carries `sources` and `evidence` (id lists), so a changed file can take back exactly what it
said. Values travel as $params; builders interpolate only schema-checked labels and types.
"""

from __future__ import annotations

from .queries import _label, _rel

_SKILLS = ("Bottleneck", "Technique", "ProtocolStep")
_SKILL_MATCH = "(n:Bottleneck OR n:Technique OR n:ProtocolStep)"


def _by_ids(labels: tuple[str, ...], tail: str) -> str:
    """`tail` run on the nodes of `labels` whose id is in $ids, one UNION branch per label so each
    lookup uses that label's id index (a label-less `{id: ...}` match scans every node)."""
    return " UNION ".join(f"UNWIND $ids AS id MATCH (n:{_label(label)} {{id: id}}) {tail}" for label in labels)

SKILL_NODES = (
    f"MATCH (n) WHERE {_SKILL_MATCH} AND (n.status IS NULL OR n.status <> 'rejected') "
    "RETURN labels(n)[0] AS kind, n.id AS id, n.name AS name, n.description AS description, n.status AS status "
    "ORDER BY id"
)
METRIC_TEXTS = "MATCH (m:Metric) RETURN m.id AS id, m.name AS name, m.description AS description ORDER BY id"
METRIC_NAMES = "MATCH (m:Metric) RETURN m.id AS id, m.type AS type ORDER BY id"

SOURCE_BY_URI = ("MATCH (s:Source {uri: $uri}) "
                 "RETURN s.id AS id, s.content_hash AS content_hash, s.extractor AS extractor")
SOURCE_EVIDENCE_IDS = "MATCH (e:Evidence)-[:FROM]->(s:Source {id: $source}) RETURN e.id AS id"
# The labels ingest creates nodes of: proposed skills and new conditions.
EXISTING_IDS = _by_ids((*_SKILLS, "Condition"), "RETURN n.id AS id")


def create_nodes(label: str) -> str:
    """Create nodes that do not exist yet; an existing node (built-in, reviewed) is left as it is."""
    return (
        f"UNWIND $rows AS row MERGE (n:{_label(label)} {{id: row.id}}) "
        "ON CREATE SET n += row.props, n.created_at = $now"
    )


def create_edges(rel: str, start: str, end: str) -> str:
    """Create edges that do not exist yet (MEASURED_BY of new conditions); existing ones stay as they are."""
    return (
        f"UNWIND $rows AS row MATCH (a:{_label(start)} {{id: row.start}}) MATCH (b:{_label(end)} {{id: row.end}}) "
        f"MERGE (a)-[r:{_rel(rel)}]->(b) ON CREATE SET r += row.props"
    )


def claim_edges(rel: str, start: str, end: str) -> str:
    """Upsert claim edges: created with their properties, or, when present, given this source and evidence."""
    return (
        f"UNWIND $rows AS row MATCH (a:{_label(start)} {{id: row.start}}) MATCH (b:{_label(end)} {{id: row.end}}) "
        f"MERGE (a)-[r:{_rel(rel)}]->(b) "
        "ON CREATE SET r += row.props, r.created_at = $now "
        "SET r.sources = [x IN coalesce(r.sources, []) WHERE x <> row.source] + [row.source], "
        "r.evidence = [x IN coalesce(r.evidence, []) WHERE NOT x IN row.evidence] + row.evidence"
    )


def existing_edges(rel: str, start: str, end: str) -> str:
    return (
        f"UNWIND $rows AS row MATCH (a:{_label(start)} {{id: row.start}})-[:{_rel(rel)}]->"
        f"(b:{_label(end)} {{id: row.end}}) RETURN a.id AS start, b.id AS end"
    )


# --- taking back what a changed (or removed) file said -------------------------------------
# Inside the file's transaction: the first two before its new payload is written, the rest after.
FORGET_SOURCE_EVIDENCE = "MATCH (e:Evidence)-[:FROM]->(s:Source {id: $source}) DETACH DELETE e"
FORGET_SOURCE_ON_EDGES = (
    "MATCH ()-[r]->() WHERE $source IN coalesce(r.sources, []) "
    "SET r.sources = [x IN r.sources WHERE x <> $source], "
    "r.evidence = [x IN coalesce(r.evidence, []) WHERE NOT x IN $evidence]"
)
DELETE_UNSOURCED_EDGES = (
    "MATCH ()-[r]->() WHERE r.origin = 'ingest' AND r.sources IS NOT NULL AND size(r.sources) = 0 DELETE r"
)
# Run after the new payload: proposals that no evidence supports any more go.
DELETE_UNSUPPORTED_PROPOSALS = (
    f"MATCH (n) WHERE {_SKILL_MATCH} AND n.origin = 'ingest' AND n.status = 'proposed' "
    "AND NOT (n)-[:SUPPORTED_BY]->(:Evidence) DETACH DELETE n"
)
DELETE_UNUSED_CONDITIONS = (
    "MATCH (c:Condition) WHERE c.origin = 'ingest' AND NOT ()-[:REQUIRES|FORBIDDEN_WHEN|DETECTED_BY]->(c) "
    "DETACH DELETE c"
)


# --- review ----------------------------------------------------------------------------------
LIST_PROPOSALS = (
    f"MATCH (n) WHERE {_SKILL_MATCH} AND n.status = 'proposed' "
    "OPTIONAL MATCH (n)-[:SUPPORTED_BY]->(e:Evidence) "
    "WITH n, count(e) AS evidence, collect(e.quote)[0] AS quote "
    "RETURN labels(n)[0] AS kind, n.id AS id, n.name AS name, n.description AS description, evidence, "
    "quote, coalesce(n.nearest, []) AS nearest "
    "ORDER BY kind, id"
)
LIST_PROPOSED_EDGES = (
    "MATCH (a)-[r]->(b) WHERE r.status = 'proposed' "
    "RETURN type(r) AS rel, a.id AS start, coalesce(b.name, b.text, b.id) AS end_name, b.id AS end, "
    "r.confidence AS confidence, size(coalesce(r.evidence, [])) AS evidence ORDER BY start, rel, end"
)
NODES_WITH_STATUS = _by_ids(_SKILLS, "WHERE n.status = $status RETURN n.id AS id")
SET_NODE_STATUS = _by_ids(_SKILLS, "WHERE n.status = 'proposed' SET n.status = $status, n.reviewed_at = $now "
                                   "RETURN n.id AS id")
# An edge ingest proposed becomes accepted with its nodes: once no end of it is still proposed.
ACCEPT_SETTLED_EDGES = (
    "MATCH (a)-[r]->(b) WHERE r.status = 'proposed' AND (a.id IN $ids OR b.id IN $ids) "
    "AND coalesce(a.status, 'accepted') = 'accepted' AND coalesce(b.status, 'accepted') = 'accepted' "
    "SET r.status = 'accepted' RETURN count(r) AS edges"
)
# A condition ingest proposed from a clause no metric states: it has no metric until someone restates it over one.
UNMEASURED_CONDITION = "MATCH (c:Condition {id: $id}) WHERE c.status = 'proposed' RETURN c.text AS text"
SET_EDGE_STATUS = (
    "MATCH (a {id: $start})-[r]->(b {id: $end}) WHERE type(r) = $rel AND r.status = 'proposed' "
    "SET r.status = $status RETURN count(r) AS edges"
)
