"""The sentence-level precision model: does a kept claim's sentence state it?

The learned scorer (scorer.py) was fitted on which nodes a document's labels list, so it learned what a
document is about, not whether one sentence says something about a node. This model is fitted on
sentence-level verdicts instead: the judged extractions of eval/ingest/runs (a person's right or wrong
for each claim and its sentence) and the tune documents' claims read from the very passage a label
quotes. Its signals are the scorer's plus the sentence's own (statement.py): the linked name's role in
its clause, names met in passing, configuration fields, lead lines, the claim's kind against what the
sentence does, and the sentence's closeness by meaning to the node. A logistic model over them, fitted
offline by `python -m kskill.eval.ingest_precision` and shipped as data (precision.json), drops a kept
claim whose probability is under the threshold chosen by cross-validation by document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .scorer import ClaimScorer

PRECISION_WEIGHTS = Path(__file__).with_name("precision.json")
# A small set: with a few hundred judged sentences, the scorer's thirty signals and the twelve sentence signals
# together fitted noise (cross-validated AUC 0.61 against 0.66 for these; eval/ingest_precision.py).
PRECISION_FEATURES = (
    "edge", "proposal", "measurement", "rule", "cue_cause", "subject_meaning", "passing", "pointer", "code",
    "role_object", "heading_only", "in_list", "in_brackets", "config_field", "lead_line",
    "sentence_similarity", "similarity_margin", "edge_unnamed", "support_in_passing",
)


def with_interactions(signals: Mapping[str, float]) -> dict[str, float]:
    """The signals plus two that a linear model cannot form itself: a remedy whose technique the sentence does
    not name (only its heading or meaning links it), and evidence for a node the sentence names in passing."""
    out = dict(signals)
    out["edge_unnamed"] = out.get("edge", 0.0) * out.get("heading_only", 0.0)
    out["support_in_passing"] = out.get("support", 0.0) * max(out.get("in_list", 0.0), out.get("passing", 0.0))
    return out


@dataclass(frozen=True)
class PrecisionModel:
    model: ClaimScorer  # the same logistic form as the scorer, over PRECISION_FEATURES

    @classmethod
    def load(cls, path: Path = PRECISION_WEIGHTS) -> PrecisionModel:
        return cls(ClaimScorer.load(path, PRECISION_FEATURES))

    def probability(self, signals: Mapping[str, float]) -> float:
        return self.model.probability(with_interactions(signals))

    def states(self, signals: Mapping[str, float]) -> bool:
        """Whether the claim's sentence likely states it: the probability reaches the chosen threshold."""
        return self.probability(signals) >= self.model.threshold
