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
