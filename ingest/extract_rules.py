"""The offline extractor: passages linked to the graph by names and meaning, claims decided from
what each sentence says about the nodes it links, and proposals for what the graph lacks.

For each passage (sentences under one heading path, on one page): the linker says which nodes the
passage is about by meaning; for each sentence, the lexicon says which nodes it names, and the
sentence is seen with its headings' and previous sentence's nodes (`relations.SentenceView`). The
claim rules score remedies, causes, preconditions, detection thresholds, gains, measurement advice
and plain evidence; the proposal finder adds new Techniques, Bottlenecks and protocol steps.
Claims below the minimum confidence are dropped; the rest are merged per triple.
"""

from __future__ import annotations

from dataclasses import dataclass

from .claims import Claim, Span, merge_claims
from .linking import EntityLinker
from .loaders import Document
from .passages import Passage, is_statement, passages
from .proposals import ProposalFinder
from .relations import ClaimRules, SentenceView

MIN_CONFIDENCE = 0.5
# Changing how claims are read changes this: files read by another version are read again, and
# what the old version said about them is taken back.
VERSION = "rules-3"


@dataclass(frozen=True)
class RuleSettings:
    min_confidence: float = MIN_CONFIDENCE


class RuleExtractor:
    """Claims from a document without a model endpoint."""

    name = "rules"
    version = VERSION

    def __init__(self, linker: EntityLinker, settings: RuleSettings = RuleSettings()):
        self.linker = linker
        self.settings = settings
        self.rules = ClaimRules(linker, self.name)
        self.proposals = ProposalFinder(linker, self.name)

    def extract(self, doc: Document) -> list[Claim]:
        parts = passages(doc)
        claims: list[Claim] = []
        for passage, about in zip(parts, self.linker.link(parts)):
            for view in self._views(doc, passage, about):
                claims.extend(self.rules.claims(view))
        claims.extend(self.proposals.claims(doc, parts))
        kept = [c for c in claims if c.confidence >= self.settings.min_confidence]
        return merge_claims(kept)

    def _views(self, doc: Document, passage: Passage, about):
        headings = [self.linker.mentions(title) for title in reversed(passage.headings)]
        heading_text = " > ".join(passage.headings)
        previous: list = []
        for sentence in passage.sentences:
            named = self.linker.mentions(sentence.text)
            if is_statement(sentence.text):
                yield SentenceView(sentence.text, Span(sentence.text, doc.location(sentence.start)), named,
                                   headings, previous, about, heading_text)
            previous = named
