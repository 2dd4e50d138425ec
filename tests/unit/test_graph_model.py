"""Schema types validate what is written to the graph."""

import pytest
from pydantic import ValidationError

from kskill.graph_schema.model import AddressedBy, Condition, Metric, Technique, stable_id


def test_condition_ids_are_content_derived():
    a = Condition.of("dram_throughput_pct", ">=", 60)
    assert a.id == Condition.of("dram_throughput_pct", ">=", 60).id
    assert a.id != Condition.of("dram_throughput_pct", ">=", 70).id
    assert a.text == "dram_throughput_pct >= 60"


@pytest.mark.parametrize("metric,op,value", [
    ("x", "is_true", 3),  # is_true takes no value
    ("x", "in", 3),  # in needs a list
    ("x", ">=", None),  # comparison needs a value
    ("x", ">=", [1, 2]),
    ("x", "~", 1),  # unknown operator
])
def test_bad_conditions_are_rejected(metric, op, value):
    with pytest.raises(ValidationError):
        Condition.of(metric, op, value)


def test_ids_must_be_stable_names():
    with pytest.raises(ValidationError, match="lower-case"):
        Technique(id="Kernel Fusion", name="x", description="y")


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError):
        Metric(id="m", name="m", description="d", source="ncu", colour="red")


def test_metric_source_is_checked():
    with pytest.raises(ValidationError):
        Metric(id="m", name="m", description="d", source="guess")


def test_properties_drop_empty_values():
    t = Technique(id="kernel_fusion", name="Kernel fusion", description="d")
    assert "playbook" not in t.properties() and t.properties()["status"] == "accepted"


def test_addressed_by_bounds():
    with pytest.raises(ValidationError):
        AddressedBy(priority=101, expected_gain=1.5)
    with pytest.raises(ValidationError):
        AddressedBy(priority=50, expected_gain=0.5)


def test_stable_id_is_deterministic():
    assert stable_id("ev", "src", "quote") == stable_id("ev", "src", "quote")
    assert stable_id("ev", "src", "quote") != stable_id("ev", "src", "quote2")
