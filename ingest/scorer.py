"""The learned claim scorer: which candidate claims to keep, from interpretable signals.

The claim rules (relations.py) and the proposal finder propose candidates with low bars; each candidate is
described by a few signals (where its nodes are named, the cue words of its sentence, how list-like or
code-like the sentence is, what the passage is about by meaning, the rules' own score). A logistic model
over those signals, fitted offline on the labelled tune documents (eval/ingest_train.py) and shipped as
data (scorer.json beside this module), turns them into the claim's confidence. No signal is a gate: a cue
word raises the odds, it does not decide.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .claims import Claim, EntityRef
from .relations import ADVICE, CAUSE, DEFINITION, FIGURE, NEGATION, POINTER, PREFACE, REMEDY, SentenceView
from .statement import statement_signals

WEIGHTS = Path(__file__).with_name("scorer.json")
EDGES = ("ADDRESSED_BY", "REQUIRES", "FORBIDDEN_WHEN", "DETECTED_BY", "CONFLICTS_WITH")
# Words before a name that say it is met in passing: "such as X", "e.g. X", "(X)", "like X".
PASSING = re.compile(r"(?:such as|e\.g\.?,?|i\.e\.?,?|including|like|for example,?|\(|,)\s*$", re.I)
# Marks of configuration text and code rather than a claim: backticks, assignments, flags, calls, paths.
CODE = re.compile(r"`|\b\w+=\S|(?<!\w)--\w|\w\(\)|::|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|/\w+/\w+")
URL = re.compile(r"https?://|www\.")

FEATURES = (
    "rule", "edge", "gain", "support", "measurement", "definition", "cause", "proposal",
    "subject_named", "subject_exact", "subject_heading", "subject_meaning", "subject_top",
    "object_named", "object_heading", "named_count", "passing",
    "cue_definition", "cue_remedy", "cue_cause", "cue_advice", "figure", "negation",
    "length", "preface", "code", "pointer",
    "subject_document", "subject_title", "list_item",
)


@dataclass(frozen=True)
class DocumentTopics:
    """What a whole document is about: how many of its sentences name each node, and the nodes its title
    names. A node a document keeps coming back to is what it explains; one named once is met in passing."""

    sentences_naming: Mapping[str, int]
    in_title: frozenset[str]
    text: str  # the document's text, to see how a sentence's line starts (a list item, a table row)
    title: str = ""

    def signals(self, node_id: str, start: int) -> dict[str, float]:
        line = self.text.rfind("\n", 0, start) + 1
        head = self.text[line:start].lstrip()
        return {
            "subject_document": min(math.log1p(self.sentences_naming.get(node_id, 0)) / math.log(20), 1.0),
            "subject_title": 1.0 if node_id in self.in_title else 0.0,
            "list_item": 1.0 if LIST_MARK.match(head) or LIST_MARK.match(self.text[line:line + 4]) else 0.0,
        }


LIST_MARK = re.compile(r"(?:[-*+•|]|\d{1,2}[.)])\s")


def view_signals(claim: Claim, view: SentenceView, topics: DocumentTopics, start: int) -> dict[str, float]:
    """The signals of a claim read from one sentence (starting at `start` in the document) and its context."""
    text = view.text
    subject = claim.subject.id
    obj = claim.object.id if isinstance(claim.object, EntityRef) else ""
    named = {m.id: m for m in view.named}
    in_headings = {m.id for mentions in view.headings for m in mentions}
    mention = named.get(subject)
    out = _relation_signals(claim)
    out.update({
        "subject_named": 1.0 if mention else 0.0,
        "subject_exact": 1.0 if mention and mention.exact else 0.0,
        "subject_heading": 1.0 if subject in in_headings else 0.0,
        "subject_meaning": view.about.meaning.get(subject, 0.0) or view.about.protocol.get(subject, 0.0),
        "subject_top": 1.0 if view.about.ranks(subject) == 0 else 0.0,
        "object_named": 1.0 if obj and obj in named else 0.0,
        "object_heading": 1.0 if obj and obj in in_headings else 0.0,
        "named_count": min(len(named), 5) / 5,
        "passing": 1.0 if mention and PASSING.search(text[max(0, mention.start - 20):mention.start]) else 0.0,
        "preface": 1.0 if PREFACE.search(view.heading) else 0.0,
    })
    out.update(text_signals(text))
    out.update(topics.signals(subject, start))
    node_id, kind = focus(claim)
    said = named.get(node_id)
    out.update(statement_signals(text, (said.start, said.end) if said else None, kind))
    return out


def focus(claim: Claim) -> tuple[str, str]:
    """The node a claim's sentence must state something about (its key, and kind): the technique of a remedy
    (what the sentence recommends), else the subject; a proposed node's key is "new:<name>"."""
    if claim.relation == "ADDRESSED_BY" and isinstance(claim.object, EntityRef):
        return claim.object.key, claim.object.kind
    return claim.subject.key, claim.subject.kind


