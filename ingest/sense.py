"""The sense check: is a kept claim's sentence about its node in the node's own sense? (opt-in, off by default)

A node's name is often met in another sense: "the graphics pipeline" is no software pipelining, "shuffle intrinsics"
are no fast-math intrinsics, "interleaved barriers" no interleaved timing. A table of other senses per node only knows
the senses its authors met. This check reads general signals instead, none keyed to a document or a node: how close by
meaning the sentence, the few words around the node's name and the section heading are to the node's own text, and
how far above the best other node of its kind; where the name stands in its clause; whether it is met in a list,
brackets or code. A logistic model over them is fitted on the items a person judged in the tune material and
cross-validated by document (`python -m kskill.eval.ingest_sense`, which writes sense.json beside this module); the
extractor drops a kept claim it scores under the chosen threshold. Proposals and gains carry no node text to compare
and pass unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .claims import Claim
from .scorer import ClaimScorer, focus
from .statement import in_brackets, in_code, in_list, role_of, similarity_pair

SENSE_WEIGHTS = Path(__file__).with_name("sense.json")
SENSE_FEATURES = ("sentence_similarity", "similarity_margin", "window_similarity", "window_margin",
                  "heading_similarity", "heading_margin", "named", "role_subject", "role_object", "in_list",
                  "in_brackets", "in_code", "edge")
WINDOW = 6  # words each side of the name: enough to tell "graphics pipeline" from "multi-stage pipeline"
_SECTION = re.compile(r"^section (.*), offset \d+$")


def section_of(location: str) -> str:
    """The section title a claim's location names ("section Intro, offset 12" -> "Intro"), or ""."""
    found = _SECTION.match(location)
    return found.group(1) if found else ""


def window(text: str, span: tuple[int, int] | None, words: int = WINDOW) -> str:
    """The words around the node's name: the sense it is used in (the whole sentence when it is not named)."""
    if span is None:
        return text
    before = text[:span[0]].split()[-words:]
    after = text[span[1]:].split()[:words]
    return " ".join(before + [text[span[0]:span[1]]] + after)


def texts_to_embed(quote: str, span: tuple[int, int] | None, section: str) -> tuple[str, str, str]:
    """What is compared with the node's text: the sentence, the words around the name, the heading."""
    return quote, window(quote, span), section or quote


def sense_signals(node: str, quote: str, span: tuple[int, int] | None, edge: bool, vectors: Sequence,
                  node_vectors: Mapping[str, object], kind_of: Mapping[str, str]) -> dict[str, float]:
    """SENSE_FEATURES for a claim about `node` read from `quote` (`span`: where the quote names it); `vectors` are the
    embeddings of texts_to_embed(...), in order."""
    sentence, around, heading = vectors
    out: dict[str, float] = {}
    out["sentence_similarity"], out["similarity_margin"] = similarity_pair(sentence, node, node_vectors, kind_of)
    out["window_similarity"], out["window_margin"] = similarity_pair(around, node, node_vectors, kind_of)
    out["heading_similarity"], out["heading_margin"] = similarity_pair(heading, node, node_vectors, kind_of)
    role = role_of(quote, span) if span else "absent"
    out.update({"named": 1.0 if span else 0.0, "role_subject": float(role == "subject"),
                "role_object": float(role == "object"),
                "in_list": float(bool(span and in_list(quote, span))),
                "in_brackets": float(bool(span and in_brackets(quote, span[0]))),
                "in_code": float(bool(span and in_code(quote, span))), "edge": 1.0 if edge else 0.0})
    return out


def checked(claim: Claim) -> bool:
    """Whether the check applies: a claim about an existing node other than a gain."""
    return bool(focus(claim)[0]) and not focus(claim)[0].startswith("new:") and claim.relation != "GAIN"


@dataclass(frozen=True)
class SenseCheck:
    model: ClaimScorer  # the scorer's logistic form over SENSE_FEATURES

    @classmethod
    def load(cls, path: Path = SENSE_WEIGHTS) -> SenseCheck:
        return cls(ClaimScorer.load(path, SENSE_FEATURES))

    def keeps(self, signals: Mapping[str, float]) -> bool:
        return self.model.probability(signals) >= self.model.threshold

    def filter(self, claims: list[Claim], linker) -> list[Claim]:
        """The claims whose sentence uses their node's name in its sense (all of them without embeddings)."""
        todo = [c for c in claims if checked(c)]
        if not todo:
            return claims
        spans = []
        texts: list[str] = []
        for c in todo:
            node = focus(c)[0]
            mention = next((m for m in linker.mentions(c.evidence.quote) if m.id == node), None)
            span = (mention.start, mention.end) if mention else None
            spans.append(span)
            texts += texts_to_embed(c.evidence.quote, span, section_of(c.evidence.location))
        vectors = linker.embed(texts)
        if vectors is None:
            return claims
        nodes = linker.node_vectors()
        dropped = set()
        for n, (c, span) in enumerate(zip(todo, spans)):
            signals = sense_signals(focus(c)[0], c.evidence.quote, span, c.relation != "SUPPORTS",
                                    vectors[3 * n:3 * n + 3], nodes, linker.kind_of)
            if not self.keeps(signals):
                dropped.add(id(c))
        return [c for c in claims if id(c) not in dropped]
