"""The retrieval snapshot on disk: records and vectors kept in step with the graph.

The snapshot lives in `<home>/retrieval/<model fingerprint>/` (or `lexical/` without a
model) and is derived data: the graph is the source of truth. On open, a cheap fingerprint
query tells whether the graph changed since the snapshot was written; if it did, the
records are read again and only new or edited texts are embedded. A snapshot that is
corrupt, of another format or built by another model is rebuilt from scratch with a warning.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path

import numpy as np

from kskill.graph_schema.store import GraphStore

from .embedder import Embedder
from .errors import IndexUnusable
from .index import VectorIndex, atomic_write
from .records import SearchRecord, graph_fingerprint, records_from_store
from .search import Retriever

log = logging.getLogger(__name__)

FORMAT = 1


def snapshot_folder(home: Path, embedder: Embedder | None) -> Path:
    return Path(home) / "retrieval" / (embedder.fingerprint if embedder else "lexical")


def open_retriever(store: GraphStore, home: Path, embedder: Embedder | None,
                   fingerprint: str | None = None) -> Retriever:
    """A Retriever over the graph's searchable nodes, from the snapshot when it is current;
    `fingerprint` is the graph's, when the caller has just computed it."""
    folder = snapshot_folder(home, embedder)
    fingerprint = fingerprint or graph_fingerprint(store)
    records, vectors = _load(folder, embedder)
    if records is not None and _manifest(folder).get("graph") == fingerprint:
        return Retriever(records.values(), embedder, vectors)
    retriever = Retriever([], embedder, VectorIndex(embedder.dim) if embedder else None)
    _catch_up(retriever, records or {}, vectors, records_from_store(store))
    _save(folder, retriever, fingerprint)
    return retriever


def refresh(retriever: Retriever, store: GraphStore, home: Path) -> None:
    """Bring an open Retriever in step with the graph (after ingest) and write the snapshot."""
    folder = snapshot_folder(home, retriever.embedder)
    fingerprint = graph_fingerprint(store)
    current = records_from_store(store)
    known = dict(retriever.records)
    changed = [r for r in current if known.get(r.id) != r]
    gone = set(known) - {r.id for r in current}
    if gone:
        retriever.remove(gone)
    if changed:
        retriever.add(changed)
    _save(folder, retriever, fingerprint)


def _catch_up(retriever: Retriever, old: dict[str, SearchRecord], old_vectors: VectorIndex | None,
              current: list[SearchRecord]) -> None:
    """Fill an empty Retriever with `current`, reusing the old vectors of texts that did not change."""
    def unchanged(r: SearchRecord) -> bool:
        before = old.get(r.id)
        return old_vectors is not None and before is not None and (before.kind, before.text) == (r.kind, r.text)

    reusable = [r for r in current if unchanged(r)]
    fresh = [r for r in current if not unchanged(r)]
    retriever.add(reusable, embed=False)
    by_kind: dict[str, list[str]] = defaultdict(list)
    for r in reusable:
        by_kind[r.kind].append(r.id)
    for kind, ids in by_kind.items():
        retriever.vectors.upsert(kind, ids, np.stack([old_vectors.vector(i, kind) for i in ids]))
    retriever.add(fresh)
    if reusable or fresh:
        log.info("retrieval index updated: %d texts embedded, %d reused", len(fresh), len(reusable))


def _manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / "snapshot.json").read_text())
    except (OSError, ValueError):
        return {}


def _load(folder: Path, embedder: Embedder | None) -> tuple[dict[str, SearchRecord] | None, VectorIndex | None]:
    """The saved records and vectors, or (None, None) when there is nothing usable."""
    manifest = _manifest(folder)
    if not manifest:
        return None, None
    model = embedder.fingerprint if embedder else None
    try:
        if manifest.get("format") != FORMAT or manifest.get("model") != model:
            raise IndexUnusable(f"snapshot was written by format {manifest.get('format')} "
                                f"for model {manifest.get('model')!r}")
        rows = json.loads((folder / "records.json").read_text())
        records = {row["id"]: SearchRecord(**{**row, "about": tuple(row.get("about", ()))}) for row in rows}
        vectors = VectorIndex.load(folder, embedder.dim) if embedder else None
        if vectors is not None and set(vectors.keys()) != set(records):
            raise IndexUnusable("the vectors and the records of the snapshot disagree")
        return records, vectors
    except IndexUnusable as exc:
        log.warning("rebuilding the retrieval index in %s: %s", folder, exc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("rebuilding the retrieval index in %s: its records cannot be read (%s)", folder, exc)
    return None, None


def _save(folder: Path, retriever: Retriever, fingerprint: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if retriever.vectors is not None:
        retriever.vectors.save(folder)
    rows = [{"id": r.id, "kind": r.kind, "name": r.name, "text": r.text, "about": list(r.about)}
            for r in retriever.records.values()]
    atomic_write(folder / "records.json", json.dumps(rows).encode())
    model = retriever.embedder.fingerprint if retriever.embedder else None
    atomic_write(folder / "snapshot.json",
                  json.dumps({"format": FORMAT, "graph": fingerprint, "model": model}).encode())
