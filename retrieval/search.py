"""Ranking search records for a free-text query: lexical, vector, or both fused.

`Retriever` holds the records in memory with a BM25 index and, when an embedding model is
at hand, a FAISS index. `search` answers with `Match`es scored in [0, 1]. Hybrid ranking
takes the best candidates of both rankers and orders them by a weighted sum of cosine
similarity and normalised BM25 score, which raised recall on eval/retrieval/queries.yaml
(see eval/retrieval_eval.py). Two calibrated thresholds per ranking say whether a match is
the "same entity" (ingest merges into it) or merely "related" (shown as a suggestion).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .embedder import Embedder
from .errors import QueryError
from .index import VectorIndex
from .lexical import BM25Index, document_terms, expand_query, terms
from .records import SearchRecord, check_kinds

Via = Literal["lexical", "vector", "hybrid"]

MAX_QUERY_CHARS = 2000  # longer text keeps its head and, mostly, its tail (where logs put the error)
QUERY_HEAD_CHARS = 500
HYBRID_VECTOR_WEIGHT = 0.3  # share of cosine in the fused score; chosen on the evaluation set
CANDIDATES = 50  # per ranker, before fusion


@dataclass(frozen=True)
class Thresholds:
    same_entity: float  # at or above: the query names this very node (ingest merges into it)
    related: float  # at or above: worth suggesting


# Calibrated with `python -m kskill.eval.retrieval_eval --calibrate`: "related" sits just above the
# best score of any off-topic query; "same_entity" between the scores of duplicate and of new
# candidate nodes in eval/retrieval/entities.yaml. Scores differ per ranking, so each has its own.
THRESHOLDS: dict[str, Thresholds] = {
    "lexical": Thresholds(same_entity=0.21, related=0.15),
    "vector": Thresholds(same_entity=0.74, related=0.30),
    "hybrid": Thresholds(same_entity=0.34, related=0.18),
}


@dataclass(frozen=True)
class Match:
    """One search result."""

    id: str
    kind: str
    name: str
    score: float  # in [0, 1]; comparable across queries of the same `via`
    via: Via
    about: tuple[str, ...] = ()  # for Evidence: ids of the nodes it supports

    @property
    def is_same_entity(self) -> bool:
        return self.score >= THRESHOLDS[self.via].same_entity

    @property
    def is_related(self) -> bool:
        return self.score >= THRESHOLDS[self.via].related


def clean_query(text: str) -> str:
    """The query as ranked: whitespace collapsed, huge text clipped; empty text is an error."""
    text = " ".join(str(text or "").split())
    if not text:
        raise QueryError("the search text is empty: give a few words, a metric or an error message")
    if len(text) > MAX_QUERY_CHARS:
        tail = MAX_QUERY_CHARS - QUERY_HEAD_CHARS
        text = f"{text[:QUERY_HEAD_CHARS]} ... {text[-tail:]}"
    return text


class Retriever:
    """Search over a fixed set of records; `add` and `remove` keep it in step with the graph."""

    def __init__(self, records: Iterable[SearchRecord], embedder: Embedder | None = None,
                 vectors: VectorIndex | None = None, *, expand: bool = True, evidence_in_skills: bool = True,
                 vector_weight: float = HYBRID_VECTOR_WEIGHT):
        self.embedder = embedder
        self.expand = expand
        self.evidence_in_skills = evidence_in_skills
        self.vector_weight = vector_weight
        self.records: dict[str, SearchRecord] = {}
        self.vectors = vectors if vectors is not None or embedder is None else VectorIndex(embedder.dim)
        self.add(list(records), embed=vectors is None)

    @property
    def default_via(self) -> Via:
        return "hybrid" if self.vectors is not None else "lexical"

    # --- keeping in step ---------------------------------------------------------------

    def add(self, records: Sequence[SearchRecord], embed: bool = True) -> None:
        """Add or replace records; their vectors are computed unless `embed` is False."""
        for record in records:
            self.records[record.id] = record
        if embed and self.vectors is not None and records:
            by_kind: dict[str, list[SearchRecord]] = defaultdict(list)
            for record in records:
                by_kind[record.kind].append(record)
            for kind, group in by_kind.items():
                self.vectors.upsert(kind, [r.id for r in group], self.embedder.embed([r.text for r in group]))
        self._index_words()

    def remove(self, ids: Iterable[str]) -> None:
        ids = [i for i in ids if i in self.records]
        for i in ids:
            del self.records[i]
        if self.vectors is not None:
            self.vectors.remove(ids)
        self._index_words()

    def _index_words(self) -> None:
        self._order = list(self.records.values())
        self._position = {r.id: i for i, r in enumerate(self._order)}
        kinds = np.array([r.kind for r in self._order], dtype=object)
        self._kind_masks = {kind: kinds == kind for kind in set(kinds.tolist())}
        quotes: dict[str, list[str]] = defaultdict(list)
        if self.evidence_in_skills:
            for r in self._order:
                for owner in r.about:
                    quotes[owner].append(r.text)
        self._bm25 = BM25Index([document_terms(r, " ".join(quotes.get(r.id, ()))) for r in self._order])

    # --- ranking -----------------------------------------------------------------------

    def search(self, text: str, kinds: Iterable[str] | None = None, k: int = 5, via: Via | None = None) -> list[Match]:
        """The k best matches among the given kinds (all searchable kinds by default)."""
        query = clean_query(text)
        kinds = check_kinds(kinds)
        if k < 1:
            raise QueryError(f"k must be at least 1, got {k}")
        via = via or self.default_via
        if via != "lexical" and self.vectors is None:
            raise QueryError(f"{via} search needs an embedding model, and none is loaded")
        if via == "lexical":
            scored = self._lexical(query, kinds, k)
        elif via == "vector":
            scored = self._vector(query, kinds, k)
        else:
            scored = self._hybrid(query, kinds, k)
        return [self._match(key, score, via) for key, score in scored[:k]]

    def search_batch(self, texts: Sequence[str], kinds: Iterable[str] | None = None, k: int = 5,
                     via: Via | None = None, vectors: np.ndarray | None = None) -> list[list[Match]]:
        """`search` for many texts, their embeddings computed in one batch (ingest links every passage).
        `vectors`, when given, are the texts' embeddings already computed (of `query_text(text)`)."""
        queries = [clean_query(text) for text in texts]
        kinds = check_kinds(kinds)
        via = via or self.default_via
        if via == "lexical" or not queries:
            return [self.search(query, kinds, k, via) for query in queries]
        if self.vectors is None:
            raise QueryError(f"{via} search needs an embedding model, and none is loaded")
        if vectors is None:
            vectors = self.embedder.embed([self.query_text(q) for q in queries])
        out = []
        for query, qvec in zip(queries, vectors):
            scored = self._vector(query, kinds, k, qvec) if via == "vector" else self._hybrid(query, kinds, k, qvec)
            out.append([self._match(key, score, via) for key, score in scored[:k]])
        return out

    def _lexical_scores(self, query: str, kinds: Sequence[str]) -> np.ndarray:
        scores = self._bm25.scores(terms(query))
        masks = [self._kind_masks[kind] for kind in kinds if kind in self._kind_masks]
        if len(masks) < len(self._kind_masks):
            scores = np.where(np.logical_or.reduce(masks) if masks else False, scores, 0.0)
        return scores

    def _lexical(self, query: str, kinds: Sequence[str], k: int) -> list[tuple[str, float]]:
        scores = self._lexical_scores(query, kinds)
        return [(self._order[p].id, float(scores[p])) for p in _top(scores, k)]

    def query_text(self, query: str) -> str:
        """The text the embedding model reads for a query: jargon expanded with plain names."""
        return expand_query(query) if self.expand else query

    def _query_vector(self, query: str) -> np.ndarray:
        return self.embedder.embed([self.query_text(query)])[0]

    def _vector(self, query: str, kinds: Sequence[str], k: int,
                qvec: np.ndarray | None = None) -> list[tuple[str, float]]:
        hits = self.vectors.search(self._query_vector(query) if qvec is None else qvec, kinds, k)
        return [(h.key, max(h.score, 0.0)) for h in hits]

    def _hybrid(self, query: str, kinds: Sequence[str], k: int,
                qvec: np.ndarray | None = None) -> list[tuple[str, float]]:
        pool = max(CANDIDATES, 4 * k)
        qvec = self._query_vector(query) if qvec is None else qvec
        cosine = {h.key: h.score for h in self.vectors.search(qvec, kinds, pool)}
        lexical = self._lexical_scores(query, kinds)
        for p in _top(lexical, pool):
            key = self._order[p].id
            if key not in cosine:
                vec = self.vectors.vector(key, self._order[p].kind)
                cosine[key] = float(vec @ qvec) if vec is not None else 0.0
        w = self.vector_weight
        fused = [(key, w * max(cos, 0.0) + (1 - w) * float(lexical[self._position[key]]))
                 for key, cos in cosine.items()]
        fused.sort(key=lambda pair: -pair[1])
        return fused

    def _match(self, key: str, score: float, via: Via) -> Match:
        record = self.records[key]
        return Match(id=key, kind=record.kind, name=record.name, score=round(min(score, 1.0), 4), via=via,
                     about=record.about)


def _top(scores: np.ndarray, k: int) -> list[int]:
    """Positions of the k highest positive scores, best first (ties keep record order)."""
    candidates = np.flatnonzero(scores > 0)
    if len(candidates) > k:
        candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
    return [int(p) for p in candidates[np.lexsort((candidates, -scores[candidates]))]]
