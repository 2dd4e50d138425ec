"""Word-level ranking: tokenizing, jargon expansion and Okapi BM25 over search records.

This ranker needs nothing but numpy, so search keeps working where the embedding model
is not installed. Scores are normalised to [0, 1] against the best score the query could
reach (every query term present at saturation in a short document), which makes them
comparable across queries and lets the same thresholds apply to every query.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .records import SearchRecord
from .vocabulary import CONCEPTS

K1 = 1.2
B = 0.75
NAME_WEIGHT = 2  # a record's name and id words count this many times over its description

STOP_WORDS = frozenset("""
a an and are as at be been but by can do does for from has have how i if in into is it its
of on or so than that the their them then there these this to too was we were what when where
which while who why will with without you your my our not no all any each one some more most
""".split())

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    """A light suffix stripper: plurals, -ing, -ed and a final e (tiles, tiling, tiled -> til)."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-case stemmed words, camelCase and snake_case split, stop words kept (phrases need them)."""
    text = _CAMEL.sub(" ", text).lower()
    return [stem(w) for w in _WORD.findall(text)]


class ConceptMatcher:
    """Finds the vocabulary's phrases in a word sequence."""

    def __init__(self, concepts: dict[str, tuple[str, tuple[str, ...]]] = CONCEPTS):
        self.phrases: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        for concept, (_, aliases) in concepts.items():
            for alias in aliases:
                seq = tuple(words(alias))
                if seq:
                    self.phrases.setdefault(seq[0], []).append((seq, concept))
        for options in self.phrases.values():
            options.sort(key=lambda p: -len(p[0]))
        self.plain = {concept: plain for concept, (plain, _) in concepts.items()}

    def find(self, seq: Sequence[str]) -> list[str]:
        """The concepts whose phrases occur in `seq`, in order of first occurrence."""
        found: dict[str, None] = {}
        for i, word in enumerate(seq):
            for phrase, concept in self.phrases.get(word, ()):
                if tuple(seq[i:i + len(phrase)]) == phrase:
                    found.setdefault(concept)
        return list(found)


_MATCHER: ConceptMatcher | None = None


def concept_matcher() -> ConceptMatcher:
    global _MATCHER
    if _MATCHER is None:
        _MATCHER = ConceptMatcher()
    return _MATCHER


def terms(text: str) -> list[str]:
    """The terms BM25 counts: content words plus one `#concept` term per jargon phrase found."""
    seq = words(text)
    concepts = concept_matcher().find(seq)
    return [w for w in seq if w not in STOP_WORDS] + [f"#{c}" for c in concepts]


def expand_query(text: str) -> str:
    """The query with the plain names of the concepts its jargon names, for the embedding model."""
    matcher = concept_matcher()
    lowered = text.lower()
    extra = [matcher.plain[c] for c in matcher.find(words(text)) if matcher.plain[c] not in lowered]
    return f"{text} ({'; '.join(extra)})" if extra else text


def document_terms(record: SearchRecord, extra_text: str = "") -> list[str]:
    """A record's terms: name and id words weighted up, then its text (and any extra text)."""
    head = f"{record.name} {record.id.replace('_', ' ')}"
    return terms(head) * NAME_WEIGHT + terms(record.text) + (terms(extra_text) if extra_text else [])


class BM25Index:
    """Okapi BM25 over a fixed list of documents, with an inverted index of numpy arrays."""

    def __init__(self, documents: Sequence[Sequence[str]]):
        self.size = len(documents)
        lengths = np.array([len(d) for d in documents], dtype=np.float32)
        avg = float(lengths.mean()) if self.size else 1.0
        norm = K1 * (1 - B + B * lengths / max(avg, 1e-9))
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for pos, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                docs, weights = postings.setdefault(term, ([], []))
                docs.append(pos)
                weights.append(tf * (K1 + 1) / (tf + norm[pos]))
        self.postings = {
            term: (np.array(docs, dtype=np.int64), np.array(weights, dtype=np.float32) * self.idf(len(docs)))
            for term, (docs, weights) in postings.items()
        }

    def idf(self, df: int) -> float:
        return math.log(1 + (self.size - df + 0.5) / (df + 0.5))

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """Normalised scores of every document for the query (zeros when nothing matches)."""
        scores = np.zeros(self.size, dtype=np.float32)
        ideal = 0.0
        for term in dict.fromkeys(query_terms):
            hit = self.postings.get(term)
            if hit is None:
                # A word no document has still counts against the query: it was asked for.
                ideal += self.idf(1) * (K1 + 1)
                continue
            ideal += self.idf(len(hit[0])) * (K1 + 1)
            scores[hit[0]] += hit[1]
        return scores / ideal if ideal > 0 else scores
