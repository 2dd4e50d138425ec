"""Retrieval quality on eval/retrieval/queries.yaml: recall@1, recall@3 and MRR per ranking variant.

    python -m kskill.eval.retrieval_eval                 # all variants, table on stdout
    python -m kskill.eval.retrieval_eval --misses        # also list the queries each variant misses
    python -m kskill.eval.retrieval_eval --calibrate     # also propose the two thresholds per ranking

Records come straight from the skill-base YAML files (no graph store needed), so this runs
anywhere; the same records are what the store holds after the built-in skill base is loaded.
A query counts as found at rank r when any of its expected ids is the r-th skill node.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kskill.retrieval.embedder import load_embedder
from kskill.retrieval.records import SKILL_KINDS, SearchRecord, records_from_skill_files
from kskill.retrieval.search import Retriever, Via

HERE = Path(__file__).resolve().parent
DEFAULT_QUERIES = HERE / "retrieval" / "queries.yaml"
DEFAULT_ENTITIES = HERE / "retrieval" / "entities.yaml"
DEFAULT_SKILLS = HERE.parent / "graph_schema" / "skills"


@dataclass(frozen=True)
class Variant:
    name: str
    via: Via
    expand: bool = True  # jargon expansion of vector queries
    evidence_in_skills: bool = True  # evidence quotes count as words of the skill they support
    vector_weight: float = 0.3
    lexical_vocabulary: bool = True


VARIANTS = [
    Variant("lexical-plain", "lexical", evidence_in_skills=False, lexical_vocabulary=False),
    Variant("lexical", "lexical"),
    Variant("vector-plain", "vector", expand=False),
    Variant("vector", "vector"),
    Variant("hybrid", "hybrid", vector_weight=0.3),
    Variant("hybrid-0.5", "hybrid", vector_weight=0.5),
    Variant("hybrid-0.7", "hybrid", vector_weight=0.7),
]


@dataclass
class Outcome:
    variant: str
    recall_at_1: float
    recall_at_3: float
    mrr: float
    queries: int
    ms_per_query: float
    misses: list[dict] = field(default_factory=list)
    # (score, relevant?, on topic?): each relevant match in the top 3, and each off-topic query's best
    top_scores: list[tuple[float, bool, bool]] = field(default_factory=list)


def load_queries(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["queries"]


def evaluate(retriever: Retriever, variant: Variant, queries: list[dict]) -> Outcome:
    """Rank every query with one variant and score the ranking."""
    hits1 = hits3 = 0
    rr = 0.0
    misses, top_scores = [], []
    on_topic = [q for q in queries if q["expect"]]
    started = time.perf_counter()
    for query in queries:
        matches = retriever.search(query["q"], SKILL_KINDS, k=10, via=variant.via)
        expected = set(query["expect"])
        ranks = [i for i, m in enumerate(matches, 1) if m.id in expected]
        if not expected:
            top_scores.append((matches[0].score if matches else 0.0, False, False))
            continue
        top_scores.extend((matches[r - 1].score, True, True) for r in ranks if r <= 3)
        rank = ranks[0] if ranks else None
        hits1 += rank == 1
        hits3 += bool(rank and rank <= 3)
        rr += 1 / rank if rank else 0.0
        if not rank or rank > 3:
            misses.append({"q": query["q"], "expect": sorted(expected), "rank": rank,
                           "got": [m.id for m in matches[:3]]})
    elapsed = time.perf_counter() - started
    n = len(on_topic)
    return Outcome(variant.name, hits1 / n, hits3 / n, rr / n, n, 1000 * elapsed / len(queries), misses, top_scores)


def build_retriever(records: list[SearchRecord], variant: Variant, embedder, vectors=None) -> Retriever:
    from kskill.retrieval import lexical

    # The plain lexical variant turns the jargon table off to show what it contributes.
    saved = lexical._MATCHER
    if not variant.lexical_vocabulary:
        lexical._MATCHER = lexical.ConceptMatcher({})
    try:
        return Retriever(records, embedder if variant.via != "lexical" else None, vectors,
                         expand=variant.expand, evidence_in_skills=variant.evidence_in_skills,
                         vector_weight=variant.vector_weight)
    finally:
        lexical._MATCHER = saved


def calibrate_related(outcome: Outcome) -> dict:
    """The lowest `related` threshold above every off-topic query's best score, and what it keeps."""
    off_topic = [s for s, relevant, on_topic in outcome.top_scores if not on_topic]
    found = [s for s, relevant, on_topic in outcome.top_scores if relevant]
    threshold = round(max(off_topic, default=0.0) + 0.01, 3)
    kept = sum(s >= threshold for s in found) / max(len(found), 1)
    return {"related": threshold, "relevant_kept": round(kept, 3), "off_topic_queries": len(off_topic)}


