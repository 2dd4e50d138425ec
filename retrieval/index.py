"""FAISS vector index over search records, one sub-index per node kind, persisted with checksums.

Each kind gets its own FAISS index so a search restricted to some kinds (the Diagnoser looks
only at FailurePatterns) is exact without filters. Below `HNSW_MIN_VECTORS` a kind is an exact
inner-product index (IndexFlatIP); above it an HNSW graph, since a flat scan of 100,000
384-d vectors takes about 14 ms on two CPU cores. Vectors are unit length, so inner product
is cosine similarity. With faiss-gpu and CUDA, flat indexes run on the GPU with the same API.

On disk: one `<Kind>.faiss` file and one `<Kind>.keys.json` per kind plus `vectors.json`
naming the dimension and each file's SHA-256. Loading checks all of it; anything that does
not fit raises IndexUnusable, and the caller rebuilds from the graph.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    import faiss
except ImportError:  # kskill[semantic] brings it; without it load_embedder gives None and no index is made
    faiss = None

from .errors import IndexUnusable

HNSW_MIN_VECTORS = 20_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 256  # recall@10 0.985 against an exact scan of 100,000 vectors, 0.4 ms
FORMAT = 1


@dataclass(frozen=True)
class VectorHit:
    key: str
    kind: str
    score: float  # cosine similarity


@dataclass
class _KindIndex:
    """The vectors of one node kind: FAISS row i holds the vector of keys[i]."""

    dim: int
    keys: list[str] = field(default_factory=list)
    index: faiss.Index | None = None

    def __post_init__(self) -> None:
        self.rows = {key: i for i, key in enumerate(self.keys)}
        if self.index is None:
            self.index = _new_index(self.dim, 0)

    def vectors(self) -> np.ndarray:
        if not self.keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.index.reconstruct_n(0, len(self.keys))

    def rebuild(self, keys: list[str], vectors: np.ndarray) -> None:
        self.keys = keys
        self.rows = {key: i for i, key in enumerate(keys)}
        self.index = _new_index(self.dim, len(keys))
        if len(keys):
            self.index.add(vectors)

    def append(self, keys: list[str], vectors: np.ndarray) -> None:
        if _wants_hnsw(len(self.keys) + len(keys)) != _is_hnsw(self.index):
            self.rebuild(self.keys + keys, np.vstack([self.vectors(), vectors]))
            return
        start = len(self.keys)
        self.keys.extend(keys)
        self.rows.update({key: start + i for i, key in enumerate(keys)})
        self.index.add(vectors)


class VectorIndex:
    """Unit vectors keyed by node id, searchable by kind."""

    def __init__(self, dim: int):
        self.dim = dim
        self.kinds: dict[str, _KindIndex] = {}

    def __len__(self) -> int:
        return sum(len(k.keys) for k in self.kinds.values())

    def keys(self) -> dict[str, str]:
        """Every key with its kind."""
        return {key: kind for kind, sub in self.kinds.items() for key in sub.keys}

    def upsert(self, kind: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Add vectors; a key already present (in any kind) is replaced."""
        vectors = self._checked(vectors, len(keys))
        self.remove(keys)
        sub = self.kinds.setdefault(kind, _KindIndex(self.dim))
        sub.append(list(keys), vectors)

    def remove(self, keys: Iterable[str]) -> None:
        gone = set(keys)
        for sub in self.kinds.values():
            if gone.intersection(sub.rows):
                keep = [i for i, key in enumerate(sub.keys) if key not in gone]
                sub.rebuild([sub.keys[i] for i in keep], sub.vectors()[keep])

    def vector(self, key: str, kind: str) -> np.ndarray | None:
        sub = self.kinds.get(kind)
        row = sub.rows.get(key) if sub else None
        return None if row is None else sub.index.reconstruct(row)

    def search(self, query: np.ndarray, kinds: Sequence[str], k: int) -> list[VectorHit]:
        """The k nearest keys among the given kinds, best first."""
        query = self._checked(query.reshape(1, -1), 1)
        hits: list[VectorHit] = []
        for kind in kinds:
            sub = self.kinds.get(kind)
            if not sub or not sub.keys:
                continue
            scores, rows = sub.index.search(query, min(k, len(sub.keys)))
            hits.extend(VectorHit(sub.keys[r], kind, float(s)) for s, r in zip(scores[0], rows[0]) if r >= 0)
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def _checked(self, vectors: np.ndarray, rows: int) -> np.ndarray:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (rows, self.dim):
            raise IndexUnusable(f"vectors of shape {vectors.shape} do not fit an index of dimension {self.dim}")
        return vectors

    # --- persistence ----------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Write every kind's files, then the manifest that names their checksums."""
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"format": FORMAT, "dim": self.dim, "kinds": {}}
        for kind, sub in self.kinds.items():
            index_file, keys_file = folder / f"{kind}.faiss", folder / f"{kind}.keys.json"
            atomic_write(index_file, faiss.serialize_index(_on_cpu(sub.index)).tobytes())
            atomic_write(keys_file, json.dumps(sub.keys).encode())
            manifest["kinds"][kind] = {"count": len(sub.keys), "index_sha256": _sha256(index_file),
                                       "keys_sha256": _sha256(keys_file)}
        atomic_write(folder / "vectors.json", json.dumps(manifest, indent=1).encode())

    @classmethod
    def load(cls, folder: Path, dim: int) -> VectorIndex:
        """Read an index written by `save`; IndexUnusable when anything is missing, corrupt or of another dimension."""
        try:
            manifest = json.loads((folder / "vectors.json").read_text())
            if manifest.get("format") != FORMAT:
                raise IndexUnusable(f"index format {manifest.get('format')!r} is not {FORMAT}")
            if manifest["dim"] != dim:
                raise IndexUnusable(f"index has dimension {manifest['dim']}, the model gives {dim}")
            index = cls(dim)
            for kind, meta in manifest["kinds"].items():
                index.kinds[kind] = _load_kind(folder, kind, meta, dim)
            return index
        except IndexUnusable:
            raise
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise IndexUnusable(f"index files in {folder} cannot be read: {exc}") from exc


