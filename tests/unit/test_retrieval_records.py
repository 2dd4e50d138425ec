"""Search records: built from the skill-base YAML exactly as from the store, and the Cypher behind them."""

from pathlib import Path

import pytest

from kskill.graph_schema import retrieval_queries
from kskill.graph_schema.errors import SchemaError
from kskill.graph_schema.skillbase import read_builtin
from kskill.retrieval.errors import QueryError
from kskill.retrieval.records import (
    SEARCHABLE_KINDS, check_kinds, record_from_row, records_from_skill_files,
)

SKILLS = Path(__file__).resolve().parents[2] / "graph_schema" / "skills"


def test_yaml_records_cover_the_nodes_the_skill_base_loads():
    payload = read_builtin().payload
    expected = {node.id for node in payload.nodes.values() if node.label in SEARCHABLE_KINDS}
    records = records_from_skill_files(SKILLS)
    assert {r.id for r in records} == expected
    supported = {(e.start, e.end) for e in payload.edges if e.rel == "SUPPORTED_BY"}
    for r in records:
        if r.kind == "Evidence":
            assert r.about and all((owner, r.id) in supported for owner in r.about)


def test_technique_text_holds_name_description_and_playbook():
    record = record_from_row("Technique", {"id": "t", "name": "Tiling", "description": "Stage tiles.",
                                           "playbook": "1. Pick BLOCK sizes."})
    assert record.text == "Tiling\nStage tiles.\n1. Pick BLOCK sizes."


def test_failure_text_holds_remedy_and_pattern_words():
    record = record_from_row("FailurePattern", {"id": "f", "name": "OOM", "description": "d", "remedy": "r",
                                                "patterns": [r"out of resources: shared\s+memory.*"]})
    assert "out of resources: shared" in record.text and "memory" in record.text
    assert "\\s" not in record.text and ".*" not in record.text


def test_evidence_name_is_a_short_form_of_the_quote():
    record = record_from_row("Evidence", {"id": "e", "quote": "word " * 40, "about": ["b", "a"]})
    assert len(record.name) <= 80 and record.name.endswith("...")
    assert record.about == ("a", "b")


def test_check_kinds():
    assert check_kinds(None) == SEARCHABLE_KINDS
    assert check_kinds(["FailurePattern", "FailurePattern"]) == ("FailurePattern",)
    with pytest.raises(QueryError, match="unknown kind Metric"):
        check_kinds(["Metric"])
    with pytest.raises(QueryError):
        check_kinds([])


def test_cypher_reads_texts_by_label_and_leaves_rejected_out():
    query = retrieval_queries.node_texts("Technique")
    assert query.startswith("MATCH (n:Technique)")
    assert "n.playbook AS playbook" in query and "'rejected'" in query
    assert "n.patterns AS patterns" in retrieval_queries.node_texts("FailurePattern")
    assert "SUPPORTED_BY" in retrieval_queries.node_texts("Evidence")
    assert "size(coalesce(n.patterns, []))" in retrieval_queries.text_fingerprint("FailurePattern")
    with pytest.raises(SchemaError):
        retrieval_queries.node_texts("Run")
