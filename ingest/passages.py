"""Passages: runs of sentences under one heading path (and on one page), the units linked to the graph.

A passage keeps the titles of the sections holding it (outermost first) and its page, so that a
claim read from it can use its heading context and be located. Headings themselves (and a slide's
title line) are kept apart: they give context, and are never quoted as evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .loaders import Document
from .segment import Sentence, sentence_blocks

MAX_PASSAGE_CHARS = 700  # about 150 tokens: what the embedding model reads well, and cheap
# Verbs, written in lower case so that a title's capitalised words are none ("Memory Access Patterns").
_VERB_WORDS = (r"(?:need|use|make|get|take|keep|give|allow|help|let|run|reach|cause|avoid|reduce|hide|improve|require|load|"
               r"store|compute|recompute|write|read|launch|fuse|overlap|split|pack|transpose|copy|double|save|eliminate|"
               r"prevent|minimi|mitigat|speed|boost|fix|remov|increas|decreas|lower|limit|serializ|stall|wast|exceed|fit|"
               r"miss|map|assign|access|issue|schedul|spill|wait|achiev|deliver|outperform|support|provide|enable|lead|"
               r"result|become|remain|depend|determin|matter|work|apply|call|mean|cost|add|gave|give|hurt|slow|wins?\b)")
_VERB = re.compile(
    r"\b(?i:is|are|was|were|be|been|being|can|could|will|would|should|must|may|might|has|have|had|do|does|did)\b|"
    rf"\b{_VERB_WORDS}\w*\b|"
    r"\b(?i:don|doesn|isn|aren|can|won|didn)[’']t\b|"
    r"\b[a-z]{3,}(?:es|ed|ing)\b|->|→|=|\d+(?:\.\d+)?\s*(?:x|×|%)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")
# A verb opening the sentence (after a list mark) or a label's colon with a capital, in its bare form or with -s: "Run a
# few warmup iterations (e.g., 5-10) to stabilize GPU temperature", "Step two: Use the same inputs for every
# candidate", "Uses a persistent kernel"; not "Writing GEMV in Python" nor "Chunked vocab iteration : ...".
_IMPERATIVE = re.compile(rf"(?:^|:\s+)[^A-Za-z]*(?i:{_VERB_WORDS}(?:e|ze|se|te)?(?:e?s)?)\b")


@dataclass(frozen=True)
class Passage:
    sentences: tuple[Sentence, ...]
    headings: tuple[str, ...]  # titles of the enclosing sections, outermost first
    page: int = 0  # 1-based page of a PDF; 0 for documents without pages

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)

    @property
    def start(self) -> int:
        return self.sentences[0].start

    def context(self) -> str:
        """The passage with its heading path, as the embedding model reads it."""
        path = " > ".join(self.headings[-2:])  # the nearest two titles say what the passage is about
        return f"{path}. {self.text}" if path else self.text


def passages(doc: Document) -> list[Passage]:
    """The document's body as passages, headings left out. Consecutive blocks under the same
    headings and page join until a passage reaches MAX_PASSAGE_CHARS."""
    titles = _titles_by_start(doc)
    out: list[Passage] = []
    current: list[Sentence] = []
    key: tuple[tuple[str, ...], int] = ((), 0)
    for block in sentence_blocks(doc):
        body = [s for s in block if not _is_heading(doc, s, titles)]
        if not body:
            continue
        block_key = (tuple(reversed(doc.section_chain(body[0].start))), doc.page_of(body[0].start) if doc.pages else 0)
        size = sum(len(s.text) + 1 for s in current)
        if current and (block_key != key or size + len(body[0].text) > MAX_PASSAGE_CHARS):
            out.append(Passage(tuple(current), *key))
            current = []
        current.extend(body)
        key = block_key
    if current:
        out.append(Passage(tuple(current), *key))
    return out


def heading_sentences(doc: Document) -> set[int]:
    """Start offsets of the sentences that are section titles (headings, a slide's title line)."""
    titles = _titles_by_start(doc)
    return {s.start for block in sentence_blocks(doc) for s in block if _is_heading(doc, s, titles)}


def _titles_by_start(doc: Document) -> dict[int, str]:
    return {s.start: _norm(s.title) for s in doc.sections}


def _is_heading(doc: Document, sentence: Sentence, titles: dict[int, str]) -> bool:
    for start, title in titles.items():
        # Only markup, whitespace or a slide's page number between the section start and the sentence.
        if start <= sentence.start and not doc.text[start:sentence.start].strip(" #=*-~^\t\n\f0123456789"):
            text = _norm(sentence.text)
            return bool(title) and (text in title or title in text) and len(text) <= len(title) + 12
    return False


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def is_statement(text: str) -> bool:
    """A sentence that can state a claim: some words and a verb (or an arrow, a comparison, a factor),
    not a bare title such as "CUTLASS and FlashAttention-3"."""
    words = _WORD.findall(text)
    if len(words) < 5:
        return False
    return _VERB.search(text) is not None or (_IMPERATIVE.search(text) is not None and _sentence_case(words))


def opens_with_imperative(text: str) -> bool:
    """The sentence (or its label's part after a colon) opens with a verb's bare form: "Run multiple iterations ..."."""
    return _IMPERATIVE.search(text) is not None


def _sentence_case(words: list[str]) -> bool:
    """Most longer words past the first in lower case: a sentence, not a title ("Reduce Memory Traffic With Fusion")."""
    longer = [w for w in words[1:] if len(w) > 3 and w.isalpha()]
    return bool(longer) and 2 * sum(w[0].islower() for w in longer) >= len(longer)


# What opens a list item: a bullet or a number.
ITEM_MARK = re.compile(r"[ \t]*(?:[-*+•]|\d{1,2}[.)])[ \t]+")
# The label that opens a list item: "- **Cache hints:** Using ... improves L2 hit rates" (the loader blanks the bold
# marks, so the label is what comes before the item's first colon).
ITEM_LABEL = re.compile(ITEM_MARK.pattern + r"(?:\*\*)?([^:.*\n]{2,60}?)[ \t]*(?:\*\*)?:(?:\*\*)?(?=\s)")


def in_item(text: str, at: int) -> bool:
    """Whether position `at` of the document is on a line that opens a list item ("1. Run a few warmup iterations
    ... for statistical significance")."""
    return ITEM_MARK.match(text, _line_start(text, at)) is not None


def item_label(text: str, at: int) -> str:
    """The label of the list item whose line holds position `at` of the document, or ""."""
    found = ITEM_LABEL.match(text, _line_start(text, at))
    return found.group(1) if found and found.end() <= at else ""


# A nested item's label that names what the item is to the item above it: its remedy ("1. **Warp Divergence**:" and
# under it "- Symptoms: ..." and "- Solution: Reorganize algorithms ..."; heldout37's profiling chapter).
REMEDY_FIELD = re.compile(r"(?:suggested |possible )?(?:solutions?|fix(?:es)?|remed(?:y|ies)|mitigations?|workarounds?)",
                          re.I)


def remedied_item(text: str, at: int) -> str:
    """Where the list item whose line holds position `at` is labelled as a remedy ("- Solution: ..."), the label of
    the item that holds it one level up (what it remedies), else ""."""
    line = _line_start(text, at)
    field = ITEM_LABEL.match(text, line)
    return _parent_label(text, line) if field and REMEDY_FIELD.fullmatch(field.group(1).strip()) else ""


def _parent_label(text: str, line: int) -> str:
    """The label of the nearest line above `line` that opens an item at a smaller indent, within the same list."""
    indent = _indent(_line(text, line))
    while line > 0:
        line = _line_start(text, line - 1)
        body = _line(text, line)
        if not body.strip():
            continue
        if _indent(body) < indent:
            found = ITEM_LABEL.match(text, line)  # an item's line (ITEM_LABEL opens with ITEM_MARK), labelled
            return found.group(1) if found else ""
        if not ITEM_MARK.match(text, line) and _indent(body) == 0:
            return ""
    return ""


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _line(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))
