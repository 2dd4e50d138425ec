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

from .scorer import FEATURES, ClaimScorer
from .statement import STATEMENT_FEATURES

PRECISION_WEIGHTS = Path(__file__).with_name("precision.json")
PRECISION_FEATURES = FEATURES + STATEMENT_FEATURES


@dataclass(frozen=True)
class PrecisionModel:
    model: ClaimScorer  # the same logistic form as the scorer, over PRECISION_FEATURES

    @classmethod
    def load(cls, path: Path = PRECISION_WEIGHTS) -> PrecisionModel:
        return cls(ClaimScorer.load(path, PRECISION_FEATURES))

    def probability(self, signals: Mapping[str, float]) -> float:
        return self.model.probability(signals)

    def states(self, signals: Mapping[str, float]) -> bool:
        """Whether the claim's sentence likely states it: the probability reaches the chosen threshold."""
        return self.model.probability(signals) >= self.model.threshold