def proposal_signals(claim: Claim, topics: DocumentTopics) -> dict[str, float]:
    """The signals of a proposal: its sentence, and whether that sentence names the proposed thing."""
    out = _relation_signals(claim)
    quote = claim.evidence.quote
    name = claim.subject.name if not claim.subject.id else ""
    out["proposal"] = 1.0
    out["subject_named"] = 1.0 if name and name.lower() in quote.lower() else 0.0
    out.update(text_signals(quote))
    mentions = topics.text.lower().count(name.lower()) if name else 0
    out["subject_document"] = min(math.log1p(mentions) / math.log(20), 1.0)
    out["subject_title"] = 1.0 if name and name.lower() in topics.title.lower() else 0.0
    at = quote.lower().find(name.lower()) if name else -1
    out.update(statement_signals(quote, (at, at + len(name)) if at >= 0 else None, claim.subject.kind))
    return out


def text_signals(text: str) -> dict[str, float]:
    """What the sentence's words say, whoever it names."""
    return {
        "cue_definition": 1.0 if DEFINITION.search(text) else 0.0,
        "cue_remedy": 1.0 if REMEDY.search(text) else 0.0,
        "cue_cause": 1.0 if CAUSE.search(text) else 0.0,
        "cue_advice": 1.0 if ADVICE.search(text) else 0.0,
        "figure": 1.0 if FIGURE.search(text) else 0.0,
        "negation": 1.0 if NEGATION.search(text) else 0.0,
        "length": min(math.log(max(len(text), 10)) / math.log(400), 1.2),
        "code": min(len(CODE.findall(text)) / 3, 1.0),
        "pointer": 1.0 if POINTER.search(text) or URL.search(text) else 0.0,
    }


def _relation_signals(claim: Claim) -> dict[str, float]:
    relation = claim.relation
    return {
        "rule": claim.confidence,
        "edge": 1.0 if relation in EDGES else 0.0,
        "gain": 1.0 if relation == "GAIN" else 0.0,
        "support": 1.0 if relation == "SUPPORTS" else 0.0,
        "measurement": 1.0 if claim.kind == "measurement" else 0.0,
        "definition": 1.0 if claim.kind == "definition" else 0.0,
        "cause": 1.0 if claim.kind == "cause" else 0.0,
        "proposal": 0.0,
    }


@dataclass(frozen=True)
class ClaimScorer:
    """A logistic model over FEATURES: standardised signals, weights and bias; `threshold` is the
    probability a claim needs to be kept, chosen by leave-one-document-out on the tune documents."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    threshold: float
    features: tuple[str, ...] = FEATURES

    @classmethod
    def load(cls, path: Path = WEIGHTS, features: tuple[str, ...] = FEATURES) -> ClaimScorer:
        data = json.loads(path.read_text(encoding="utf-8"))
        if tuple(data["features"]) != features:
            raise ValueError(f"{path} was trained on other signals; retrain it (python -m kskill.eval.ingest_train, "
                             f"python -m kskill.eval.ingest_precision)")
        return cls(tuple(data["weights"]), data["bias"], tuple(data["mean"]), tuple(data["scale"]),
                   data["threshold"], tuple(data["features"]))

    def probability(self, signals: Mapping[str, float]) -> float:
        z = self.bias + sum(w * (signals.get(name, 0.0) - m) / s
                            for w, name, m, s in zip(self.weights, self.features, self.mean, self.scale))
        return _sigmoid(z)

    def confidence(self, signals: Mapping[str, float]) -> float:
        """The probability shifted so that the chosen threshold reads 0.5: `--min-confidence 0.5` (the
        default) keeps what the threshold keeps, and a lower or higher bar trades recall for precision."""
        p = min(max(self.probability(signals), 1e-9), 1 - 1e-9)
        t = min(max(self.threshold, 1e-6), 1 - 1e-6)
        return _sigmoid(math.log(p / (1 - p)) - math.log(t / (1 - t)))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))


def as_vector(signals: Mapping[str, float] | Sequence[tuple[str, float]],
              features: tuple[str, ...] = FEATURES) -> list[float]:
    """The signals in `features` order (absent ones are 0)."""
    found = dict(signals)
    return [float(found.get(name, 0.0)) for name in features]
