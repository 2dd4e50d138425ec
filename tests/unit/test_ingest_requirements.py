"""Preconditions no metric states (learned-8, ingest/requirements.py): a requirement clause about one technique becomes a
REQUIRES or FORBIDDEN_WHEN edge to a proposed Condition named by the clause."""

from __future__ import annotations

from kskill.graph_schema.model import Condition
from kskill.ingest.claims import EntityRef, Span, condition_text
from kskill.ingest.lexicon import Mention
from kskill.ingest.linking import PassageLinks
from kskill.ingest.relations import SentenceView
from kskill.ingest.requirements import gate_claims, requirement_claims

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


# learned-22: gates stated as a hindrance of a technique (requirements.gate_claims)

FUSION = Mention("kernel_fusion", "Technique", 0, 0, True)


def _gates(text: str, technique: str = "", node: str = "kernel_fusion", proposed=()) -> list[tuple[str, str, str]]:
    named = []
    if technique:
        at = text.index(technique)
        named = [Mention(node, "Technique", at, at + len(technique), True)]
    return [(c.subject.key, c.relation, c.object.text) for c in gate_claims(_view(text, named), proposed, "rules")]


def test_what_does_not_work_inside_a_technique_is_a_condition_it_is_forbidden_when():
    assert _gates("Debug printf calls do not work inside of graph replays, so turn them off first.",
                  "graph replays", "cuda_graph") == [("cuda_graph", "FORBIDDEN_WHEN", "Debug printf calls")]


def test_the_subject_after_is_that_and_without_its_bracketed_aside():
    assert _gates("The catch is that blocking host callbacks (and anything calling them) cannot be used during graph "
                  "capture.", "graph capture", "cuda_graph") == [
        ("cuda_graph", "FORBIDDEN_WHEN", "blocking host callbacks")]


def test_what_reduces_a_techniques_potential_is_a_condition_for_a_proposed_technique_too():
    assert _gates("Long chains of reductions may reduce fusion potential.", "fusion") == [
        ("kernel_fusion", "FORBIDDEN_WHEN", "Long chains of reductions")]
    assert _gates("Ragged batches often limit blockwise scaling.", proposed=(BLOCKWISE,)) == [
        ("new:blockwise scaling", "FORBIDDEN_WHEN", "Ragged batches")]


def test_behind_a_pronoun_the_thing_an_opening_avoid_advises_against_is_the_condition():
    assert _gates("Avoid allocating buffers of prime lengths, as these need tail handling and may limit vectorization.",
                  "vectorization", "vectorized_access") == [
        ("vectorized_access", "FORBIDDEN_WHEN", "allocating buffers of prime lengths")]


def test_no_gate_for_a_purpose_a_cost_a_pronoun_or_a_technique_as_subject():
    assert _gates("Set the flag NO_UNROLL_HINT to prevent unrolling.", "unrolling", "loop_unrolling") == []  # a purpose
    assert _gates("Kernel fusion reduces launch overhead.", "Kernel fusion") == []  # not the whole object
    assert _gates("They can be used in a few places and they reduce fusion potential.", "fusion") == []  # a pronoun
    assert _gates("Blockwise scaling limits fusion.", "fusion", proposed=(BLOCKWISE,)) == []  # two techniques
