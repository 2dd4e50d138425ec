"""Sentence segmentation with offsets: the units claims are extracted from and quoted as evidence.

Paragraphs, list items, table rows and headings always end a sentence; inside a paragraph a
full stop, question or exclamation mark ends one unless it belongs to an abbreviation or a
number ("e.g.", "1.5x"). On PDF pages a line break before a capital letter ends one too,
since slides rarely punctuate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .loaders import Document

MAX_SENTENCE_CHARS = 400  # longer runs (tables flattened into prose, code) are cut at clause marks
MIN_SENTENCE_CHARS = 12

_BLOCK_BREAK = re.compile(r"\n[ \t]*\n|\f|\n(?=[ \t]*(?:[-*+|>]|\d{1,2}[.)])[ \t])")
_PDF_LINE_BREAK = re.compile(r"\n(?=[ \t]*[A-Z0-9\"'(])")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9`])")
_CLAUSE_END = re.compile(r"(?<=[;:])\s+")
_ABBREVIATIONS = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|Fig|Eq|Sec|approx|resp|No|al)\.|\b[A-Z]\.)$")


@dataclass(frozen=True)
class Sentence:
    text: str  # whitespace collapsed
    start: int  # offset of its first character in Document.text
    end: int


def sentences(doc: Document) -> list[Sentence]:
    """All sentences of a document, in order."""
    return [s for block in sentence_blocks(doc) for s in block]


def sentence_blocks(doc: Document) -> list[list[Sentence]]:
    """The sentences of each block (paragraph, list item, table row, heading), blocks in order."""
    out: list[list[Sentence]] = []
    for start, end in _blocks(doc):
        block = []
        for s, e in _split_block(doc.text, start, end, pdf=doc.kind == "pdf"):
            text = " ".join(doc.text[s:e].split()).strip(" |")
            if len(text) >= MIN_SENTENCE_CHARS and any(ch.isalpha() for ch in text):
                block.append(Sentence(text, s, e))
        if block:
            out.append(block)
    return out


def _blocks(doc: Document) -> Iterator[tuple[int, int]]:
    """Spans between hard breaks: blank lines, list items, table rows, page breaks and headings."""
    cuts = {0, len(doc.text)}
    for m in _BLOCK_BREAK.finditer(doc.text):
        cuts.update((m.start(), m.end()))
    for section in doc.sections:
        line_end = doc.text.find("\n", section.start)
        cuts.update((section.start, line_end if line_end >= 0 else len(doc.text)))
    ordered = sorted(cuts)
    for start, end in zip(ordered, ordered[1:]):
        if doc.text[start:end].strip():
            yield start, end


def _split_block(text: str, start: int, end: int, pdf: bool) -> Iterator[tuple[int, int]]:
    cuts = [start]
    for m in _SENTENCE_END.finditer(text, start, end):
        if not _ABBREVIATIONS.search(text[max(start, m.start() - 8):m.start()]):
            cuts.append(m.end())
    if pdf:
        cuts.extend(m.end() for m in _PDF_LINE_BREAK.finditer(text, start, end)
                    if not text[max(start, m.start() - 1):m.start()].endswith((",", "(", "-")))
    cuts = sorted(set(cuts)) + [end]
    for s, e in zip(cuts, cuts[1:]):
        yield from _cap_length(text, s, e)


def _cap_length(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    if end - start <= MAX_SENTENCE_CHARS:
        yield start, end
        return
    pos = start
    for m in _CLAUSE_END.finditer(text, start, end):
        if m.end() - pos >= MIN_SENTENCE_CHARS and m.end() - pos <= MAX_SENTENCE_CHARS:
            yield pos, m.end()
            pos = m.end()
    while end - pos > MAX_SENTENCE_CHARS:
        cut = text.rfind(" ", pos, pos + MAX_SENTENCE_CHARS)
        cut = cut if cut > pos else pos + MAX_SENTENCE_CHARS
        yield pos, cut
        pos = cut
    if end > pos:
        yield pos, end
