"""Cypher of the Planner: conditions evaluated inside the query against the observation map (for
techniques and for their variants alike), the short-term memory's tabu, and the Decision subgraph
written for the audit.

`$obs` is a flat map of vocabulary name -> value. A condition over a metric missing from it
evaluates to null: it neither holds nor fails, and the audit shows it as unavailable.

The planning reads return flat rows of scalars, not maps: on a base of thousands of conditions
the client's parsing of nested replies cost more than the query itself.
"""


def _verdict(keys: str) -> str:
    """Bind `held`, the verdict of the stored Condition `c` on the observations, next to `keys`.

    The observed value is looked up once, before the CASE: a lookup repeated in each branch
    doubled the evaluation time on FalkorDB.
    """
    return (
        f"WITH {keys}, c, $obs[c.metric] AS seen "
        f"WITH {keys}, c, CASE c.op "
        "WHEN '<' THEN seen < c.value "
        "WHEN '<=' THEN seen <= c.value "
        "WHEN '>' THEN seen > c.value "
        "WHEN '>=' THEN seen >= c.value "
        "WHEN '==' THEN seen = c.value "
        "WHEN '!=' THEN seen <> c.value "
        "WHEN 'in' THEN seen IN c.values "
        "WHEN 'is_true' THEN seen = true "
        "END AS held "
    )


# Statuses filter edges as well as nodes: an ingested claim stays out until it is accepted.

# (a) one row: every bottleneck with the ids of its signature conditions, those matched (all
# conditions hold), and the ids of the conditions that hold and of those whose metric was not
# observed (the rest fail). The conditions' texts come from the Planner's cache (CONDITION_TEXTS).
BOTTLENECK_SIGNATURES = (
    "MATCH (b:Bottleneck)-[d:DETECTED_BY]->(c:Condition) "
    "WHERE b.status IN $statuses AND coalesce(d.status, 'accepted') IN $statuses "
    + _verdict("b") +
    "WITH b, collect(c.id) AS conditions, collect(CASE WHEN held THEN c.id END) AS holding, "
    "collect(CASE WHEN held IS NULL THEN c.id END) AS unobserved "
    "WITH collect([b.id, b.name, conditions]) AS bottlenecks, "
    "collect(CASE WHEN size(holding) = size(conditions) THEN b.id END) AS matched, "
    "collect(holding) AS holding, collect(unobserved) AS unobserved "
    "RETURN bottlenecks, matched, "
    "reduce(ids = [], h IN [x IN holding WHERE size(x) > 0] | ids + h) AS holding, "
    "reduce(ids = [], u IN [x IN unobserved WHERE size(x) > 0] | ids + u) AS unobserved"
)
CONDITION_TEXTS = (
    "UNWIND $ids AS cid MATCH (c:Condition {id: cid}) RETURN c.id AS id, c.metric AS metric, c.text AS text"
)

# (b) the techniques addressing the matched bottlenecks. The match starts from each bottleneck's
# id, so the work grows with its edges, not with the base.
_ADDRESSING = (
    "UNWIND $bottlenecks AS bid MATCH (b:Bottleneck {id: bid}) MATCH (b)-[a:ADDRESSED_BY]->(t:Technique) "
    "WITH b, a, t WHERE t.status IN $statuses AND coalesce(a.status, 'accepted') IN $statuses "
)
_NAMED = "UNWIND $techniques AS tid MATCH (t:Technique {id: tid}) WITH t WHERE t.status IN $statuses "

# The first guard that blocks each technique: a REQUIRES condition that does not hold or whose
# metric was not observed comes before a FORBIDDEN_WHEN condition that holds, then the lowest
# condition id. A plain MATCH, so a technique no guard blocks gives no row; each technique's guards
# are evaluated once, however many edges lead to it.
_BLOCKING = (
    "MATCH (t)-[g:REQUIRES|FORBIDDEN_WHEN]->(c:Condition) WHERE coalesce(g.status, 'accepted') IN $statuses "
    + _verdict("t, g") +
    "WITH t, c, held, type(g) = 'FORBIDDEN_WHEN' AS forbidden "
    "WHERE (forbidden AND held = true) OR (NOT forbidden AND (held IS NULL OR held = false)) "
    "WITH t, forbidden, c, held ORDER BY forbidden, c.id "
    "WITH t, head(collect([forbidden, c.metric, c.text, held])) AS first "
    "RETURN t.id AS id, first[0] AS forbidden, first[1] AS metric, first[2] AS text, first[3] AS held"
)
BLOCKING_GUARDS = _ADDRESSING + "WITH DISTINCT t " + _BLOCKING
NAMED_BLOCKING_GUARDS = _NAMED + _BLOCKING

