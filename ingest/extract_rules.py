"""The offline extractor: passages linked to the graph by names and meaning, candidate claims decided from
what each sentence says about the nodes it links, a learned scorer that keeps the likely ones, and
proposals for what the graph lacks.

For each passage (sentences under one heading path, on one page): the linker says which nodes the
passage is about by meaning; for each sentence, the lexicon says which nodes it names, and the
sentence is seen with its headings' and previous sentence's nodes (`relations.SentenceView`). The
claim rules propose remedies, causes, preconditions, detection thresholds, gains, measurement advice
and plain evidence with low bars; the proposal finder adds new Techniques, Bottlenecks and protocol
steps. Each candidate carries its signals (scorer.py), and the scorer fitted on the tune documents
gives it its confidence. Claims below the minimum confidence are dropped; the rest are merged per
triple. Without the scorer's weights the rules decide alone, as the `rules-3` extractor did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .claims import Claim, Span, merge_claims
from .linking import EntityLinker
from .loaders import Document
from .passages import Passage, is_statement, passages
from .proposals import ProposalFinder
from .relations import ClaimRules, SentenceView
from .scorer import WEIGHTS, ClaimScorer, proposal_signals, view_signals

MIN_CONFIDENCE = 0.5
# Changing how claims are read changes this: files read by another version are read again, and
# what the old version said about them is taken back.
VERSION = "learned-1"
RULES_VERSION = "rules-3"  # the rules alone, when no scorer is used
# With a scorer the rules only propose: any candidate scoring this much is shown to the scorer.
CANDIDATE_BAR = 0.3


@dataclass(frozen=True)
class RuleSettings:
    min_confidence: float = MIN_CONFIDENCE
    learned: bool = True  # use the learned scorer when its weights are installed


class RuleExtractor:
    """Claims from a document without a model endpoint."""

    name = "rules"

    def __init__(self, linker: EntityLinker, settings: RuleSettings = RuleSettings(),
                 scorer: ClaimScorer | None = None):
        self.linker = linker
        self.settings = settings
        if scorer is None and settings.learned and WEIGHTS.is_file():
            scorer = ClaimScorer.load()
        self.scorer = scorer
        bars = {"edge_bar": CANDIDATE_BAR, "evidence_bar": CANDIDATE_BAR} if scorer is not None else {}
        self.rules = ClaimRules(linker, self.name, **bars)
        self.proposals = ProposalFinder(linker, self.name)
        self.version = VERSION if scorer is not None else RULES_VERSION

    def extract(self, doc: Document) -> list[Claim]:
        claims = self.candidates(doc)
        if self.scorer is not None:
            claims = [replace(c, confidence=round(self.scorer.confidence(dict(c.signals)), 2)) for c in claims]
        kept = [c for c in claims if c.confidence >= self.settings.min_confidence]
        return merge_claims(kept)

    def candidates(self, doc: Document) -> list[Claim]:
        """Every claim the rules and the proposal finder see, with its signals and the rules' own score."""
        parts = passages(doc)
        claims: list[Claim] = []
        for passage, about in zip(parts, self.linker.link(parts)):
            for view in self._views(doc, passage, about):
                claims.extend(replace(c, signals=tuple(view_signals(c, view).items()))
                              for c in self.rules.claims(view))
        claims.extend(replace(c, signals=tuple(proposal_signals(c).items())) for c in self.proposals.claims(doc, parts))
        return claims

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
