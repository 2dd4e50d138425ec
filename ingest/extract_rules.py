"""The offline extractor: cue patterns over sentences that mention known Bottlenecks and Techniques.

For each sentence: find the skills it mentions (the lexicon, then retrieval for a missing
side), look for cues that tie them together, and emit claims:

- ADDRESSED_BY  a technique is said to fix, avoid, reduce or hide a bottleneck ("to avoid bank
  conflicts, pad ..."), or to be the thing to apply when the kernel is limited by it;
- REQUIRES / FORBIDDEN_WHEN  a technique said to need ("only if", "requires", "when") or to be
  wrong for ("avoid ... when", "does not help for") a condition the metric vocabulary can state;
- GAIN  a numeric speedup ("2x faster", "30% faster") said of a technique.

A sentence that names only a bottleneck borrows the technique its section heading names
(catalogues put the technique in the heading and "when to apply" in the body).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kskill.graph_schema.model import Condition

from .claims import Claim, EntityRef, Span, merge_claims
from .lexicon import Lexicon, Mention
from .loaders import Document
from .segment import Sentence, sentences

# Cues that a technique acts on a bottleneck.
REMEDY = re.compile(
    r"\b(?:to avoid|avoid\w*|reduc\w+|minimi[sz]\w+|eliminat\w+|prevent\w*|mitigat\w+|hid(?:e|es|ing)|"
    r"improv\w+|help\w*|fix\w*|remov\w+|solv\w+|alleviat\w+|overcom\w+|boost\w*|cut\w*|lower\w*|"
    r"so that|in order to|address\w*|tackl\w+|relie\w+|fewer|less|increas\w+ (?:the )?(?:throughput|bandwidth|utili[sz]ation)|"
    r"apply (?:these|this|it)? ?when|use (?:it |this )?when|for (?:a |the )?\w*[- ]bound|when (?:the )?(?:kernel|workload|op\w*) is|"
    r"limited by|bottleneck|instead|recommended|beneficial|speeds? up|faster|better|key|desirable|advise\w*|"
    r"allows?|maximi[sz]\w+|will not cause|effective|strategy|outperform\w*|efficient\w*)\b", re.I)
APPLICABILITY = re.compile(r"\b(?:when to (?:apply|use)|when (?:the )?(?:ncu|profiler|kernel)|shows|expected impact|"
                           r"applies|apply|use (?:it|this)|useful|worth|for (?:kernels|workloads))\b", re.I)
# A technique said to cause a bottleneck (a risk, a trade-off) is the opposite of a remedy.
CAUSES = re.compile(r"\b(?:increas\w*|caus\w*|adds?|leads? to|introduc\w*|results? in|trades?|risks?|worsen\w*)\b"
                    r"(?:\s+[\w-]+){0,3}\s*$", re.I)
NEGATION = re.compile(r"\b(?:not|no|never|cannot|can't|doesn't|don't|won't|neither|nor|without)\b", re.I)
REQUIRE = re.compile(r"\b(?:only (?:if|when|for|with|on)|only (?:beneficial|useful|worth it|helps?) (?:if|when|for)|requires?|required|needs?|must (?:have|be)|"
                     r"applies (?:only )?(?:to|when)|works (?:only )?(?:when|for|with)|prerequisite|provided that)\b", re.I)
FORBID = re.compile(r"\b(?:avoid (?:\w+ ){0,4}(?:when|if|for|on|with)|do not use|don't use|never use|"
                    r"(?:hurts?|slower|harmful|counterproductive|not (?:worth|beneficial|helpful)) (?:\w+ ){0,3}(?:when|if|for|on|with)|"
                    r"does not help (?:when|if|for|on|with)|breaks? (?:when|if|for|on|with))\b", re.I)
GAIN = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:x|×)(?:\s+(?:faster|speed-?up|improvement|higher throughput|better))?(?!\w|\s+slower)"
    r"|(?:speed-?up|improvement) of (?:up to |about |~)?(\d+(?:\.\d+)?)\s*(?:x|×)"
    r"|(\d{1,3})\s*%\s*(?:faster|speed-?up|higher throughput|improvement|better performance)", re.I)
GAIN_CONTEXT = re.compile(r"faster|speed-?up|improv|gain|throughput|better|performance|outperform", re.I)

# Preconditions the metric vocabulary can state, recognised by phrase.
CONDITION_PHRASES: tuple[tuple[re.Pattern[str], Condition], ...] = tuple(
    (re.compile(pattern, re.I), cond) for pattern, cond in (
        (r"\bmemory[- ]bound", Condition.of("memory_bound", "is_true")),
        (r"\bcompute[- ]bound", Condition.of("compute_bound", "is_true")),
        (r"\b(?:fp16|bf16|half[- ]precision|float16|bfloat16|16-bit float)", Condition.of("dtype", "in", ["float16", "bfloat16"])),
        (r"\b(?:fp32|float32|single[- ]precision)\b", Condition.of("dtype", "==", "float32")),
        (r"\bstatic (?:shapes?|sizes?)\b|shapes? (?:are|is) (?:fixed|known)", Condition.of("static_shapes", "is_true")),
        (r"\b(?:gemms?|matmuls?|matrix multiplications?)\b", Condition.of("has_gemm", "is_true")),
        (r"\bconvolutions?\b", Condition.of("has_convolution", "is_true")),
        (r"\breductions?\b", Condition.of("has_reduction", "is_true")),
        (r"\bsoftmax\b", Condition.of("has_softmax", "is_true")),
        (r"\battention\b", Condition.of("has_attention", "is_true")),
        (r"\b(?:layer ?norm|rms ?norm|normali[sz]ation)\b", Condition.of("has_normalization", "is_true")),
        (r"\bbatch ?norm\w* (?:in )?training|training[- ]mode batch ?norm", Condition.of("batchnorm_training", "is_true")),
    ))

MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class RuleSettings:
    min_confidence: float = MIN_CONFIDENCE


Finder = Callable[[str, str], "str | None"]  # (sentence, kind) -> id of the one node retrieval is sure of


class RuleExtractor:
    """Claims from a document by cue patterns; `finder` (retrieval) fills a missing side."""

    name = "rules"

    def __init__(self, lexicon: Lexicon, finder: Finder | None = None, settings: RuleSettings = RuleSettings()):
        self.lexicon = lexicon
        self.finder = finder
        self.settings = settings
        self._titles: dict[str, list[Mention]] = {}

    def extract(self, doc: Document) -> list[Claim]:
        self._titles = {}
        claims = self._heading_claims(doc)
        previous: tuple[str, list[Mention]] = ("", [])
        for sent in sentences(doc):
            section = doc.section_of(sent.start)
            found = self.lexicon.mentions(sent.text)
            context = Context(self._chain(doc, sent.start), previous[1] if previous[0] == section else [])
            claims.extend(self._sentence_claims(doc, sent, found, context))
            previous = (section, found)
        kept = [c for c in claims if c.confidence >= self.settings.min_confidence]
        return merge_claims(kept)

    def _chain(self, doc: Document, offset: int) -> list[list[Mention]]:
        """Mentions in the titles of the section holding `offset` and its parents, innermost first."""
        out = []
        for title in doc.section_chain(offset):
            if title not in self._titles:
                self._titles[title] = self.lexicon.mentions(title)
            out.append(self._titles[title])
        return out

    def _heading_claims(self, doc: Document) -> list[Claim]:
        """A heading naming techniques under a parent heading naming one bottleneck: the catalogue's claim."""
        claims = []
        for section in doc.sections:
            chain = self._chain(doc, section.start)
            own = [m for m in chain[0] if m.kind == "Technique"] if chain else []
            parent = _only(chain[1:], "Bottleneck")
            if own and parent and len(own) <= 2:
                titles = " > ".join(reversed(doc.section_chain(section.start)))
                span = Span(quote=titles, location=doc.location(section.start))
                claims += [Claim(EntityRef("Bottleneck", parent.id), "ADDRESSED_BY", EntityRef("Technique", t.id),
                                 0.6, span, self.name) for t in own]
        return claims

    def _sentence_claims(self, doc: Document, sent: Sentence, found: list[Mention], context: Context) -> list[Claim]:
        text = sent.text
        bottlenecks = [m for m in found if m.kind == "Bottleneck"]
        techniques = [m for m in found if m.kind == "Technique"]
        remedy = REMEDY.search(text)
        inherited = ""
        if bottlenecks and not techniques and (remedy or APPLICABILITY.search(text)):
            techniques = self._borrow(text, context, "Technique")
            inherited = "Technique" if techniques else ""
        elif techniques and not bottlenecks and remedy:
            bottlenecks = self._borrow(text, context, "Bottleneck")
            inherited = "Bottleneck" if bottlenecks else ""
        if not techniques and REQUIRE.search(text):
            techniques = self._borrow(text, context, "Technique")
        span = Span(quote=text, location=doc.location(sent.start))
        claims = self._addressed_by(text, bottlenecks, techniques, remedy, inherited, span)
        claims += self._conditions(text, techniques, span)
        claims += self._gains(text, techniques, span)
        return claims

    def _borrow(self, text: str, context: Context, kind: str) -> list[Mention]:
        """The one node of `kind` the nearest heading (or, for bottlenecks, the previous sentence) names;
        else the one retrieval is sure of."""
        sources = [context.previous, *context.headings] if kind == "Bottleneck" else [*context.headings, context.previous]
        for mentions in sources:
            named = [m for m in mentions if m.kind == kind]
            if len(named) == 1:
                return [Mention(named[0].id, kind, 0, 0, named[0].exact)]
            if named:
                return []  # several candidates: which one is meant is a guess
        if self.finder is not None:
            found_id = self.finder(text, kind)
            if found_id:
                return [Mention(found_id, kind, 0, 0, False)]
        return []

    def _addressed_by(self, text: str, bottlenecks: list[Mention], techniques: list[Mention],
                      remedy: re.Match[str] | None, inherited: str, span: Span) -> list[Claim]:
        if not bottlenecks or not techniques:
            return []
        if not remedy and not (inherited == "Technique" and APPLICABILITY.search(text)):
            return []
        claims = []
        negated = NEGATION.search(text)
        for b in bottlenecks:
            if b.end and CAUSES.search(text[:b.start]) or text.lower().startswith("risk"):
                continue
            for t in techniques:
                confidence = 0.55 if inherited else 0.65
                confidence += 0.1 if (b.exact or t.exact) else 0.0
                if remedy and t.end and b.end and _between(remedy, t, b):
                    confidence += 0.1
                if negated:
                    confidence -= 0.25  # "does not avoid", "without fusion": often the opposite claim
                if len(bottlenecks) * len(techniques) > 2:
                    confidence -= 0.1  # a list sentence: pairs are guesses
                claims.append(Claim(EntityRef("Bottleneck", b.id), "ADDRESSED_BY", EntityRef("Technique", t.id),
                                    round(min(confidence, 0.95), 2), span, self.name, gain=_gain(text)))
        return claims

    def _conditions(self, text: str, techniques: list[Mention], span: Span) -> list[Claim]:
        if len(techniques) != 1:
            return []
        technique = EntityRef("Technique", techniques[0].id)
        forbid, require = FORBID.search(text), REQUIRE.search(text)
        if not forbid and not require:
            return []
        cue = forbid or require
        relation = "FORBIDDEN_WHEN" if forbid else "REQUIRES"
        claims = []
        for pattern, cond in CONDITION_PHRASES:
            m = pattern.search(text, cue.start())
            if m and m.start() - cue.end() < 60:
                claims.append(Claim(technique, relation, cond, 0.6, span, self.name))
        return claims

    def _gains(self, text: str, techniques: list[Mention], span: Span) -> list[Claim]:
        gain = _gain(text)
        if gain is None or len(techniques) != 1:
            return []
        return [Claim(EntityRef("Technique", techniques[0].id), "GAIN", None, 0.6, span, self.name, gain=gain)]


@dataclass(frozen=True)
class Context:
    headings: list[list[Mention]]  # mentions per enclosing heading, innermost first
    previous: list[Mention]  # mentions of the previous sentence in the same section


def _only(chain: list[list[Mention]], kind: str) -> Mention | None:
    """The single node of `kind` the nearest title naming any names."""
    for mentions in chain:
        named = [m for m in mentions if m.kind == kind]
        if named:
            return named[0] if len(named) == 1 else None
    return None


def _between(cue: re.Match[str], a: Mention, b: Mention) -> bool:
    low, high = sorted((a.start, b.start))
    return low <= cue.start() <= high


def _gain(text: str) -> float | None:
    """A speedup factor stated in the sentence: "2x faster", "speedup of 1.5x", "30% faster"."""
    for m in GAIN.finditer(text):
        if m.group(1):
            value = float(m.group(1))
            if not GAIN_CONTEXT.search(text) or not 1.0 < value <= 100:
                continue  # "2x" alone is as often a shape ("2x2 tiles") as a speedup
            return value
        if m.group(2):
            value = float(m.group(2))
            if 1.0 < value <= 100:
                return value
        if m.group(3):
            return round(1 + float(m.group(3)) / 100, 3)
    return None
