"""One call for callers that just want answers: `search(store, text, kinds, k, home=...)`.

The CLI, the Diagnoser and the Planner's fallback use this. Within a process, the loaded
model and the open Retriever are kept per (store, home, model), and each call checks the
graph's fingerprint, so a long run sees nodes that ingest added without reloading anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kskill.graph_schema.store import GraphStore

from .embedder import Embedder, load_embedder
from .records import graph_fingerprint
from .search import Match, Retriever, Via
from .snapshot import open_retriever

_UNSET = object()
_embedders: dict[str, Embedder | None] = {}
_retrievers: dict[tuple[int, str, str], tuple[str, Retriever]] = {}


def embedder_for(model: str | Path | None = None) -> Embedder | None:
    """The embedder for a model path (None: the default package), loaded once per process."""
    key = str(model or "")
    if key not in _embedders:
        _embedders[key] = load_embedder(model)
    return _embedders[key]


def retriever_for(store: GraphStore, home: Path, model: str | Path | None = None,
                  embedder: Embedder | None | object = _UNSET) -> Retriever:
    """An open Retriever in step with the store; `embedder=None` asks for lexical ranking only."""
    chosen = embedder_for(model) if embedder is _UNSET else embedder
    key = (id(store), str(Path(home)), chosen.fingerprint if chosen else "lexical")
    fingerprint = graph_fingerprint(store)
    cached = _retrievers.get(key)
    if cached and cached[0] == fingerprint:
        return cached[1]
    retriever = open_retriever(store, Path(home), chosen, fingerprint)
    _retrievers[key] = (fingerprint, retriever)
    return retriever


def search(store: GraphStore, text: str, kinds: Iterable[str] | None = None, k: int = 5, *,
           home: Path, model: str | Path | None = None, via: Via | None = None) -> list[Match]:
    """The k best matches for `text` among the given kinds (Technique, Bottleneck, FailurePattern,
    Evidence; all by default), hybrid-ranked when the embedding model is installed."""
    return retriever_for(store, home, model).search(text, kinds, k, via)
