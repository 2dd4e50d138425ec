"""Cypher of the Planner: conditions evaluated inside the query against the observation map,
the short-term memory's tabu, and the Decision subgraph written for the audit.

`$obs` is a flat map of vocabulary name -> value. A condition over a metric missing from it
evaluates to null: it neither holds nor fails, and the audit shows it as unavailable.
"""

# One expression, used wherever a stored Condition `c` is evaluated.
_HOLDS = (
    "CASE c.op "
    "WHEN '<' THEN $obs[c.metric] < c.value "
    "WHEN '<=' THEN $obs[c.metric] <= c.value "
    "WHEN '>' THEN $obs[c.metric] > c.value "
    "WHEN '>=' THEN $obs[c.metric] >= c.value "
    "WHEN '==' THEN $obs[c.metric] = c.value "
    "WHEN '!=' THEN $obs[c.metric] <> c.value "
    "WHEN 'in' THEN $obs[c.metric] IN c.values "
    "WHEN 'is_true' THEN $obs[c.metric] = true "
    "END"
)

_CHECK = "{id: c.id, metric: c.metric, text: c.text, held: " + _HOLDS + "}"

# Statuses filter edges as well as nodes: an ingested claim stays out until it is accepted.

# (a) every bottleneck with each signature condition's verdict; matched when all hold.
BOTTLENECK_SIGNATURES = (
    "MATCH (b:Bottleneck)-[d:DETECTED_BY]->(c:Condition) "
    "WHERE b.status IN $statuses AND coalesce(d.status, 'accepted') IN $statuses "
    f"WITH b, collect({_CHECK}) AS checks "
    "RETURN b.id AS id, b.name AS name, checks, "
    "size([x IN checks WHERE x.held = true]) = size(checks) AS matched "
    "ORDER BY id"
)

# (b) the techniques addressing the matched bottlenecks, their edge, and the guards that reject
# them: REQUIRES conditions not held (or not observed) and FORBIDDEN_WHEN conditions held.
# The match starts from each bottleneck's id, so the work grows with its edges, not the base.
def _guards(keys: str) -> str:
    """A technique's first blocking guard (lowest condition id; null when none) and its conflicts.

    A REQUIRES condition blocks when it does not hold or its metric was not observed; a
    FORBIDDEN_WHEN condition blocks when it holds. Only that one check travels back: the
    Planner needs one reason per rejected technique.
    """
    first = "reduce(m = null, x IN {0} | CASE WHEN m IS NULL OR x.id < m.id THEN x ELSE m END)"
    return (
        "OPTIONAL MATCH (t)-[r:REQUIRES]->(c:Condition) WHERE coalesce(r.status, 'accepted') IN $statuses "
        f"WITH {keys}, collect({_CHECK}) AS requires "
        "OPTIONAL MATCH (t)-[f:FORBIDDEN_WHEN]->(c:Condition) WHERE coalesce(f.status, 'accepted') IN $statuses "
        f"WITH {keys}, requires, collect({_CHECK}) AS forbidden "
        "OPTIONAL MATCH (t)-[:CONFLICTS_WITH]-(other:Technique) "
        f"WITH {keys}, "
        + first.format("[x IN requires WHERE x.id IS NOT NULL AND (x.held IS NULL OR x.held = false)]")
        + " AS missing, "
        + first.format("[x IN forbidden WHERE x.id IS NOT NULL AND x.held = true]")
        + " AS forbidding, collect(DISTINCT other.id) AS conflicts "
    )


CANDIDATE_TECHNIQUES = (
    "UNWIND $bottlenecks AS bid "
    "MATCH (b:Bottleneck {id: bid}) MATCH (b)-[a:ADDRESSED_BY]->(t:Technique) "
    "WITH b, a, t WHERE t.status IN $statuses AND coalesce(a.status, 'accepted') IN $statuses "
    + _guards("b, a, t") +
    "RETURN t.id AS technique, b.id AS bottleneck, "
    "a.priority AS priority, a.expected_gain AS expected_gain, "
    "coalesce(a.trials, 0) AS trials, coalesce(a.successes, 0) AS successes, "
    "coalesce(a.mean_gain, 1.0) AS mean_gain, missing, forbidding, conflicts "
    "ORDER BY technique, bottleneck"
)

# (c) short-term memory: what the parent's lineage already applied, and what its children tried.
LINEAGE_TECHNIQUES = (
    "MATCH (p:Attempt {id: $parent})-[:DERIVED_FROM*0..]->(anc:Attempt)-[:APPLIED]->(t:Technique) "
    "RETURN DISTINCT t.id AS technique, anc.n AS n ORDER BY n, technique"
)
CHILD_OUTCOMES = (
    "MATCH (p:Attempt {id: $parent})<-[:DERIVED_FROM]-(c:Attempt)-[:APPLIED]->(t:Technique) "
    "RETURN t.id AS technique, c.n AS n, c.status AS status, c.correct AS correct, c.speedup AS speedup, "
    "p.speedup AS parent_speedup ORDER BY n, technique"
)

# The Decision subgraph (ARCHITECTURE 3.3), written in one transaction by the Planner.
WRITE_DECISION = (
    "MERGE (d:Decision {id: $id}) ON CREATE SET d.created_at = $now "
    "SET d.tier = $tier, d.case = $case, d.origin = 'run'"
)
WRITE_OBSERVATIONS = (
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MERGE (o:Observation {id: row.id}) SET o += row.props, o.origin = 'run' "
    "MERGE (d)-[:OBSERVED]->(o)"
)
WRITE_MATCHED_BOTTLENECKS = (
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MATCH (b:Bottleneck {id: row.bottleneck}) MERGE (d)-[:MATCHED]->(b)"
)
WRITE_MATCHED_CONDITIONS = (
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MATCH (c:Condition {id: row.condition}) MERGE (d)-[:MATCHED]->(c)"
)
WRITE_SELECTED = (
    "MATCH (d:Decision {id: $decision}) MATCH (t:Technique {id: $technique}) "
    "MERGE (d)-[r:SELECTED]->(t) SET r.bottleneck = $bottleneck, r.rank = 1"
)
WRITE_REJECTED = (
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MATCH (t:Technique {id: row.technique}) MERGE (d)-[r:REJECTED]->(t) SET r.reason = row.reason"
)

# Outcomes feed back into the skill base: observed counts and mean gain on the edge.
RECORD_OUTCOME = (
    "MATCH (b:Bottleneck {id: $bottleneck})-[a:ADDRESSED_BY]->(t:Technique {id: $technique}) "
    "WITH a, coalesce(a.trials, 0) AS n, coalesce(a.successes, 0) AS s, coalesce(a.mean_gain, 1.0) AS m "
    "SET a.trials = n + 1, a.successes = s + CASE WHEN $gain >= $min_gain THEN 1 ELSE 0 END, "
    "a.mean_gain = (m * n + $gain) / (n + 1)"
)

# Guards of named techniques, for the fallback tier (no bottleneck matched).
TECHNIQUE_GUARDS = (
    "UNWIND $techniques AS tid MATCH (t:Technique {id: tid}) WITH t WHERE t.status IN $statuses "
    + _guards("t") +
    "RETURN t.id AS technique, missing, forbidding, conflicts ORDER BY technique"
)