# The variants of the chosen techniques, and (bound to `t` for _BLOCKING) the first guard that blocks
# each variant: a variant is evaluated like a technique, on the same observations.
_VARIANTS_OF = (
    "UNWIND $techniques AS tid MATCH (:Technique {id: tid})-[h:HAS_VARIANT]->(v:Variant) "
    "WHERE v.status IN $statuses AND coalesce(h.status, 'accepted') IN $statuses "
)
TECHNIQUE_VARIANTS = (
    _VARIANTS_OF + "RETURN tid AS technique, v.id AS id, v.name AS name, v.params AS params, "
    "coalesce(v.priority, 0) AS priority ORDER BY technique, id"
)
VARIANT_BLOCKING_GUARDS = _VARIANTS_OF + "WITH DISTINCT v AS t " + _BLOCKING

# The edges of the techniques no guard blocked, with the prior learned from past outcomes
# (mean gain, damped by the success rate: 1.0 on an edge never tried).
CANDIDATE_EDGES = (
    _ADDRESSING + "AND NOT t.id IN $blocked "
    "RETURN t.id AS technique, b.id AS bottleneck, a.priority AS priority, a.expected_gain AS expected_gain, "
    "toFloat(coalesce(a.mean_gain, 1.0)) * (coalesce(a.successes, 0) + 1) / (coalesce(a.trials, 0) + 2) AS prior"
)
# Of named techniques (the fallback tier's proposals), those in the skill base.
NAMED_TECHNIQUES = _NAMED + "RETURN t.id AS technique"

# (c) short-term memory: what the parent's lineage already applied, with what conflicts with it,
# and what its children tried.
LINEAGE_TECHNIQUES = (
    "MATCH (p:Attempt {id: $parent})-[:DERIVED_FROM*0..]->(anc:Attempt)-[:APPLIED]->(t:Technique) "
    "OPTIONAL MATCH (t)-[:CONFLICTS_WITH]-(other:Technique) "
    "RETURN t.id AS technique, anc.n AS n, collect(DISTINCT other.id) AS conflicts ORDER BY n, technique"
)
CHILD_OUTCOMES = (
    "MATCH (p:Attempt {id: $parent})<-[:DERIVED_FROM]-(c:Attempt)-[:APPLIED]->(t:Technique) "
    "RETURN t.id AS technique, coalesce(c.variant, '') AS variant, c.n AS n, c.status AS status, "
    "c.correct AS correct, c.speedup AS speedup, p.speedup AS parent_speedup ORDER BY n, technique"
)
# Named variants that failed the tolerance anywhere in the parent's run.
RUN_VARIANTS_OUT_OF_TOLERANCE = (
    "MATCH (r:Run)-[:HAS_ATTEMPT]->(:Attempt {id: $parent}) "
    "MATCH (r)-[:HAS_ATTEMPT]->(c:Attempt)-[:APPLIED]->(t:Technique) "
    "WHERE c.status = 'numeric' AND coalesce(c.variant, '') <> '' "
    "RETURN t.id AS technique, c.variant AS variant, min(c.n) AS n ORDER BY n, technique, variant"
)
# Techniques written without a named variant that failed the tolerance $repeats times or more in the parent's
# run (each time from another parent: the tabu keeps a parent from trying one twice) and passed it nowhere.
RUN_TECHNIQUES_OUT_OF_TOLERANCE = (
    "MATCH (r:Run)-[:HAS_ATTEMPT]->(:Attempt {id: $parent}) "
    "MATCH (r)-[:HAS_ATTEMPT]->(c:Attempt)-[:APPLIED]->(t:Technique) "
    "WHERE c.status = 'numeric' AND coalesce(c.variant, '') = '' "
    "WITH r, t, collect(c.n) AS failed WHERE size(failed) >= $repeats "
    "OPTIONAL MATCH (r)-[:HAS_ATTEMPT]->(ok:Attempt {status: 'verified'})-[:APPLIED]->(t) "
    "WITH t, failed, count(ok) AS passed WHERE passed = 0 "
    "RETURN t.id AS technique, failed ORDER BY technique"
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
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MATCH (t:Technique {id: row.technique}) "
    "MERGE (d)-[r:SELECTED]->(t) SET r.bottleneck = row.bottleneck, r.rank = row.rank, r.outcome = row.outcome"
)
# The variants a child was written with (`attempt`: its number), and those ruled out with why: a
# guard, the tabu, or the brain (it could not write the form, or wrote code an attempt already has).
WRITE_GENERATED = (
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MATCH (v:Variant {id: row.variant}) "
    "MERGE (d)-[r:GENERATED]->(v) SET r.technique = row.technique, r.attempt = row.attempt"
)
WRITE_RULED_OUT = (
    "MATCH (d:Decision {id: $decision}) UNWIND $rows AS row "
    "MATCH (v:Variant {id: row.variant}) "
    "MERGE (d)-[r:RULED_OUT]->(v) SET r.technique = row.technique, r.reason = row.reason"
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
