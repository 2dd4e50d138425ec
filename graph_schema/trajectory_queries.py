"""Cypher of the short-term memory (ARCHITECTURE 3.3): runs, attempts, failures, and the reads
that resume a run, list runs, and explain a run attempt by attempt (`kskill audit`).

Attempts are keyed by their run and code hash, so every write is an idempotent MERGE and a
resumed run finds what the interrupted one wrote. Decisions are written by the Planner
(planner_queries); here they are only linked to the attempt they produced and read back.
"""

# --- writes ---------------------------------------------------------------------------------

WRITE_RUN = (
    "MERGE (r:Run {id: $id}) ON CREATE SET r.created_at = $now "
    "SET r += $props"
)

# One attempt, created (or updated) with its run link, parent link and the technique it added.
WRITE_ATTEMPT = (
    "MATCH (r:Run {id: $run}) "
    "MERGE (a:Attempt {id: $id}) ON CREATE SET a.created_at = $now "
    "SET a += $props "
    "MERGE (r)-[:HAS_ATTEMPT]->(a)"
)
LINK_DERIVED_FROM = (
    "MATCH (c:Attempt {id: $child}) MATCH (p:Attempt {id: $parent}) MERGE (c)-[:DERIVED_FROM]->(p)"
)
LINK_APPLIED = (
    "MATCH (a:Attempt {id: $attempt}) UNWIND $techniques AS tid "
    "MATCH (t:Technique {id: tid}) MERGE (a)-[:APPLIED]->(t)"
)
LINK_DECIDED_BY = (
    "MATCH (a:Attempt {id: $attempt}) MATCH (d:Decision {id: $decision}) MERGE (a)-[:DECIDED_BY]->(d)"
)
WRITE_FAILURE = (
    "MATCH (a:Attempt {id: $attempt}) "
    "MERGE (f:Failure {id: $id}) ON CREATE SET f.created_at = $now "
    "SET f += $props "
    "MERGE (a)-[:FAILED_WITH]->(f)"
)
LINK_FAILURE_PATTERNS = (
    "MATCH (f:Failure {id: $failure}) UNWIND $patterns AS pid "
    "MATCH (p:FailurePattern {id: pid}) MERGE (f)-[:MATCHES]->(p)"
)

# --- reads ----------------------------------------------------------------------------------

RUN_BY_ID = "MATCH (r:Run {id: $id}) RETURN properties(r) AS props"

# A run's best speedup is its end-of-run re-timing's when it had one: only re-timed candidates compete then.
LIST_RUNS = (
    "MATCH (r:Run) OPTIONAL MATCH (r)-[:HAS_ATTEMPT]->(a:Attempt) "
    "WITH r, count(a) AS attempts, "
    "max(CASE WHEN a.correct = true AND a.kind <> 'reference' THEN a.speedup END) AS reviewed, "
    "max(CASE WHEN a.kind <> 'reference' THEN a.confirmed_speedup END) AS confirmed "
    "RETURN r.id AS id, r.problem AS problem, r.status AS status, r.started_at AS started_at, "
    "r.finished_at AS finished_at, attempts, coalesce(confirmed, reviewed) AS best_speedup "
    "ORDER BY started_at DESC, id LIMIT $limit"
)

# Every attempt of a run with its parent, the technique it added, its decision and its failure.
RUN_ATTEMPTS = (
    "MATCH (r:Run {id: $run})-[:HAS_ATTEMPT]->(a:Attempt) "
    "OPTIONAL MATCH (a)-[:DERIVED_FROM]->(p:Attempt) "
    "OPTIONAL MATCH (a)-[:APPLIED]->(t:Technique) "
    "OPTIONAL MATCH (a)-[:DECIDED_BY]->(d:Decision) "
    "OPTIONAL MATCH (d)-[s:SELECTED]->(st:Technique) "
    "OPTIONAL MATCH (a)-[:FAILED_WITH]->(f:Failure) "
    "OPTIONAL MATCH (f)-[:MATCHES]->(fp:FailurePattern) "
    "RETURN a.n AS n, properties(a) AS attempt, p.n AS parent, collect(DISTINCT t.id) AS applied, "
    "d.id AS decision, d.tier AS tier, d.case AS case, st.id AS selected, s.bottleneck AS bottleneck, "
    "f.failure_class AS failure_class, f.message AS failure_message, collect(DISTINCT fp.id) AS patterns "
    "ORDER BY n"
)

