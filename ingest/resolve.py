"""Entity resolution: does a candidate name a node the graph already has, or is it new?

Order of evidence: an exact id, an exact name (case and punctuation aside), then retrieval's
calibrated "same entity" score over nodes of the same kind. A candidate none of these places
becomes a new node with status `proposed`, whose id is its name in snake case. The resolver
remembers which nodes are proposals (held as such by the graph, or proposed since), so that a
later mention of a proposal is known for one, whichever file proposed it first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from kskill.retrieval import SKILL_KINDS, Retriever

from .claims import EntityRef

MAX_ID_CHARS = 60


@dataclass(frozen=True)
class Resolution:
    ref: EntityRef  # with its id filled in
    merged: bool  # True: an existing node; False: a new, proposed one
    score: float | None = None  # retrieval's score when retrieval decided


class Resolver:
    """Resolves candidates against the nodes known when ingest started plus those it proposed since."""

    def __init__(self, nodes: Iterable[Mapping[str, str]], retriever: Retriever | None = None):
        self.kinds: dict[str, str] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        self.proposed: set[str] = set()  # ids of nodes awaiting review, new to the base
        for node in nodes:
            self._know(node["id"], node["kind"], node.get("name") or "")
            if node.get("status") == "proposed":
                self.proposed.add(node["id"])
        self.retriever = retriever

    def _know(self, node_id: str, kind: str, name: str) -> None:
        self.kinds[node_id] = kind
        self.by_name.setdefault((kind, _norm(node_id)), node_id)
        if name:
            self.by_name.setdefault((kind, _norm(name)), node_id)

    def resolve(self, ref: EntityRef) -> Resolution:
        if ref.id and self.kinds.get(ref.id) == ref.kind:
            return Resolution(ref, merged=True)
        for text in (ref.id, ref.name):
            known = self.by_name.get((ref.kind, _norm(text))) if text else None
            if known:
                return Resolution(_with_id(ref, known), merged=True)
        if self.retriever is not None and ref.name and ref.kind in SKILL_KINDS:
            query = f"{ref.name}. {ref.description}".strip()
            hits = self.retriever.search(query, [ref.kind], k=1)
            if hits and hits[0].is_same_entity and hits[0].id in self.kinds:
                return Resolution(_with_id(ref, hits[0].id), merged=True, score=hits[0].score)
        new_id = self._free_id(ref.id or slug(ref.name), ref.kind)
        self._know(new_id, ref.kind, ref.name)  # a second mention in the same run merges into it
        self.proposed.add(new_id)
        return Resolution(_with_id(ref, new_id), merged=False)

    def _free_id(self, base: str, kind: str) -> str:
        candidate, n = base, 2
        while candidate in self.kinds and self.kinds[candidate] != kind:
            candidate, n = f"{base}_{n}", n + 1
        return candidate


def slug(name: str) -> str:
    """A node id from a name: "Stream-K decomposition" -> "stream_k_decomposition"."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    text = "_".join(words)[:MAX_ID_CHARS].strip("_")
    return text or "unnamed"


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _with_id(ref: EntityRef, node_id: str) -> EntityRef:
    return replace(ref, id=node_id)
