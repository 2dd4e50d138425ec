"""Cypher of the graph's core: schema bookkeeping, skill-base writes, browsing, status and checks.

Every query is a named constant or a small builder. Values always travel as `$params`;
builders interpolate only labels and relationship types, and only names the schema knows.
The text stays inside the subset that both FalkorDB and Neo4j run.
"""

from __future__ import annotations

from .errors import SchemaError
from .model import NODE_TYPES, RELATIONSHIPS


def _label(label: str) -> str:
    if label not in NODE_TYPES:
        raise SchemaError(f"unknown node label {label!r}")
    return label


def _rel(rel: str) -> str:
    if rel not in RELATIONSHIPS:
        raise SchemaError(f"unknown relationship type {rel!r}")
    return rel


# --- writes -------------------------------------------------------------------------------

def merge_nodes(label: str) -> str:
    """Upsert nodes by id; rows are {id, props}; created_at is set once, on creation."""
    return (
        f"UNWIND $rows AS row MERGE (n:{_label(label)} {{id: row.id}}) "
        "ON CREATE SET n.created_at = $now "
        "SET n += row.props"
    )


def merge_edges(rel: str, start: str, end: str) -> str:
    """Upsert relationships between existing nodes; rows are {start, end, props}."""
    return (
        f"UNWIND $rows AS row MATCH (a:{_label(start)} {{id: row.start}}) "
        f"MATCH (b:{_label(end)} {{id: row.end}}) "
        f"MERGE (a)-[r:{_rel(rel)}]->(b) SET r += row.props"
    )


RECORD_MIGRATION = "MERGE (m:Migration {id: $id}) ON CREATE SET m.applied_at = $now"
APPLIED_MIGRATIONS = "MATCH (m:Migration) RETURN m.id AS id ORDER BY id"

SKILLBASE_STATE = "MATCH (s:SkillBase {id: 'builtin'}) RETURN s.version AS version, s.content_hash AS content_hash"
RECORD_SKILLBASE = (
    "MERGE (s:SkillBase {id: 'builtin'}) SET s.version = $version, s.content_hash = $content_hash, "
    "s.loaded_at = $now"
)

# Built-in nodes gone from a new skill-base version go, unless user knowledge hangs on them.
# $keep holds "Label:id" keys, since ids are unique per label only.
DELETE_STALE_BUILTIN_NODES = (
    "MATCH (n) WHERE n.origin = 'builtin' AND NOT ((labels(n)[0] + ':' + n.id) IN $keep) "
    "OPTIONAL MATCH (n)-[r]-() WHERE r.origin IS NULL OR r.origin <> 'builtin' "
    "WITH n, count(r) AS foreign WHERE foreign = 0 DETACH DELETE n"
)
DELETE_STALE_BUILTIN_EDGES = (
    "MATCH ()-[r]->() WHERE r.origin = 'builtin' AND NOT r.key IN $keep DELETE r"
)

DELETE_ALL = "MATCH (n) DETACH DELETE n"


# --- reads ----------------------------------------------------------------------------------

COUNT_BY_LABEL = "MATCH (n) RETURN labels(n)[0] AS label, count(n) AS count ORDER BY label"
COUNT_BY_REL = "MATCH ()-[r]->() RETURN type(r) AS type, count(r) AS count ORDER BY type"


def all_nodes(label: str) -> str:
    return f"MATCH (n:{_label(label)}) RETURN properties(n) AS props ORDER BY n.id SKIP $skip LIMIT $limit"


def all_edges(rel: str) -> str:
    return (
        f"MATCH (a)-[r:{_rel(rel)}]->(b) RETURN labels(a)[0] AS start_label, a.id AS start, "
        "labels(b)[0] AS end_label, b.id AS end, properties(r) AS props "
        "ORDER BY start, end SKIP $skip LIMIT $limit"
    )


LIST_SKILLS = (
    "MATCH (n) WHERE (n:Bottleneck OR n:Technique OR n:FailurePattern) "
    "AND ($kind IS NULL OR labels(n)[0] = $kind) AND ($status IS NULL OR n.status = $status) "
    "RETURN labels(n)[0] AS kind, n.id AS id, n.name AS name, n.status AS status, n.origin AS origin "
    "ORDER BY kind, id"
)

NODE_BY_ID = "MATCH (n {id: $id}) RETURN labels(n)[0] AS kind, properties(n) AS props"

NODE_NEIGHBOURS = (
    "MATCH (n {id: $id})-[r]-(m) WHERE NOT m:Evidence "
    "RETURN type(r) AS rel, startNode(r) = n AS outgoing, labels(m)[0] AS kind, m.id AS id, "
    "coalesce(m.name, m.text, m.id) AS name, properties(r) AS props ORDER BY rel, id"
)

NODE_EVIDENCE = (
    "MATCH (n {id: $id})-[:SUPPORTED_BY]->(e:Evidence) OPTIONAL MATCH (e)-[:FROM]->(s:Source) "
    "RETURN e.quote AS quote, e.location AS location, e.confidence AS confidence, "
    "s.id AS source_id, s.title AS source, s.uri AS uri ORDER BY source_id, location"
)

# --- integrity checks: each returns rows that describe a problem ----------------------------

CHECK_NODES_WITHOUT_ID = "MATCH (n) WHERE n.id IS NULL RETURN labels(n) AS labels, count(n) AS count"
CHECK_UNKNOWN_LABELS = (
    "MATCH (n) WHERE size(labels(n)) <> 1 OR NOT labels(n)[0] IN $labels "
    "RETURN labels(n) AS labels, n.id AS id LIMIT 100"
)
CHECK_DUPLICATE_IDS = (
    "MATCH (n) WITH labels(n)[0] AS label, n.id AS id, count(*) AS c WHERE c > 1 "
    "RETURN label, id, c AS count LIMIT 100"
)
CHECK_EDGE_ENDPOINTS = (
    "MATCH (a)-[r]->(b) WITH type(r) AS type, labels(a)[0] AS start, labels(b)[0] AS end, count(*) AS c "
    "RETURN type, start, end, c AS count"
)
CHECK_EVIDENCE_WITHOUT_SOURCE = (
    "MATCH (e:Evidence) WHERE NOT (e)-[:FROM]->(:Source) RETURN e.id AS id LIMIT 100"
)
CHECK_SKILLS_WITHOUT_EVIDENCE = (
    "MATCH (n) WHERE (n:Bottleneck OR n:Technique OR n:Variant OR n:FailurePattern) AND n.status = 'accepted' "
    "AND NOT (n)-[:SUPPORTED_BY]->(:Evidence) RETURN labels(n)[0] AS label, n.id AS id LIMIT 100"
)
CHECK_BOTTLENECKS_WITHOUT_SIGNATURE = (
    "MATCH (b:Bottleneck) WHERE NOT (b)-[:DETECTED_BY]->(:Condition) RETURN b.id AS id LIMIT 100"
)
CHECK_CONDITIONS_UNKNOWN_METRIC = (
    "MATCH (c:Condition) WHERE NOT (c)-[:MEASURED_BY]->(:Metric) RETURN c.id AS id, c.metric AS metric LIMIT 100"
)
CHECK_ATTEMPTS_WITHOUT_RUN = (
    "MATCH (a:Attempt) WHERE NOT (:Run)-[:HAS_ATTEMPT]->(a) RETURN a.id AS id LIMIT 100"
)
