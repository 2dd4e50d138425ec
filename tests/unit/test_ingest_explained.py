"""Evidence by meaning (learned-8, ingest/explained.py): a sentence that explains its passage's node without naming it.

The embedding model is replaced by hand-made vectors, so that each test states how near a sentence is to each node."""

from __future__ import annotations

import numpy as np

from kskill.ingest.claims import Span
from kskill.ingest.explained import EXPLAINS, EXPLAINS_UNNAMED, explained, explaining
from kskill.ingest.lexicon import Mention
from kskill.ingest.linking import PassageLinks
from kskill.ingest.relations import SentenceView

KIND_OF = {"warp_shuffle_reduction": "Technique", "shared_memory_tiling": "Technique",
           "memory_bandwidth": "Bottleneck"}
NODES = {"warp_shuffle_reduction": np.array([1.0, 0.0, 0.0, 0.0]), "shared_memory_tiling": np.array([0.0, 1.0, 0.0, 0.0]),
         "memory_bandwidth": np.array([0.0, 0.0, 1.0, 0.0])}
ELSEWHERE = np.array([0.0, 0.0, 0.0, 1.0])  # near no node


class Linker:
    """What explained() asks of the entity linker: node kinds, node vectors, and sentence vectors (given per text)."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.kind_of = KIND_OF
        self.vectors = vectors

    def node_vectors(self) -> dict[str, np.ndarray]:
        return NODES

    def embed(self, texts):
        return np.array([self.vectors[t] for t in texts])


def _view(text: str, about: dict[str, float], named=(), headings=()) -> SentenceView:
    return SentenceView(text, Span(text, "section Reduction, offset 0"), list(named), [list(headings)], [],
                        PassageLinks(meaning=about), "Reduction")


def _toward(node: str, cosine: float, other: np.ndarray = ELSEWHERE) -> np.ndarray:
    """A unit vector with the given cosine to `node`'s vector, the rest toward `other`."""
    return cosine * NODES[node] + np.sqrt(1 - cosine ** 2) * other


EXPLAINS_TEXT = "Each thread reads another thread's register in one cycle, which reduces the shared memory traffic."


def test_a_sentence_that_explains_its_passages_node_unnamed_is_its_evidence():
    view = _view(EXPLAINS_TEXT, {"warp_shuffle_reduction": 0.3, "memory_bandwidth": 0.2})
    assert explaining(view, KIND_OF) == "warp_shuffle_reduction"
    linker = Linker({EXPLAINS_TEXT: _toward("warp_shuffle_reduction", EXPLAINS + 0.1)})
    [(_, claim)] = explained([(view, "warp_shuffle_reduction")], linker, "rules", {"warp_shuffle_reduction": 2})
    assert (claim.subject.id, claim.relation) == ("warp_shuffle_reduction", "SUPPORTS")


def test_a_sentence_without_an_explaining_form_or_naming_a_node_of_that_kind_is_left_to_the_claim_rules():
    about = {"warp_shuffle_reduction": 0.3}
    assert explaining(_view("See the table below for the numbers.", about), KIND_OF) is None
    named = [Mention("shared_memory_tiling", "Technique", 0, 6, True)]
    assert explaining(_view(EXPLAINS_TEXT, about, named=named), KIND_OF) is None
    assert explaining(_view(EXPLAINS_TEXT, about, headings=named), KIND_OF) is None


def test_a_sentence_far_from_the_node_or_nearer_another_node_is_no_evidence():
    view = _view(EXPLAINS_TEXT, {"warp_shuffle_reduction": 0.3})
    far = Linker({EXPLAINS_TEXT: _toward("warp_shuffle_reduction", EXPLAINS - 0.1)})
    assert explained([(view, "warp_shuffle_reduction")], far, "rules", {"warp_shuffle_reduction": 2}) == []
    nearer_other = Linker({EXPLAINS_TEXT: _toward("warp_shuffle_reduction", 0.6, NODES["shared_memory_tiling"])})
    assert explained([(view, "warp_shuffle_reduction")], nearer_other, "rules", {"warp_shuffle_reduction": 2}) == []


def test_a_node_the_document_never_names_needs_a_sentence_nearer_its_text():
    view = _view(EXPLAINS_TEXT, {"warp_shuffle_reduction": 0.3})
    between = Linker({EXPLAINS_TEXT: _toward("warp_shuffle_reduction", (EXPLAINS + EXPLAINS_UNNAMED) / 2)})
    assert explained([(view, "warp_shuffle_reduction")], between, "rules", {}) == []
    near = Linker({EXPLAINS_TEXT: _toward("warp_shuffle_reduction", min(EXPLAINS_UNNAMED + 0.02, 1.0))})
    assert len(explained([(view, "warp_shuffle_reduction")], near, "rules", {})) == 1
