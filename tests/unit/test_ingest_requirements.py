"""Preconditions no metric states (learned-8, ingest/requirements.py): a requirement clause about one technique becomes a
REQUIRES or FORBIDDEN_WHEN edge to a proposed Condition named by the clause."""

from __future__ import annotations

from kskill.graph_schema.model import Condition
from kskill.ingest.claims import EntityRef, Span, condition_text
from kskill.ingest.lexicon import Mention
from kskill.ingest.linking import PassageLinks
from kskill.ingest.relations import SentenceView
from kskill.ingest.requirements import requirement_claims

BLOCKWISE = EntityRef("Technique", name="Blockwise scaling")


def _view(text: str, named=()) -> SentenceView:
    return SentenceView(text, Span(text, "section Requirements, offset 0"), list(named), [], [], PassageLinks(), "Requirements")


def _read(text: str, named=(), proposed=(BLOCKWISE,)) -> list[tuple[str, str, str]]:
    return [(c.subject.key, c.relation, c.object.text) for c in requirement_claims(_view(text, named), proposed, "rules")]


def test_a_must_clause_about_a_proposed_technique_is_a_proposed_condition_it_requires():
    found = _read("With blockwise scaling, the last dimension must be divisible by 128.")
    assert found == [("new:blockwise scaling", "REQUIRES", "last dimension must be divisible by 128")]


def test_what_follows_requires_after_the_technique_names_the_condition():
    assert _read("Blockwise scaling requires Hopper or newer GPUs.") == [
        ("new:blockwise scaling", "REQUIRES", "Hopper or newer GPUs")]


def test_a_clause_too_small_to_benefit_is_a_condition_the_technique_is_forbidden_when():
    assert _read("It is applied to every layer except the gates (the gates are too small to benefit from blockwise "
                 "scaling).") == [("new:blockwise scaling", "FORBIDDEN_WHEN", "gates are too small")]


def test_a_sentence_naming_a_technique_of_the_graph_is_left_to_the_claim_rules():
    split_k = Mention("split_k", "Technique", 0, 7, True)
    assert _read("Split-K pays off only when the K dimension is much larger than M and N.", named=[split_k],
                 proposed=()) == []
    assert _read("Split-K with blockwise scaling must use 128 blocks.", named=[split_k]) == []


def test_no_claim_without_one_technique_a_requirement_form_or_a_clause_of_a_few_words():
    assert _read("The last dimension must be divisible by 128.") == []  # no technique
    assert _read("Blockwise scaling divides each tensor into blocks of 128 values.") == []  # no requirement form
    assert _read("Blockwise scaling: must.") == []  # no clause
    assert _read("Blockwise scaling is only useful when the kernel is memory-bound.") == []  # a metric condition


def test_a_proposed_condition_is_written_by_its_clause_and_has_no_metric():
    cond = Condition.proposed("last dimension must be divisible by 128")
    assert (cond.status, cond.metric, condition_text(cond)) == (
        "proposed", "", "proposed: last dimension must be divisible by 128")
    assert cond.id == Condition.proposed("Last dimension must be divisible by 128").id


def test_a_proposed_condition_is_planned_as_a_proposed_node_with_its_edge():
    from kskill.ingest.claims import Claim
    from kskill.ingest.resolve import Resolution
    from kskill.ingest.writer import plan_file, source_for

    technique = EntityRef("Technique", id="blockwise_scaling", name="Blockwise scaling")
    cond = Condition.proposed("last dimension must be divisible by 128")
    claim = Claim(technique, "REQUIRES", cond, 0.6, Span("...", "section Requirements, offset 0"), "rules",
                  kind="precondition")
    plan = plan_file(source_for("doc.md", "Doc", "documentation", "h"), [(claim, Resolution(technique, merged=False), None)])
    assert plan.new_nodes[cond.id].status == "proposed"
    assert ("REQUIRES", "blockwise_scaling", cond.id) in plan.edges
