"""Ranking with the Retriever: query checks, lexical and hybrid ranking, updates, thresholds.

The embedding model is replaced by a bag-of-words hashing embedder: the ranking code under
test is the real one, only the vectors are simpler (the real model runs in tests/integration).
"""

import hashlib

import numpy as np
import pytest

from kskill.retrieval.errors import QueryError
from kskill.retrieval.lexical import words
from kskill.retrieval.records import SearchRecord
from kskill.retrieval.search import MAX_QUERY_CHARS, THRESHOLDS, Match, Retriever, clean_query


class HashingEmbedder:
    """Each word hashed to one of 64 dimensions; texts sharing words get close vectors."""

    fingerprint = "hashing-64"
    dim = 64

    def __init__(self):
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


RECORDS = [
    SearchRecord("shared_memory_tiling", "Technique", "Shared-memory tiling",
                 "Shared-memory tiling\nStage tiles of reused operands on chip."),
    SearchRecord("vectorized_access", "Technique", "Vectorized loads and stores",
                 "Vectorized loads and stores\nMove 16 bytes per thread per instruction."),
    SearchRecord("launch_overhead", "Bottleneck", "Launch overhead",
                 "Launch overhead\nThe GPU sits idle between many short kernels."),
    SearchRecord("fp_out_of_memory", "FailurePattern", "Out of GPU memory",
                 "Out of GPU memory\nAn allocation failed: CUDA out of memory."),
    SearchRecord("ev:1", "Evidence", "Padding avoids bank conflicts",
                 "Padding the shared array by one word avoids bank conflicts.", about=("shared_memory_tiling",)),
]


@pytest.fixture
def hybrid():
    return Retriever(RECORDS, HashingEmbedder())


@pytest.fixture
def lexical():
    return Retriever(RECORDS, None)


def test_lexical_retriever_answers_without_a_model(lexical):
    matches = lexical.search("SMEM tiling", k=2)
    assert matches[0].id == "shared_memory_tiling"
    assert matches[0].via == "lexical"
    assert lexical.vectors is None


def test_hybrid_is_the_default_with_a_model(hybrid):
    matches = hybrid.search("float4 loads", k=3)
    assert matches[0].id == "vectorized_access"
    assert {m.via for m in matches} == {"hybrid"}
    assert all(0 <= m.score <= 1 for m in matches)


def test_each_ranking_can_be_asked_for(hybrid):
    for via in ("lexical", "vector", "hybrid"):
        assert hybrid.search("GPU idle between short kernels", k=1, via=via)[0].id == "launch_overhead"


def test_vector_ranking_without_a_model_is_an_error(lexical):
    with pytest.raises(QueryError, match="needs an embedding model"):
        lexical.search("tiling", via="vector")


def test_kinds_restrict_the_answer(hybrid):
    matches = hybrid.search("CUDA out of memory", kinds=["FailurePattern"], k=5)
    assert [m.id for m in matches] == ["fp_out_of_memory"]
    assert all(m.kind == "Technique" for m in hybrid.search("memory", kinds=["Technique"], k=5))


def test_evidence_words_find_the_skill_they_support(lexical):
    matches = lexical.search("bank conflicts", kinds=["Technique"], k=1)
    assert matches[0].id == "shared_memory_tiling"
    plain = Retriever(RECORDS, None, evidence_in_skills=False)
    assert plain.search("bank conflicts", kinds=["Technique"], k=1) == []


def test_evidence_matches_say_what_they_support(hybrid):
    match = hybrid.search("padding bank conflicts", kinds=["Evidence"], k=1)[0]
    assert match.about == ("shared_memory_tiling",)


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_query_is_refused_with_a_hint(hybrid, text):
    with pytest.raises(QueryError, match="empty"):
        hybrid.search(text)


def test_unknown_kind_and_bad_k_are_refused(hybrid):
    with pytest.raises(QueryError, match="choose from Technique"):
        hybrid.search("tiling", kinds=["Techniques"])
    with pytest.raises(QueryError, match="k must be"):
        hybrid.search("tiling", k=0)


def test_huge_query_keeps_its_head_and_tail():
    log = "Traceback line\n" * 5000 + "torch.OutOfMemoryError: CUDA out of memory"
    cleaned = clean_query(log)
    assert len(cleaned) <= MAX_QUERY_CHARS + 5
    assert cleaned.startswith("Traceback line") and cleaned.endswith("CUDA out of memory")


def test_huge_query_still_finds_the_error_at_its_end(hybrid):
    log = "x = y + z  # unrelated source line\n" * 2000 + "RuntimeError: CUDA out of memory."
    assert hybrid.search(log, kinds=["FailurePattern", "Technique"], k=1)[0].id == "fp_out_of_memory"


def test_add_and_remove_change_the_answers(hybrid):
    new = SearchRecord("cuda_graph", "Technique", "CUDA graph capture", "CUDA graph capture\nReplay launches.")
    hybrid.add([new])
    assert hybrid.search("graph replay", k=1)[0].id == "cuda_graph"
    hybrid.remove(["cuda_graph"])
    assert all(m.id != "cuda_graph" for m in hybrid.search("graph replay", k=5))


def test_add_embeds_only_the_new_records(hybrid):
    embedder = hybrid.embedder
    before = embedder.calls
    hybrid.add([SearchRecord("x", "Technique", "X", "x text")])
    assert embedder.calls == before + 1  # one batch for the one new kind group


def test_thresholds_order_and_match_flags():
    for thresholds in THRESHOLDS.values():
        assert 0 < thresholds.related < thresholds.same_entity < 1
    t = THRESHOLDS["hybrid"]
    assert Match("a", "Technique", "A", t.same_entity, "hybrid").is_same_entity
    assert Match("a", "Technique", "A", t.related, "hybrid").is_related
    assert not Match("a", "Technique", "A", t.related - 0.01, "hybrid").is_related
