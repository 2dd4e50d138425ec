"""Linking passages to the graph by meaning: which Bottlenecks, Techniques, Reviewer protocol steps
and Metrics a passage is about.

Three signals, combined by the extractor:
- names: the lexicon finds a node's name, id or a practitioner's alias in a sentence or heading;
- meaning: each passage, with its heading path, is embedded once and ranked against the skill
  texts by the hybrid retriever (BM25 with the jargon table, plus cosine similarity);
- side tables: the same passage vectors are compared with the ProtocolStep and Metric texts,
  which the retriever does not index.

Without an embedding model everything still works from names and words alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kskill.retrieval import Retriever
from kskill.retrieval.lexical import concept_matcher, terms, words

from .lexicon import Lexicon, Mention
from .passages import Passage

SKILLS = ("Bottleneck", "Technique")
CONTEXT_CHARS = 800  # about 180 tokens: the model's cost grows with length, and the start says what a passage is about
MEANING_K = 4
# Hybrid scores of a whole passage against one skill text: above this the passage is about the node.
# Chosen on the tuning half of eval/ingest/corpus: passages that explain a node score 0.25-0.5,
# passages that merely share words with it stay under 0.2.
ABOUT = 0.22
SIDE_ABOUT = 0.45  # cosine of a passage and a protocol step's text that marks it as about the step
METRIC_SAME = 0.55  # cosine of a metric phrase ("memory throughput") and a metric's name and description


@dataclass
class PassageLinks:
    """What one passage is about: node id -> score, from meaning (skills) and the side tables."""

    meaning: dict[str, float] = field(default_factory=dict)
    protocol: dict[str, float] = field(default_factory=dict)

    def top(self, kind_of: Mapping[str, str], kind: str) -> str | None:
        """The node of `kind` the passage is most about, when it ranks among the first two and scores
        above ABOUT."""
        ranked = [(s, i) for i, s in self.meaning.items() if kind_of.get(i) == kind and s >= ABOUT]
        best = max(ranked)[1] if ranked else None
        return best if best is not None and self.ranks(best) < 2 else None

    def ranks(self, node_id: str) -> int:
        """The node's rank among what the passage is about (0 best); a large number when absent."""
        order = sorted(self.meaning, key=lambda i: -self.meaning[i])
        return order.index(node_id) if node_id in order else 99


class SideTable:
    """A few node texts (protocol steps, metrics) compared by cosine with already-embedded text."""

    def __init__(self, rows: Sequence[Mapping[str, str]], embedder=None):
        self.ids = [r["id"] for r in rows]
        self.texts = [f"{r.get('name') or r['id']}. {r.get('description') or ''}".strip() for r in rows]
        self.vectors = embedder.embed(self.texts) if embedder is not None and rows else None
        self.words = [set(terms(t)) for t in self.texts]

    def scores(self, vectors: np.ndarray | None, texts: Sequence[str]) -> list[dict[str, float]]:
        if not self.ids:
            return [{} for _ in texts]
        if self.vectors is not None and vectors is not None:
            sims = vectors @ self.vectors.T
            return [{self.ids[j]: float(row[j]) for j in np.argsort(-row)[:3]} for row in sims]
        out = []  # no model: the share of a text's words found in the query
        for text in texts:
            query = set(terms(text))
            ranked = sorted(((len(query & w) / max(len(w), 1), i) for i, w in zip(self.ids, self.words)), reverse=True)
            out.append({i: s for s, i in ranked[:3]})
        return out


class EntityLinker:
    """Names, meaning and side tables over the nodes known when ingest starts."""

    def __init__(self, nodes: Iterable[Mapping[str, str]], metrics: Sequence[Mapping[str, str]] = (),
                 retriever: Retriever | None = None):
        nodes = list(nodes)
        self.kind_of = {n["id"]: n["kind"] for n in nodes}
        self.name_of = {n["id"]: n.get("name") or n["id"] for n in nodes}
        self.lexicon = Lexicon(nodes)
        self.retriever = retriever
        self.embedder = retriever.embedder if retriever is not None else None
        self.protocol = SideTable([n for n in nodes if n["kind"] == "ProtocolStep"], self.embedder)
        self.metrics = SideTable(metrics, self.embedder)
        self.metric_names = {m["id"] for m in metrics}
        self.metric_words = {m["id"]: set(terms(f"{m['id'].replace('_', ' ')} {m.get('name') or ''}")) for m in metrics}
        self._mentions: dict[str, list[Mention]] = {}
        self._concepts = {n["id"]: _concepts(f"{n.get('name') or ''} {n.get('description') or ''}") for n in nodes}
        self._texts = {n["id"]: f"{n.get('name') or n['id']}. {n.get('description') or ''}".strip() for n in nodes}
        self._vectors: dict[str, np.ndarray] | None = None

    def node_vectors(self) -> dict[str, np.ndarray]:
        """Each node's name and description embedded once (empty without a model)."""
        if self._vectors is None:
            ids = list(self._texts)
            vectors = self.embedder.embed([self._texts[i] for i in ids]) if self.embedder is not None and ids else []
            self._vectors = dict(zip(ids, vectors))
        return self._vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray | None:
        """Sentences embedded in one batch (None without a model)."""
        return self.embedder.embed(list(texts)) if self.embedder is not None and texts else None

    def shares_concepts(self, text: str, node_id: str) -> bool:
        """True when the text uses jargon (the retrieval concept table) that the node's own text uses."""
        return bool(_concepts(text) & self._concepts.get(node_id, set()))

    def mentions(self, text: str) -> list[Mention]:
        """Nodes named in a text (cached: headings repeat)."""
        if text not in self._mentions:
            self._mentions[text] = self.lexicon.mentions(text)
        return self._mentions[text]

    def link(self, passages: Sequence[Passage]) -> list[PassageLinks]:
        """What each passage is about, by meaning; one batch of embeddings for the whole document."""
        if not passages:
            return []
        contexts = [p.context()[:CONTEXT_CHARS] for p in passages]
        vectors = None
        if self.embedder is not None:
            vectors = self.embedder.embed([self.retriever.query_text(c) for c in contexts])
        links = [PassageLinks() for _ in passages]
        if self.retriever is not None:
            ranked = self.retriever.search_batch(contexts, SKILLS, MEANING_K, vectors=vectors)
            for link, matches in zip(links, ranked):
                link.meaning = {m.id: m.score for m in matches if m.id in self.kind_of}
        for link, scores in zip(links, self.protocol.scores(vectors, contexts)):
            link.protocol = scores
        return links

    def metric(self, phrase: str) -> str | None:
        """The vocabulary metric a phrase names ("memory throughput", "registers per thread"), if one clearly does."""
        words = re.sub(r"[^a-z0-9_ ]", " ", phrase.lower()).split()
        joined = "_".join(words)
        if joined in self.metric_names:
            return joined
        if self.embedder is None:
            return self._metric_by_words(words)
        scores = self.metrics.scores(self.embedder.embed([phrase]), [phrase])[0]
        best = max(scores, key=scores.get) if scores else None
        return best if best is not None and scores[best] >= METRIC_SAME else None

    def _metric_by_words(self, words: list[str]) -> str | None:
        """Without a model: the metric whose name holds every word of the phrase, with fewest others."""
        query = set(terms(" ".join(words)))
        fits = [(len(names - query), i) for i, names in self.metric_words.items() if query and query <= names]
        return min(fits)[1] if fits else None


def _concepts(text: str) -> set[str]:
    return set(concept_matcher().find(words(text)))
