"""Whether a sentence states a claim about a node, read from the sentence itself.

The claim rules decide which node a sentence is about from names, headings and meaning; what they do
not see is how the sentence uses the name. These signals describe that, for the precision model
(precision.py): where the linked name stands in its clause (before the clause's verb as its subject,
right after a verb as its object, or elsewhere, inside a prepositional phrase), whether it is met in
passing (inside a list, brackets or code, after "such as"), whether the sentence is a configuration
field or a lead line that introduces a list, whether the claim's kind fits what the sentence does (a
bottleneck quoted from an instruction, a protocol step quoted from a sentence about no measurement),
and how close the sentence is by meaning to the node's own text compared with the other nodes of its
kind. No parser is used: the clause's verb is found from a small verb vocabulary and word shapes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .relations import IMPERATIVE, TIMING

# Words that end a clause: the name's role is read inside its own clause.
CLAUSE_BREAK = re.compile(r"[;:()\[\]]|,\s+(?:which|where|while|whereas|but|so|thus|because|although)\b|\s[-–—]\s")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")
# A finite verb or auxiliary, by form: the auxiliaries, and the verbs claims are made with.
VERB = re.compile(
    r"^(?:is|are|was|were|be|been|being|can|could|will|would|should|must|may|might|has|have|had|do|does|did|"
    r"use[sd]?|using|reduc\w+|avoid\w*|hid(?:e|es|ing)|improv\w+|increas\w+|caus\w+|leads?|results?|requires?|"
    r"helps?|allows?|enables?|makes?|keeps?|limits?|lowers?|eliminat\w+|prevents?|minimi[sz]\w+|overlaps?|"
    r"achiev\w+|provides?|introduc\w+|appl(?:y|ies|ied)|performs?|mitigat\w+|address\w*|speeds?|boosts?|spills?|"
    r"stalls?|serializ\w+|fuses?|fused|loads?|stores?|saves?|gives?|gains?|suffers?|occurs?|happens?|means?|"
    r"becomes?|remains?|depends?|needs?|takes?|runs?|wastes?|exceeds?|outperforms?|amortiz\w+|benefits?)$", re.I)
PREPOSITION = re.compile(r"^(?:of|in|for|with|to|from|by|on|at|into|than|as|like|via|about|under|over|between|through|"
                         r"within|across|per|without|against|among|onto|upon)$", re.I)
# A name after these words is an example or an item, not what the sentence is about.
PASSING_LEAD = re.compile(r"(?:such as|e\.g\.?,?|i\.e\.?,?|including|like|for example,?|for instance,?|namely|"
                          r"etc\.?|or|and)\s*$", re.I)
# A configuration field: an identifier-like key with a value ("num_stages=n", "CUTLASS_FILE : path", "- `x_ptr` -"),
# a flag, or a default. Not "Risks : ..." or "When to apply : ...": a catalogue's prose fields are claims.
CONFIG = re.compile(r"^\s*[-*]?\s*`?[A-Za-z_][\w.]*(?:_[\w.]+|\(\))`?\s*(?:[:=]|\s[-–—]\s)|^\s*[-*]?\s*\w+=\S|"
                    r"(?<!\w)--[a-z][\w-]*|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\s*=|\bdefaults? (?:to|is)\b|\(default\b", re.I)
LEAD_LINE = re.compile(r"(?::|\bfollowing|\bas follows|\bbelow)\s*$", re.I)
REMEDY_VERB = re.compile(r"\b(?:use|apply|enable|add|set|try|replace|switch|fuse|tile|pad|unroll)\b", re.I)

def statement_signals(text: str, span: tuple[int, int] | None, kind: str,
                      similarity: tuple[float, float] | None = None) -> dict[str, float]:
    """The sentence-level signals of a claim about a node of `kind` ("Bottleneck", "Technique",
    "ProtocolStep"); `span` is where the sentence names it (None: only a heading or meaning links it);
    `similarity` is (the sentence's cosine with the node's text, that minus the best other node's)."""
    role = role_of(text, span) if span else "absent"
    out = {
        "role_subject": 1.0 if role == "subject" else 0.0,
        "role_object": 1.0 if role == "object" else 0.0,
        "in_list": 1.0 if span and in_list(text, span) else 0.0,
        "in_brackets": 1.0 if span and in_brackets(text, span[0]) else 0.0,
        "in_code": 1.0 if span and in_code(text, span) else 0.0,
        "config_field": 1.0 if CONFIG.search(text) else 0.0,
        "lead_line": 1.0 if LEAD_LINE.search(text) else 0.0,
        "heading_only": 0.0 if span else 1.0,
        "bottleneck_instruction": 1.0 if kind == "Bottleneck" and (IMPERATIVE.match(text) or (
            span and REMEDY_VERB.search(text[max(0, span[0] - 30):span[0]]))) else 0.0,
        "protocol_untimed": 1.0 if kind == "ProtocolStep" and not TIMING.search(_outside(text, span)) else 0.0,
    }
    sim, margin = similarity if similarity is not None else (0.0, 0.0)
    out["sentence_similarity"] = sim
    out["similarity_margin"] = margin
    return out


def role_of(text: str, span: tuple[int, int]) -> str:
    """"subject" when the name comes before its clause's first verb and after no preposition, "object" when
    it follows a verb by at most three words none of which is a preposition, else "other"."""
    start, end = _clause(text, span[0])
    words = [(m.group(0), m.start() + start) for m in _TOKEN.finditer(text[start:end])]
    before = [w for w, at in words if at < span[0]]
    after_verbs = [i for i, (w, at) in enumerate(words) if at < span[0] and VERB.match(w)]
    if not after_verbs:
        return "other" if before and PREPOSITION.match(before[-1]) else "subject"
    between = [w for w, at in words[after_verbs[-1] + 1:] if at < span[0]]
    if len(between) <= 3 and not any(PREPOSITION.match(w) for w in between):
        return "object"
    return "other"


def in_list(text: str, span: tuple[int, int]) -> bool:
    """The name is one item of a series ("A, B and C") or an example ("such as X")."""
    start, end = _clause(text, span[0])
    if PASSING_LEAD.search(text[max(start, span[0] - 25):span[0]]) and "," in text[start:end]:
        return True
    if re.search(r"(?:such as|e\.g\.|including|for example)\s*$", text[max(start, span[0] - 25):span[0]], re.I):
        return True
    return text.count(",", start, end) >= 2 and (
        "," in text[max(start, span[0] - 3):span[0]] or "," in text[span[1]:span[1] + 2])


def in_brackets(text: str, at: int) -> bool:
    """An unclosed bracket before the name: it is an aside."""
    depth = 0
    for ch in text[:at]:
        depth += 1 if ch in "([" else -1 if ch in ")]" and depth else 0
    return depth > 0


def in_code(text: str, span: tuple[int, int]) -> bool:
    """The name is part of an identifier, a call or an assignment."""
    left, right = text[max(0, span[0] - 1):span[0]], text[span[1]:span[1] + 2]
    return bool(re.match(r"[_.=/]", left) or re.match(r"[_(=.]\w|\(", right) or "_" in text[span[0]:span[1]])


def similarity_pair(sentence_vector, node_id: str, node_vectors: Mapping[str, object],
                    kind_of: Mapping[str, str]) -> tuple[float, float]:
    """The sentence's cosine with the node's text, and how far that is above the best other node of its kind."""
    own = node_vectors.get(node_id)
    if own is None or sentence_vector is None:
        return (0.0, 0.0)
    sim = float(sentence_vector @ own)
    kind = kind_of.get(node_id)
    others = [float(sentence_vector @ v) for i, v in node_vectors.items() if i != node_id and kind_of.get(i) == kind]
    return (round(sim, 4), round(sim - max(others, default=0.0), 4))


def _clause(text: str, at: int) -> tuple[int, int]:
    starts = [m.end() for m in CLAUSE_BREAK.finditer(text, 0, at)]
    after = CLAUSE_BREAK.search(text, at)
    return (starts[-1] if starts else 0, after.start() if after else len(text))


def _outside(text: str, span: tuple[int, int] | None) -> str:
    return text if span is None else text[:span[0]] + " " + text[span[1]:]
