"""Candidate knowledge as extractors produce it: triples with a confidence and an evidence span.

A `Claim` is one triple (subject, relation, object) plus where it was read. Subjects and
objects are `EntityRef`s: an existing node's id, or a name and description that entity
resolution turns into an id. Relations are those of the skill graph, plus GAIN for a
numeric speedup claim about a technique and SUPPORTS for a passage that is evidence for one
node (what it is, what causes it, how to measure it) without linking it to another.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from kskill.graph_schema.model import Condition

Relation = Literal["ADDRESSED_BY", "REQUIRES", "FORBIDDEN_WHEN", "CONFLICTS_WITH", "DETECTED_BY", "GAIN", "SUPPORTS"]
SkillKind = Literal["Bottleneck", "Technique", "ProtocolStep"]
# What a quote says about the claim's subject, recorded on its Evidence node.
ClaimKind = Literal["", "remedy", "cause", "definition", "precondition", "detection", "gain", "measurement"]


@dataclass(frozen=True)
class EntityRef:
    """A Bottleneck or Technique: by id when known, else by name and description (a candidate)."""

    kind: SkillKind
    id: str = ""
    name: str = ""
    description: str = ""
    nearest: tuple[str, ...] = ()  # for a new entity: the closest existing nodes, for review

    @property
    def key(self) -> str:
        return self.id or f"new:{self.name.strip().lower()}"


@dataclass(frozen=True)
class Span:
    """The quoted passage and where it is: "p. 4" or "section X, offset 1234"."""

    quote: str
    location: str


@dataclass(frozen=True)
class Claim:
    subject: EntityRef
    relation: Relation
    object: EntityRef | Condition | None  # None for GAIN and SUPPORTS
    confidence: float
    evidence: Span
    extractor: str  # "rules", "llm" or "note"
    gain: float | None = None  # a claimed speedup factor (ADDRESSED_BY or GAIN)
    priority: int | None = None  # notes may state one
    extra_evidence: tuple[Span, ...] = field(default=())
    kind: ClaimKind = ""
    figures: tuple[str, ...] = field(default=())  # numbers the quote states, as written
    # What the learned scorer read about the claim (signal name, value): kept so that a scorer can be
    # trained offline on the very values it is later applied to (eval/ingest_train.py).
    signals: tuple[tuple[str, float], ...] = field(default=())

    @property
    def triple(self) -> tuple[str, str, str]:
        """(subject, relation, object) as text: ids, condition text, or the gain for GAIN."""
        if self.relation == "GAIN":
            return (self.subject.key, "GAIN", f"{self.gain:g}")
        if self.relation == "SUPPORTS":
            return (self.subject.key, "SUPPORTS", "")
        if isinstance(self.object, Condition):
            return (self.subject.key, self.relation, condition_text(self.object))
        return (self.subject.key, self.relation, self.object.key if self.object else "")

    def with_refs(self, subject: EntityRef, obj: EntityRef | Condition | None) -> Claim:
        return replace(self, subject=subject, object=obj)


def condition_text(cond: Condition) -> str:
    """A condition in the compact form labels use: `metric op value`; a proposed one by its clause."""
    if cond.status == "proposed":
        return f"proposed: {cond.text}"
    if cond.op == "is_true":
        return f"{cond.metric} is_true"
    value = cond.values if cond.op == "in" else cond.value
    if isinstance(value, list):
        value = "[" + ",".join(str(v) for v in value) + "]"
    return f"{cond.metric} {cond.op} {value}"


def merge_claims(claims: list[Claim]) -> list[Claim]:
    """One claim per triple: the most confident (the earlier on a tie), with the others' quotes
    kept as extra evidence, and their gain when the most confident states none."""
    merged: dict[tuple[str, str, str], _Merge] = {}
    for claim in claims:
        held = merged.get(claim.triple)
        if held is None:
            merged[claim.triple] = _Merge(claim, dict.fromkeys(s for s in claim.extra_evidence if s != claim.evidence),
                                          claim.gain, claim.figures)
        elif claim.confidence > held.first.confidence:
            spans = (*claim.extra_evidence, held.first.evidence, *held.extra)
            merged[claim.triple] = _Merge(claim, dict.fromkeys(s for s in spans if s != claim.evidence),
                                          claim.gain if claim.gain is not None else held.gain,
                                          (*held.figures, *claim.figures), alone=False)
        else:
            held.extra.update(dict.fromkeys(s for s in (claim.evidence, *claim.extra_evidence)
                                            if s != held.first.evidence))
            held.gain = held.gain if held.gain is not None else claim.gain
            held.figures = (*held.figures, *claim.figures)
            held.alone = False
    return [m.first if m.alone else replace(m.first, extra_evidence=tuple(m.extra), gain=m.gain,
                                            figures=tuple(dict.fromkeys((*m.first.figures, *m.figures))))
            for m in merged.values()]


@dataclass
class _Merge:
    """A triple's claims merged so far (ordered extra spans: adding one stays cheap)."""

    first: Claim
    extra: dict[Span, None]
    gain: float | None
    figures: tuple[str, ...] = ()
    alone: bool = True  # one claim only: returned as it came
