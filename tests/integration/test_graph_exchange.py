"""Export writes a Cypher script that loads back into a store with nothing lost."""

import io
from pathlib import Path

import pytest

from kskill.graph_schema import queries
from kskill.graph_schema.errors import GraphError
from kskill.graph_schema.exchange import export_graph, import_graph
from kskill.graph_schema.model import NODE_TYPES, RELATIONSHIPS


def _snapshot(store):
    nodes = {}
    for label in NODE_TYPES:
        for row in store.run(queries.all_nodes(label), {"skip": 0, "limit": 1_000_000}):
            nodes[(label, row["props"]["id"])] = row["props"]
    edges = {}
    for rel in RELATIONSHIPS:
        for row in store.run(queries.all_edges(rel), {"skip": 0, "limit": 1_000_000}):
            edges[(rel, row["start"], row["end"])] = row["props"]
    return nodes, edges


def test_round_trip_loses_nothing(store, tmp_path: Path):
    tricky = "quote ' double \" backslash \\ newline \n tab \t unicode µs ≥ braces {x} MATCH (n) DETACH DELETE n;"
    store.write(queries.merge_nodes("Technique"),
                {"rows": [{"id": "tricky", "props": {"name": tricky, "description": "d", "tags": ["a", "b"],
                                                     "gain": 1.25, "flag": True}}], "now": "t"})
    before = _snapshot(store)
    script = tmp_path / "graph.cypher"
    with script.open("w") as out:
        counts = export_graph(store, out)
    assert counts["Technique"] >= 30
    store.write(queries.DELETE_ALL)
    assert _snapshot(store) == ({}, {})
    import_graph(store, script)
    assert _snapshot(store) == before
    import_graph(store, script)
    assert _snapshot(store) == before, "importing twice changes nothing"


def test_import_rejects_a_broken_script_whole(empty_store, tmp_path: Path):
    script = tmp_path / "bad.cypher"
    script.write_text("UNWIND [{id: 'a'}] AS row MERGE (n:Technique {id: row.id}) SET n += row;\n"
                      "UNWIND [{id: 'b'}] AS row MERGE (n:Technique {id: row.id} SET n += row;\n")
    with pytest.raises(GraphError, match="bad.cypher"):
        import_graph(empty_store, script)
    assert empty_store.run("MATCH (n:Technique) RETURN n.id AS id") == []


def test_import_wants_one_statement_per_line(empty_store, tmp_path: Path):
    script = tmp_path / "multi.cypher"
    script.write_text("MATCH (n)\nRETURN n;\n")
    with pytest.raises(GraphError, match="multi.cypher:1"):
        import_graph(empty_store, script)
