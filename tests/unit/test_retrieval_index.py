"""The FAISS vector index: search by kind, replacement, removal, persistence and bad files."""

import json

import numpy as np
import pytest

from kskill.retrieval import index as index_module
from kskill.retrieval.errors import IndexUnusable
from kskill.retrieval.index import VectorIndex


def unit_vectors(count: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def filled():
    vectors = unit_vectors(30)
    index = VectorIndex(16)
    index.upsert("Technique", [f"t{i}" for i in range(20)], vectors[:20])
    index.upsert("Bottleneck", [f"b{i}" for i in range(10)], vectors[20:])
    return index, vectors


def test_search_finds_the_vector_itself_first(filled):
    index, vectors = filled
    hits = index.search(vectors[3], ["Technique", "Bottleneck"], 5)
    assert hits[0].key == "t3" and hits[0].kind == "Technique"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_search_is_restricted_to_the_kinds_asked(filled):
    index, vectors = filled
    hits = index.search(vectors[3], ["Bottleneck"], 5)
    assert len(hits) == 5 and all(h.key.startswith("b") for h in hits)
    assert index.search(vectors[3], ["Evidence"], 5) == []


def test_upsert_replaces_a_key_even_across_kinds(filled):
    index, vectors = filled
    index.upsert("Bottleneck", ["t3"], vectors[25:26])
    assert index.keys()["t3"] == "Bottleneck"
    assert len(index) == 30
    assert index.search(vectors[25], ["Bottleneck"], 2)[0].score == pytest.approx(1.0, abs=1e-5)


def test_remove_keeps_the_other_vectors_searchable(filled):
    index, vectors = filled
    index.remove(["t3", "t4", "unknown"])
    assert len(index) == 28
    assert "t3" not in index.keys()
    assert index.search(vectors[5], ["Technique"], 1)[0].key == "t5"
    assert np.allclose(index.vector("t5", "Technique"), vectors[5])


def test_wrong_dimension_is_refused(filled):
    index, _ = filled
    with pytest.raises(IndexUnusable, match="dimension 16"):
        index.upsert("Technique", ["x"], unit_vectors(1, dim=8))


def test_save_and_load_round_trip(tmp_path, filled):
    index, vectors = filled
    index.save(tmp_path)
    loaded = VectorIndex.load(tmp_path, 16)
    assert loaded.keys() == index.keys()
    assert loaded.search(vectors[22], ["Bottleneck"], 1)[0].key == "b2"


def test_corrupt_file_is_detected(tmp_path, filled):
    index, _ = filled
    index.save(tmp_path)
    data = bytearray((tmp_path / "Technique.faiss").read_bytes())
    data[-10] ^= 0xFF
    (tmp_path / "Technique.faiss").write_bytes(bytes(data))
    with pytest.raises(IndexUnusable, match="corrupt"):
        VectorIndex.load(tmp_path, 16)


def test_truncated_or_missing_files_are_unusable(tmp_path, filled):
    index, _ = filled
    index.save(tmp_path)
    (tmp_path / "Bottleneck.keys.json").unlink()
    with pytest.raises(IndexUnusable, match="cannot be read"):
        VectorIndex.load(tmp_path, 16)
    (tmp_path / "vectors.json").write_text("{not json")
    with pytest.raises(IndexUnusable):
        VectorIndex.load(tmp_path, 16)


def test_index_of_another_dimension_is_unusable(tmp_path, filled):
    index, _ = filled
    index.save(tmp_path)
    with pytest.raises(IndexUnusable, match="dimension 16, the model gives 384"):
        VectorIndex.load(tmp_path, 384)
    manifest = json.loads((tmp_path / "vectors.json").read_text())
    manifest["dim"] = 8  # a manifest that lies about the file
    (tmp_path / "vectors.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexUnusable, match="dimension"):
        VectorIndex.load(tmp_path, 8)


def test_large_kinds_switch_to_hnsw_and_still_find_neighbours(monkeypatch, tmp_path):
    monkeypatch.setattr(index_module, "HNSW_MIN_VECTORS", 50)
    vectors = unit_vectors(120, dim=32)
    index = VectorIndex(32)
    index.upsert("Evidence", [f"e{i}" for i in range(40)], vectors[:40])
    assert type(index.kinds["Evidence"].index).__name__ == "IndexFlatIP"
    index.upsert("Evidence", [f"e{i}" for i in range(40, 120)], vectors[40:])
    assert type(index.kinds["Evidence"].index).__name__ == "IndexHNSWFlat"
    assert all(index.search(vectors[i], ["Evidence"], 1)[0].key == f"e{i}" for i in range(0, 120, 7))
    index.remove(["e0"])
    index.save(tmp_path)
    loaded = VectorIndex.load(tmp_path, 32)
    assert len(loaded) == 119 and loaded.search(vectors[50], ["Evidence"], 1)[0].key == "e50"
