"""The learned claim scorer: weights shipped as data, calibrated confidences, the signals it reads, and a
deterministic fit that never trains on a held-out document."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kskill.eval.ingest_eval import CORPUS_LABELS, TUNE_HALVES
from kskill.eval.ingest_scoring import load_corpus_labels
from kskill.eval.ingest_train import fit, predict
from kskill.ingest.scorer import FEATURES, WEIGHTS, ClaimScorer, DocumentTopics, as_vector, text_signals


def test_the_shipped_weights_read_the_current_signals_and_no_held_out_document():
    scorer = ClaimScorer.load()
    assert scorer.features == FEATURES and len(scorer.weights) == len(FEATURES)
    assert 0.0 < scorer.threshold < 1.0
    trained_on = set(json.loads(WEIGHTS.read_text())["trained_on"])
    held_out = {lab.name for lab in load_corpus_labels(CORPUS_LABELS).values() if lab.half not in TUNE_HALVES}
    assert held_out, "the corpus keeps a held-out half"
    assert not trained_on & held_out


def test_weights_trained_on_other_signals_are_refused(tmp_path):
    stale = json.loads(WEIGHTS.read_text())
    stale["features"] = stale["features"][:-1]
    path = tmp_path / "scorer.json"
    path.write_text(json.dumps(stale))
    with pytest.raises(ValueError, match="retrain"):
        ClaimScorer.load(path)


def test_the_chosen_threshold_reads_as_confidence_one_half():
    # One signal with weight 2 on standardised input: probability sigmoid(2 * rule - 1).
    weights = tuple(2.0 if name == "rule" else 0.0 for name in FEATURES)
    scorer = ClaimScorer(weights, -1.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), threshold=0.5)
    assert scorer.probability({"rule": 0.5}) == pytest.approx(0.5)
    assert scorer.confidence({"rule": 0.5}) == pytest.approx(0.5)
    strict = ClaimScorer(weights, -1.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), threshold=0.8)
    assert strict.confidence({"rule": 0.5}) < 0.5 < strict.confidence({"rule": 1.5})


def test_code_pointers_and_list_items_are_signals():
    assert text_signals("Set `BLOCK_SIZE=128` and pass --num-warps 4 to the launcher.")["code"] > 0.5
    assert text_signals("Kernel fusion reduces the traffic to global memory.")["code"] == 0.0
    assert text_signals("See https://example.org/guide for the details of tiling.")["pointer"] == 1.0
    text = "Intro line.\n- Pad the shared tile by one column to avoid bank conflicts.\n"
    topics = DocumentTopics({"bank_conflict_padding": 3}, frozenset({"bank_conflict_padding"}), text)
    listed = topics.signals("bank_conflict_padding", text.index("Pad"))
    assert listed["list_item"] == 1.0 and listed["subject_title"] == 1.0 and listed["subject_document"] > 0.4
    assert topics.signals("kernel_fusion", 0) == {"subject_document": 0.0, "subject_title": 0.0, "list_item": 0.0}


def test_as_vector_orders_signals_and_fills_the_missing():
    vector = as_vector({"rule": 0.7, "proposal": 1.0})
    assert len(vector) == len(FEATURES)
    assert vector[FEATURES.index("rule")] == 0.7 and vector[FEATURES.index("proposal")] == 1.0
    assert sum(vector) == pytest.approx(1.7)


def test_the_fit_is_deterministic_and_learns_a_separable_signal():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = (x[:, 0] - 0.5 * x[:, 2] > 0).astype(float)
    first, second = fit(x, y), fit(x, y)
    assert np.array_equal(first["weights"], second["weights"]) and first["bias"] == second["bias"]
    accuracy = ((predict(first, x) >= 0.5) == (y == 1)).mean()
    assert accuracy > 0.9
    assert first["weights"][0] > 0 > first["weights"][2]