def calibrate_same_entity(retriever: Retriever, via: Via, entities: list[dict]) -> dict:
    """A `same_entity` threshold that merges no new candidate and no duplicate into a wrong node.

    When the two groups separate, the midpoint between them; otherwise just above the best wrong score.
    """
    wrong, right = [], []
    for entity in entities:
        top = retriever.search(entity["text"], [entity["kind"]], k=1, via=via)
        score = top[0].score if top else 0.0
        (right if top and top[0].id == entity.get("same_as") else wrong).append(score)
    highest_wrong = max(wrong, default=0.0)
    lowest_right = min(right, default=1.0)
    threshold = (highest_wrong + lowest_right) / 2 if lowest_right > highest_wrong else highest_wrong + 0.005
    merged = sum(s >= threshold for s in right) / max(len(right), 1)
    return {"same_entity": round(threshold, 3), "merged_duplicates": round(merged, 3),
            "highest_wrong": round(highest_wrong, 3), "lowest_right": round(lowest_right, 3),
            "duplicates_ranked_first": len(right), "candidates": len(entities)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--skills", type=Path, default=DEFAULT_SKILLS)
    parser.add_argument("--model", help="a local sentence-transformers folder (default: the packaged model)")
    parser.add_argument("--variants", help="comma-separated subset of: " + ", ".join(v.name for v in VARIANTS))
    parser.add_argument("--misses", action="store_true", help="list the queries each variant misses at 3")
    parser.add_argument("--calibrate", action="store_true", help="propose thresholds from the scores")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    records = records_from_skill_files(args.skills)
    queries = load_queries(args.queries)
    wanted = set(args.variants.split(",")) if args.variants else None
    variants = [v for v in VARIANTS if wanted is None or v.name in wanted]
    embedder = load_embedder(args.model) if any(v.via != "lexical" for v in variants) else None
    if embedder is None:
        variants = [v for v in variants if v.via == "lexical"]
    base = build_retriever(records, Variant("base", "hybrid" if embedder else "lexical"), embedder)

    outcomes, calibration = [], {}
    for variant in variants:
        retriever = build_retriever(records, variant, embedder, base.vectors)
        outcome = evaluate(retriever, variant, queries)
        outcomes.append(outcome)
        if args.calibrate and variant.name in ("lexical", "vector", "hybrid"):
            entities = yaml.safe_load(DEFAULT_ENTITIES.read_text())["entities"] if DEFAULT_ENTITIES.exists() else []
            calibration[variant.via] = {**calibrate_related(outcome),
                                        **calibrate_same_entity(retriever, variant.via, entities)}
    report(outcomes, calibration, records, queries, embedder, args)


def report(outcomes: list[Outcome], calibration: dict, records, queries, embedder, args) -> None:
    if args.json:
        print(json.dumps({"outcomes": [{k: v for k, v in o.__dict__.items() if k != "top_scores"} for o in outcomes],
                          "calibration": calibration}, indent=1))
        return
    model = embedder.fingerprint if embedder else "none (lexical only)"
    print(f"records: {len(records)}  queries: {len(queries)} ({outcomes[0].queries if outcomes else 0} on topic)"
          f"  model: {model}")
    print(f"{'variant':<16}{'recall@1':>10}{'recall@3':>10}{'MRR':>8}{'ms/query':>10}")
    for o in outcomes:
        print(f"{o.variant:<16}{o.recall_at_1:>10.3f}{o.recall_at_3:>10.3f}{o.mrr:>8.3f}{o.ms_per_query:>10.1f}")
    if args.misses:
        for o in outcomes:
            for miss in o.misses:
                print(f"  [{o.variant}] rank {miss['rank']}: {miss['q']!r} expect {miss['expect']} got {miss['got']}")
    for via, values in calibration.items():
        print(f"calibration {via}: {values}")


if __name__ == "__main__":
    main()
