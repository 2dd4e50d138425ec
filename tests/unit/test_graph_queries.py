"""Query builders send exactly the Cypher expected, and only for names the schema knows."""

import pytest

from kskill.graph_schema import queries
from kskill.graph_schema.errors import SchemaError


def test_merge_nodes_text():
    assert queries.merge_nodes("Technique") == (
        "UNWIND $rows AS row MERGE (n:Technique {id: row.id}) "
        "ON CREATE SET n.created_at = $now SET n += row.props"
    )


def test_merge_edges_text():
    assert queries.merge_edges("ADDRESSED_BY", "Bottleneck", "Technique") == (
        "UNWIND $rows AS row MATCH (a:Bottleneck {id: row.start}) "
        "MATCH (b:Technique {id: row.end}) MERGE (a)-[r:ADDRESSED_BY]->(b) SET r += row.props"
    )


def test_all_nodes_text():
    assert queries.all_nodes("Metric") == (
        "MATCH (n:Metric) RETURN properties(n) AS props ORDER BY n.id SKIP $skip LIMIT $limit"
    )


@pytest.mark.parametrize("label", ["Technique) DETACH DELETE (n", "technique", ""])
def test_unknown_labels_are_refused(label):
    with pytest.raises(SchemaError, match="unknown node label"):
        queries.merge_nodes(label)


def test_unknown_relationship_is_refused():
    with pytest.raises(SchemaError, match="unknown relationship"):
        queries.merge_edges("LIKES", "Technique", "Technique")


def test_constants_take_values_only_as_parameters():
    texts = [v for k, v in vars(queries).items() if k.isupper() and isinstance(v, str)]
    assert texts, "the module defines query constants"
    for text in texts:
        assert "{" not in text.replace("{id: $id}", "").replace("{id: 'builtin'}", ""), text