# The Diagnoser's table: every failure pattern with its regular expressions and remedies.
FAILURE_PATTERNS = (
    "MATCH (p:FailurePattern) WHERE p.status IN $statuses "
    "OPTIONAL MATCH (p)-[:REMEDIED_BY]->(t:Technique) "
    "RETURN p.id AS id, p.name AS name, p.failure_class AS failure_class, p.patterns AS patterns, "
    "p.remedy AS remedy, collect(t.id) AS remedied_by ORDER BY id"
)

# --- audit: one attempt's decision, read back from the graph ----------------------------------

DECISION_OBSERVATIONS = (
    "MATCH (d:Decision {id: $decision})-[:OBSERVED]->(o:Observation) "
    "RETURN o.metric AS metric, o.value AS value, o.available AS available ORDER BY metric"
)
DECISION_MATCHED = (
    "MATCH (d:Decision {id: $decision})-[:MATCHED]->(b:Bottleneck) "
    "OPTIONAL MATCH (b)-[:DETECTED_BY]->(c:Condition) "
    "OPTIONAL MATCH (d)-[m:MATCHED]->(c) "
    "WITH b, c, m IS NOT NULL AS held "
    "RETURN b.id AS bottleneck, b.name AS name, "
    "collect({id: c.id, metric: c.metric, text: c.text, held: held}) AS conditions ORDER BY bottleneck"
)
DECISION_SELECTED = (
    "MATCH (d:Decision {id: $decision})-[s:SELECTED]->(t:Technique) "
    "RETURN t.id AS technique, t.name AS name, s.bottleneck AS bottleneck"
)
DECISION_REJECTED = (
    "MATCH (d:Decision {id: $decision})-[r:REJECTED]->(t:Technique) "
    "RETURN t.id AS technique, t.name AS name, r.reason AS reason ORDER BY technique"
)
# Which matched bottleneck addresses which technique: the edges the audit page draws between them.
DECISION_ADDRESSED = (
    "MATCH (d:Decision {id: $decision})-[:MATCHED]->(b:Bottleneck)-[:ADDRESSED_BY]->(t:Technique) "
    "RETURN b.id AS bottleneck, t.id AS technique ORDER BY bottleneck, technique"
)

# The two queries below are printed by `kskill audit` for Neo4j Browser, which draws the nodes and
# paths they return; kskill itself reads the same subgraph through the queries above.
# For Neo4j Browser (`:param attempt => '<id>'` first): the attempt, its lineage step, its decision
# with everything the decision touched, and its failure with the pattern it matched.
AUDIT_ATTEMPT_SUBGRAPH = (
    "MATCH (a:Attempt {id: $attempt}) "
    "OPTIONAL MATCH lineage = (a)-[:DERIVED_FROM]->(:Attempt) "
    "OPTIONAL MATCH decision = (a)-[:DECIDED_BY]->(:Decision)-[:MATCHED|SELECTED|REJECTED]->() "
    "OPTIONAL MATCH failure = (a)-[:FAILED_WITH]->(:Failure)-[:MATCHES]->(:FailurePattern) "
    "RETURN a, lineage, decision, failure"
)
# The whole trajectory of a run (`:param run => '<id>'` first).
AUDIT_RUN_SUBGRAPH = (
    "MATCH trajectory = (:Run {id: $run})-[:HAS_ATTEMPT]->(a:Attempt) "
    "OPTIONAL MATCH lineage = (a)-[:DERIVED_FROM]->(:Attempt) "
    "OPTIONAL MATCH chosen = (a)-[:DECIDED_BY]->(:Decision)-[:SELECTED]->(:Technique) "
    "RETURN trajectory, lineage, chosen"
)
