"""Sentence-level signals of the precision model: the linked name's role in its clause, names met in passing,
configuration fields, lead lines, kind against sentence, and closeness by meaning; and the judged runs they
are trained on."""

from __future__ import annotations

import numpy as np

from kskill.eval.ingest_judged import judged_index, load_judged, verdict_for
from kskill.ingest.statement import in_brackets, in_code, in_list, role_of, similarity_pair, statement_signals


def _span(text: str, name: str) -> tuple[int, int]:
    at = text.index(name)
    return at, at + len(name)


def test_the_name_before_its_clause_verb_is_the_subject():
    text = "Register pressure lowers occupancy when the kernel keeps many live values."
    assert role_of(text, _span(text, "Register pressure")) == "subject"


def test_the_name_right_after_a_verb_is_the_object():
    text = "Developers can use launch bounds to cap the registers of each thread."
    assert role_of(text, _span(text, "launch bounds")) == "object"


def test_a_name_inside_a_prepositional_phrase_is_neither():
    text = "The results of this post depend on the choice of loop unrolling factors and the compiler version."
    assert role_of(text, _span(text, "loop unrolling")) == "other"
    lead = "In software pipelining, the loads of the next tile are issued early."
    assert role_of(lead, _span(lead, "software pipelining")) == "other"


def test_names_met_in_passing():
    listed = "The compiler runs several passes: inlining, loop unrolling, coalescing and dead code elimination."
    assert in_list(listed, _span(listed, "loop unrolling"))
    example = "Fused kernels such as FlashAttention keep intermediates on chip."
    assert in_list(example, _span(example, "FlashAttention"))
    plain = "Loop unrolling removes the loop's exit checks from the hot path."
    assert not in_list(plain, _span(plain, "Loop unrolling"))
    aside = "The kernel is fast (it uses vectorized loads) on every GPU we tried."
    assert in_brackets(aside, aside.index("vectorized"))
    assert not in_brackets(plain, 0)
    code = "Set the flag enable_pdl=True before the launch."
    assert in_code(code, _span(code, "pdl"))


def test_fields_lead_lines_and_kind_against_sentence():
    field = statement_signals("num_stages: 3 (default: 2)", (0, 10), "Technique")
    assert field["config_field"] == 1.0
    lead = statement_signals("Register pressure can be reduced with the following techniques:", (0, 17), "Bottleneck")
    assert lead["lead_line"] == 1.0 and lead["role_subject"] == 1.0
    told = statement_signals("Use shared memory tiling to cut the DRAM traffic of the memory-bound loop.", (31, 41),
                             "Bottleneck")
    assert told["bottleneck_instruction"] == 1.0
    untimed = statement_signals("Interleaving the weights of two experts halves the number of loads.", (0, 12),
                                "ProtocolStep")
    timed = statement_signals("Interleave the candidate's and the reference's timed runs so drift hits both.", (0, 10),
                              "ProtocolStep")
    assert untimed["protocol_untimed"] == 1.0 and timed["protocol_untimed"] == 0.0
    heading = statement_signals("This is what the section above is about.", None, "Technique")
    assert heading["heading_only"] == 1.0 and heading["role_subject"] == 0.0


def test_similarity_is_against_the_node_and_the_best_other_node_of_its_kind():
    nodes = {"a": np.array([1.0, 0.0]), "b": np.array([0.6, 0.8]), "c": np.array([0.0, 1.0])}
    kind_of = {"a": "Technique", "b": "Technique", "c": "Bottleneck"}
    sim, margin = similarity_pair(np.array([0.8, 0.6]), "a", nodes, kind_of)
    assert sim == 0.8 and margin == round(0.8 - 0.96, 4)  # "b" is nearer; "c" is of another kind
    assert similarity_pair(None, "a", nodes, kind_of) == (0.0, 0.0)
    assert similarity_pair(np.array([0.8, 0.6]), "new:x", nodes, kind_of) == (0.0, 0.0)


def test_every_committed_judgement_is_read_and_matched_by_item_and_sentence():
    judged = load_judged()
    assert len(judged) >= 82 and {True, False} == {j.right for j in judged}
    index = judged_index(judged)
    item = next(j for j in judged if j.item == "evidence for fast_math_intrinsics" and not j.right)
    row = {"subject": "fast_math_intrinsics", "relation": "SUPPORTS", "object": "", "kind": "definition",
           "quote": item.quote}
    assert verdict_for(item.document, row, index) is False
    assert verdict_for("another-document.md", row, index) is None


def test_the_shipped_precision_model_reads_its_signals_and_no_held_out_document():
    import json

    from kskill.eval.ingest_eval import CORPUS_LABELS, TUNE_HALVES
    from kskill.eval.ingest_scoring import load_corpus_labels
    from kskill.ingest.precision import PRECISION_FEATURES, PRECISION_WEIGHTS, PrecisionModel

    model = PrecisionModel.load()
    assert model.model.features == PRECISION_FEATURES and 0.0 < model.model.threshold < 1.0
    trained_on = set(json.loads(PRECISION_WEIGHTS.read_text())["trained_on"])
    held_out = {lab.name for lab in load_corpus_labels(CORPUS_LABELS).values() if lab.half not in TUNE_HALVES}
    assert held_out and not trained_on & held_out


def test_the_precision_model_forms_its_interactions_and_keeps_by_threshold():
    from kskill.ingest.precision import PRECISION_FEATURES, PrecisionModel, with_interactions
    from kskill.ingest.scorer import ClaimScorer

    assert with_interactions({"edge": 1.0, "heading_only": 1.0})["edge_unnamed"] == 1.0
    assert with_interactions({"support": 1.0, "in_list": 1.0})["support_in_passing"] == 1.0
    assert with_interactions({"support": 1.0})["support_in_passing"] == 0.0
    # One weight, against a remedy whose technique the sentence does not name.
    weights = tuple(-3.0 if name == "edge_unnamed" else 0.0 for name in PRECISION_FEATURES)
    n = len(PRECISION_FEATURES)
    model = PrecisionModel(ClaimScorer(weights, 1.0, (0.0,) * n, (1.0,) * n, 0.5, PRECISION_FEATURES))
    assert model.states({"edge": 1.0, "heading_only": 0.0})
    assert not model.states({"edge": 1.0, "heading_only": 1.0})


def test_no_judged_sentence_the_precision_model_trains_on_comes_from_the_held_out_half():
    from kskill.eval.ingest_eval import CORPUS_LABELS, TUNE_HALVES
    from kskill.eval.ingest_scoring import load_corpus_labels

    labels = load_corpus_labels(CORPUS_LABELS)
    held_out = {name for name, lab in labels.items() if lab.half not in TUNE_HALVES}
    judged = {j.document for j in load_judged()}
    assert judged and not judged & held_out