def _load_kind(folder: Path, kind: str, meta: dict, dim: int) -> _KindIndex:
    index_file, keys_file = folder / f"{kind}.faiss", folder / f"{kind}.keys.json"
    for path, digest in ((index_file, meta["index_sha256"]), (keys_file, meta["keys_sha256"])):
        if _sha256(path) != digest:
            raise IndexUnusable(f"{path.name} does not match its checksum: the file is corrupt")
    keys = json.loads(keys_file.read_text())
    index = faiss.deserialize_index(np.fromfile(index_file, dtype=np.uint8))
    if index.d != dim or index.ntotal != len(keys) or len(keys) != meta["count"]:
        raise IndexUnusable(f"{index_file.name} holds {index.ntotal} vectors of dimension {index.d}, "
                            f"expected {len(keys)} of dimension {dim}")
    if isinstance(index, faiss.IndexHNSW):
        index.hnsw.efSearch = HNSW_EF_SEARCH
    return _KindIndex(dim, keys, _to_device(index))


def _wants_hnsw(count: int) -> bool:
    return count >= HNSW_MIN_VECTORS and not _gpu_count()


def _is_hnsw(index: faiss.Index) -> bool:
    return isinstance(index, faiss.IndexHNSW)


def _new_index(dim: int, count: int) -> faiss.Index:
    if _wants_hnsw(count):
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        return index
    return _to_device(faiss.IndexFlatIP(dim))


def _gpu_count() -> int:
    """GPUs FAISS can use: zero with faiss-cpu."""
    return faiss.get_num_gpus() if hasattr(faiss, "StandardGpuResources") else 0


_GPU_RESOURCES = None


def _to_device(index: faiss.Index) -> faiss.Index:
    """A flat index moves to the first GPU when faiss-gpu sees one; everything else stays."""
    global _GPU_RESOURCES
    if not _gpu_count() or not isinstance(index, faiss.IndexFlat):
        return index
    if _GPU_RESOURCES is None:
        _GPU_RESOURCES = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(_GPU_RESOURCES, 0, index)


def _on_cpu(index: faiss.Index) -> faiss.Index:
    gpu_index = getattr(faiss, "GpuIndex", None)
    return faiss.index_gpu_to_cpu(index) if gpu_index and isinstance(index, gpu_index) else index


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write beside the target, then rename over it, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
