"""Preconditions no metric states: a requirement clause about a technique becomes a proposed Condition.

The claim rules read a precondition only when its object is a condition of the metric vocabulary ("only when the
kernel is memory-bound", relations.CONDITION_PHRASES). Experts also write requirements no metric measures: "token
group sizes must be multiples of 32", "the last dimension must be divisible by 128", "layers too small to benefit from
float8". This rule reads a sentence that
- names exactly one technique, one the same document proposes (by its name), and no technique of the graph: on the tune
  material, the requirement sentences about techniques of the graph were API contracts ("the stride must evenly divide
  num_stages", "care must be taken when using TunableOp": 12 of 12 judged wrong), while those about a technique new to
  the graph stated when it pays ("layers too small to benefit from float8 training": 5 of 5 right);
- has a requirement form: must, requires, is required, has to, only when/if (REQUIRES), or a no-benefit form: too
  small to benefit, not large enough to benefit, does not benefit, little benefit, not recommended for, avoid when,
  must not (FORBIDDEN_WHEN);
and names the condition by the clause that holds the form (the text between commas, brackets or semicolons): what
follows "requires" when the technique comes before it ("MXFP8 training requires NVIDIA B200 or newer GPUs"), else the
clause without the technique's name and the words of the form's tail ("to benefit from ..."). A clause the metric
vocabulary states is left to the claim rules; so is a clause of one word or of more than twelve.

learned-22 (eval/ingest/runs/imperatives-session47.md) also reads gates stated as a hindrance (`gate_claims`): what a
sentence says does not work inside, cannot be used during, is not allowed in, cannot benefit from, or limits, prevents
or reduces the potential of a technique ("NVTX markers do not work inside of CUDA Graphs", "the default stream cannot
be used during graph capture", "several compute-bound operations in a row can reduce fusion potential") is a proposed
Condition the technique is FORBIDDEN_WHEN; the technique, of the graph or proposed, must be the whole object of the
hindrance. When the sentence opens by advising against something and the hindrance's subject is a pronoun, the thing
advised against is the condition ("Avoid creating odd shapes, as these may limit vectorization").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kskill.graph_schema.model import Condition

from .claims import Claim, EntityRef
from .relations import CONDITION_PHRASES, SentenceView

REQUIREMENT = re.compile(r"\b(?:must(?! not)|requires?|(?:is|are) required|has to|have to|only (?:when|if))\b", re.I)
NO_BENEFIT = re.compile(r"\b(?:too \w+ to benefit|not \w+ enough to benefit|(?:does|do|will) not benefit|"
                        r"(?:little|no) (?:or no )?benefit|not recommended (?:for|when|if)|"
                        r"avoid (?:it |them |this )?(?:when|if|for)|must not)\b", re.I)
# Where a requirement's clause ends: a comma, a semicolon, a colon, a bracket, a dash between spaces, "and"/"but"/"so"
# starting a new clause after a comma is covered by the comma.
CLAUSE_EDGE = re.compile(r"[,;:()\[\]]|\s[-–—]\s|\.\s")
TAIL = re.compile(r"\s+(?:to benefit|benefit)\b.*$|\s+(?:from|with|for|of|by|in|on)\s*$", re.I)
LEAD = re.compile(r"^(?:that|which|and|but|so|then|also|the|a|an)\s+", re.I)
CONFIDENCE = 0.6
# learned-22: a hindrance of a technique; the technique follows it, after a place ("inside of", "during") and an article.
HINDERS = re.compile(r"\b(?:(?:do|does|did|will|would|can|could|may|might)\s+not\s+work|(?:can ?not|can't|won't)\s+"
                     r"(?:be used|work)|(?:is|are|was|were)\s+not\s+(?:allowed|supported|permitted)|"
                     r"(?:can ?not|can't|do not|does not|don't|doesn't|won't|will not)\s+benefit\s+from|"
                     r"(?:limits?|prevents?|precludes?|inhibits?|hinders?|interferes?\s+with|reduces?))\b", re.I)
PLACE = re.compile(r"\s+(?:(?:inside|within|during|in|with|under)\s+(?:of\s+)?)?(?:(?:the|a|an|any|complex|further)\s+)?$",
                   re.I)
# What may follow the technique: the end of the clause, or a word for what it would bring ("fusion potential").
OBJECT_END = re.compile(r"\s*(?:(?:potential|opportunit\w*|benefits?|gains?)\b\s*)?(?:[.,;:!)]|$|\s*(?:as|since|because|"
                        r"when|if|unless|and|but|so|thus|which|by|today|yet)\b)", re.I)
# "The drawback of this approach is that the default stream ...": the subject follows "is that".
SAID_THAT = re.compile(r"^.*\b(?:is|are|was|were)\s+that\s+", re.I)
PRONOUN = re.compile(r"^(?:these|those|they|this|that|it|we|you|such)\b", re.I)
PERSONAL = re.compile(r"\b(?:they|it|we|you)\b", re.I)
# Advice against something, opening the sentence: "Avoid creating tensors with odd shapes, as these ...".
ADVISED_AGAINST = re.compile(r"^\W*(?:avoid|never use|do not use|don't use)\s+([^,;:]+)", re.I)
REASON = re.compile(r"^(?:as|since|because|for)\s+", re.I)


def requirement_claims(view: SentenceView, proposed: Sequence[EntityRef], extractor: str) -> list[Claim]:
    """A REQUIRES or FORBIDDEN_WHEN claim from a sentence stating a requirement clause about one technique."""
    forbid = NO_BENEFIT.search(view.text)
    cue = forbid or REQUIREMENT.search(view.text)
    if cue is None:
        return []
    named = _techniques(view, proposed)
    if len(named) != 1:
        return []
    technique, (t_start, t_end) = named[0]
    start, end = _clause(view.text, cue.start())
    if t_start >= start and t_end <= cue.start() and not forbid:
        name = view.text[cue.end():end]  # "X requires Y": the requirement is Y
    else:
        name = view.text[start:t_start] + " " + view.text[t_end:end] if start <= t_start < end else view.text[start:end]
    name = _tidy(name)
    words = name.split()
    if not 2 <= len(words) <= 12 or any(pattern.search(name) for pattern, _ in CONDITION_PHRASES):
        return []
    relation = "FORBIDDEN_WHEN" if forbid else "REQUIRES"
    return [Claim(technique, relation, Condition.proposed(name), CONFIDENCE, view.span, extractor,
                  kind="precondition")]


def _techniques(view: SentenceView, proposed: Sequence[EntityRef]) -> list[tuple[EntityRef, tuple[int, int]]]:
    """The techniques the sentence names, each with where: a node of the graph, or one of the document's proposals.
    Only a sentence naming no node of the graph is read: there the modal sentences state API contracts."""
    if view.of_kind("Technique"):
        return []
    out: list[tuple[EntityRef, tuple[int, int]]] = []
    seen: set[str] = set()
    for ref in proposed:
        found = re.search(rf"(?<!\w){re.escape(ref.name)}(?!\w)", view.text, re.I)
        if found and ref.key not in seen:
            seen.add(ref.key)
            out.append((ref, found.span()))
    return out


def _clause(text: str, at: int) -> tuple[int, int]:
    starts = [m.end() for m in CLAUSE_EDGE.finditer(text, 0, at)]
    after = CLAUSE_EDGE.search(text, at)
    return (starts[-1] if starts else 0, after.start() if after else len(text))


def _tidy(name: str) -> str:
    name = re.sub(r"\s+", " ", name.replace("*", " ")).strip(" .`'\"")
    name = TAIL.sub("", name).strip()
    while LEAD.match(name):
        name = LEAD.sub("", name, count=1)
    return name


def gate_claims(view: SentenceView, proposed: Sequence[EntityRef], extractor: str) -> list[Claim]:
    """FORBIDDEN_WHEN claims from a sentence saying what stops a technique working or paying (learned-22): "NVTX
    markers do not work inside of CUDA Graphs" gives the CUDA graph technique FORBIDDEN_WHEN "NVTX markers"."""
    text = re.sub(r"\([^()]*\)", lambda m: " " * len(m.group()), view.text)  # a bracketed aside, offsets kept
    techniques = [(EntityRef("Technique", m.id), m.start, m.end) for m in view.of_kind("Technique")]
    techniques += [(ref, found.start(), found.end()) for ref in proposed
                   for found in [re.search(rf"(?<!\w){re.escape(ref.name)}(?!\w)", text, re.I)] if found]
    out: list[Claim] = []
    for cue in HINDERS.finditer(text):
        if re.search(r"\bto\s+$", text[:cue.start()]):  # "... NO_UNROLL to prevent unrolling": a purpose, not a gate
            continue
        after = [(ref, start, end) for ref, start, end in techniques if start >= cue.end()
                 and PLACE.fullmatch(text[cue.end():start]) and OBJECT_END.match(text, end)]
        if len(after) != 1:
            continue
        name = _subject(text, cue.start())
        # a technique named in the subject makes it a relation of two techniques, not a condition
        if name and not any(text[start:end].lower() in name.lower() for _, start, end in techniques):
            out.append(Claim(after[0][0], "FORBIDDEN_WHEN", Condition.proposed(name), CONFIDENCE, view.span, extractor,
                             kind="precondition"))
    return out


def _subject(text: str, at: int) -> str:
    """What the hindrance at `at` is said of: its clause before it, after "is that"; the thing advised against when
    that is a pronoun; "" when it is no phrase of two to twelve words."""
    start, _ = _clause(text, at)
    name = REASON.sub("", _tidy(SAID_THAT.sub("", text[start:at])))
    name = re.sub(r"(?:\s+(?:can|could|may|might|will|would|also|often|typically|usually|generally))+$", "",
                  name, flags=re.I).strip()
    if PRONOUN.match(name):
        advised = ADVISED_AGAINST.match(text)
        name = _tidy(advised.group(1)) if advised and advised.end() <= at else ""
    words = name.split()
    # "X requires checks and may limit ...": a subject ending in a conjunction is a verb phrase, not a name
    # (nor one holding a pronoun: "but in a limited amount and they reduce ...")
    return (name if 2 <= len(words) <= 12 and not PERSONAL.search(name) and words[-1].lower() not in ("and", "or", "but")
            else "")
