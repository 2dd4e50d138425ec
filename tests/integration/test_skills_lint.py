"""`skills lint` on the built-in base (clean) and on deliberately broken graphs."""

from __future__ import annotations

from kskill.graph_schema import queries
from kskill.graph_schema.lint import lint_skills
from kskill.graph_schema.model import Condition
from kskill.graph_schema.skillbase import GraphPayload, write_payload
from kskill.graph_schema.model import Bottleneck, Evidence, Source, Technique


def test_builtin_base_is_clean(store):
    assert [f for f in lint_skills(store) if f.severity == "error"] == []


def _broken(store) -> None:
    """A small graph with one of each defect lint must find."""
    p = GraphPayload()
    src = p.add(Source(id="src:test", kind="note", title="test"))
    ev = p.add(Evidence(id="ev:test", quote="q"))
    p.link("FROM", ev, src)
    metric_rows = [{"id": "x", "props": {"name": "x", "description": "d", "source": "static", "type": "number"}},
                   {"id": "flag", "props": {"name": "flag", "description": "d", "source": "static", "type": "bool"}}]
    store.write(queries.merge_nodes("Metric"), {"rows": metric_rows, "now": "t"})
    hot = p.add(Bottleneck(id="hot", name="hot", description="d"))
    p.link("SUPPORTED_BY", hot, ev)
    impossible = p.add(Bottleneck(id="impossible", name="impossible", description="d"))
    p.link("SUPPORTED_BY", impossible, ev)
    for cond in (Condition.of("x", ">", 10), Condition.of("x", "<", 5)):
        p.link("DETECTED_BY", impossible, p.add(cond))
    p.link("DETECTED_BY", hot, p.add(Condition.of("x", ">=", 1)))
    usable = p.add(Technique(id="usable", name="usable", description="d"))
    p.link("SUPPORTED_BY", usable, ev)
    p.link("ADDRESSED_BY", hot, usable, priority=50, expected_gain=1.2)
    p.add(Technique(id="orphan", name="orphan", description="d"))  # unreachable and unsourced
    never = p.add(Technique(id="never", name="never", description="d"))
    p.link("SUPPORTED_BY", never, ev)
    p.link("ADDRESSED_BY", hot, never, priority=40, expected_gain=1.1)
    p.link("REQUIRES", never, p.add(Condition.of("x", ">=", 50)))
    p.link("FORBIDDEN_WHEN", never, p.add(Condition.of("x", ">=", 20)))
    p.link("REQUIRES", usable, p.add(Condition.of("flag", ">=", 3)))  # a number test on a bool
    p.link("REQUIRES", usable, p.add(Condition.of("ghost", ">=", 3)))  # not in the vocabulary
    write_payload(store, p, origin="test")
    rows = [{"start": c.id, "end": c.metric, "props": {}} for c in p.nodes.values()
            if isinstance(c, Condition) and c.metric != "ghost"]
    store.write(queries.merge_edges("MEASURED_BY", "Condition", "Metric"), {"rows": rows})


def test_broken_graph_findings(empty_store):
    _broken(empty_store)
    found = {(f.rule, f.subject) for f in lint_skills(empty_store) if f.severity == "error"}
    assert ("unreachable technique", "orphan") in found
    assert ("no source", "orphan") in found
    assert ("contradictory signature", "impossible") in found
    assert ("never eligible", "never") in found
    assert ("unsatisfiable condition", Condition.of("flag", ">=", 3).id) in found
    assert ("unknown metric", Condition.of("ghost", ">=", 3).id) in found
    assert ("unreachable technique", "usable") not in found
