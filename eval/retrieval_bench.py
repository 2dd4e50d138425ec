"""Retrieval speed on this machine: search latency over 100,000 vectors and index build throughput.

    python -m kskill.eval.retrieval_bench                    # defaults: 100,000 vectors, 2,000 build texts
    python -m kskill.eval.retrieval_bench --vectors 20000 --json

Measures, each as a median over repeated single queries:
  * vector search alone (FAISS; flat below the HNSW switch, HNSW above), with HNSW's recall@10
    against an exact scan of the same vectors;
  * query embedding plus vector search;
  * a full hybrid `Retriever.search` (embedding, FAISS, BM25 over 100,000 texts, fusion);
and build throughput over skill-base texts, embedded from scratch every time: a whole Retriever
(embedding, FAISS and BM25; the first build of the process apart, then the median of
`--build-repeats`) and the embedding alone.

The 100,000 vectors are real embeddings of skill-base texts plus Gaussian noise, renormalised,
so they cluster like a real corpus; the 100,000 texts are skill-base texts with varied suffixes.
Absolute times only mean something next to the machine line printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import faiss
import numpy as np

from kskill.retrieval.embedder import load_embedder
from kskill.retrieval.index import HNSW_MIN_VECTORS, VectorIndex
from kskill.retrieval.records import SearchRecord, records_from_skill_files
from kskill.retrieval.search import Retriever

DEFAULT_SKILLS = Path(__file__).resolve().parent.parent / "graph_schema" / "skills"
QUERIES = ["SMEM tiling", "float4 loads", "too many tiny launches", "bank conflicts",
           "ptxas: too many resources requested", "register spills to local memory",
           "CUDA error: an illegal memory access was encountered", "fuse bias and relu into the matmul"]


def p50_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def synthetic_records(base: list[SearchRecord], count: int) -> list[SearchRecord]:
    """`count` Evidence-like records cycling through real texts with distinct suffixes."""
    return [SearchRecord(id=f"bench:{i}", kind="Evidence", name=f"bench {i}",
                         text=f"{base[i % len(base)].text} (passage {i}, variant {i // len(base)})")
            for i in range(count)]


def noisy_vectors(seed_vectors: np.ndarray, count: int, noise: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(0)
    picks = seed_vectors[rng.integers(0, len(seed_vectors), count)]
    vectors = picks + rng.normal(0, noise, picks.shape).astype(np.float32)
    faiss.normalize_L2(vectors)
    return vectors


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--build-texts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--build-repeats", type=int, default=3, help="builds timed after the first; median reported")
    parser.add_argument("--skills", type=Path, default=DEFAULT_SKILLS)
    parser.add_argument("--model")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    embedder = load_embedder(args.model)
    if embedder is None:
        raise SystemExit("the embedding model is not installed: nothing to benchmark for vectors")
    base = records_from_skill_files(args.skills)
    result: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
                   f"faiss {faiss.__version__}, omp threads {faiss.omp_get_max_threads()}",
        "model": embedder.fingerprint, "device": getattr(embedder, "device", "?"),
        "vectors": args.vectors, "hnsw_from": HNSW_MIN_VECTORS,
    }

    # Build throughput, from scratch each time (no vector is reused): a whole Retriever (embedding,
    # FAISS and BM25), and the embedding alone. The first build in the process is reported apart,
    # since it also pays one-off set-up of the model's kernels.
    build = synthetic_records(base, args.build_texts)
    texts = [r.text for r in build]
    result["build_texts"] = len(build)
    result["build_text_words_median"] = statistics.median(len(t.split()) for t in texts)
    if hasattr(embedder, "token_counts"):
        result["build_text_tokens_median"] = statistics.median(embedder.token_counts(texts))
    result["first_build_texts_per_s"] = round(len(build) / seconds(lambda: Retriever(build, embedder)), 1)
    builds, embeds = [], []
    for _ in range(args.build_repeats):
        builds.append(seconds(lambda: Retriever(build, embedder)))
        embeds.append(seconds(lambda: embedder.embed(texts)))
    result["build_texts_per_s"] = round(len(build) / statistics.median(builds), 1)
    result["embed_texts_per_s"] = round(len(build) / statistics.median(embeds), 1)
    result["lexical_build_texts_per_s"] = round(len(build) / seconds(lambda: Retriever(build, None)), 1)
    result["load_average"] = os.getloadavg()[0]

    # Search over `--vectors` vectors.
    seed = embedder.embed([r.text for r in base])
    vectors = noisy_vectors(seed, args.vectors)
    keys = [f"bench:{i}" for i in range(args.vectors)]
    start = time.perf_counter()
    index = VectorIndex(embedder.dim)
    index.upsert("Evidence", keys, vectors)
    result["faiss_add_s"] = round(time.perf_counter() - start, 2)
    result["index_type"] = type(index.kinds["Evidence"].index).__name__
    queries = embedder.embed(QUERIES)
    result["search_p50_ms"] = round(p50_ms(lambda i=0: index.search(queries[i % len(queries)], ["Evidence"], 10),
                                           args.repeats), 3)
    exact = faiss.IndexFlatIP(embedder.dim)
    exact.add(vectors)
    result["flat_search_p50_ms"] = round(p50_ms(lambda i=0: exact.search(queries[i % len(queries)][None], 10),
                                                args.repeats), 3)
    result["hnsw_recall_at_10"] = round(recall_vs_exact(index, exact, queries), 3)
    result["embed_and_search_p50_ms"] = round(p50_ms(
        lambda i=0: index.search(embedder.embed([QUERIES[i % len(QUERIES)]])[0], ["Evidence"], 10),
        args.repeats), 3)

    # A full hybrid search over as many records (BM25 over their texts as well).
    records = synthetic_records(base, args.vectors)
    big = Retriever([], embedder, index, evidence_in_skills=False)
    big.add(records, embed=False)
    result["hybrid_search_p50_ms"] = round(p50_ms(lambda i=0: big.search(QUERIES[i % len(QUERIES)], k=10),
                                                  max(20, args.repeats // 4)), 3)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key:<26} {value}")


def recall_vs_exact(index: VectorIndex, exact: faiss.Index, queries: np.ndarray, k: int = 10) -> float:
    found = 0
    for q in queries:
        truth = {f"bench:{r}" for r in exact.search(q[None], k)[1][0]}
        found += len(truth & {h.key for h in index.search(q, ["Evidence"], k)})
    return found / (k * len(queries))


if __name__ == "__main__":
    main()
