"""Literal values in export scripts are escaped so both Neo4j and FalkorDB read them back."""

import math

import pytest

from kskill.graph_schema.errors import SchemaError
from kskill.graph_schema.exchange import literal


@pytest.mark.parametrize("value,text", [
    (None, "null"), (True, "true"), (3, "3"), (0.5, "0.5"),
    ("it's", "'it\\'s'"), ("a\\b", "'a\\\\b'"), ("l1\nl2", "'l1\\nl2'"),
    ([1, "x"], "[1, 'x']"), ({"a": 1, "b-c": "d"}, "{a: 1, `b-c`: 'd'}"),
])
def test_literals(value, text):
    assert literal(value) == text


def test_non_finite_floats_are_refused():
    with pytest.raises(SchemaError):
        literal(math.nan)


def test_objects_are_refused():
    with pytest.raises(SchemaError):
        literal(object())
