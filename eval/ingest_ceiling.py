"""How much of the tune material's expected items the extractor proposes at all, and how much it keeps.

    python -m kskill.eval.ingest_ceiling [--extra-corpus DIR] [--cache FILE] [--json OUT] [--misses OUT]

The documents are those ingest_train reads: the labelled tune material (TUNE_HALVES, never the held-out half) and
the development set. For each, three sets of claim rows:
- `ceiling`: every candidate the extractor sees at its lowest bars (the rules with low bars, the proposal finder,
  the claims the scorer path adds, and the rules alone), whatever their score: no scorer over these candidates can
  find an item they lack;
- `default`: what the shipped extractor keeps (RuleExtractor with its default settings);
- `rules`: the rules alone.
Recall is reported pooled and by the kind of expected item (evidence, a proposal, an edge, a gain, ...), and the
items the ceiling never proposes can be written out with their labelled quotes, to see where recall is lost. Read
per document with load_document, not through the store's pipeline: ingest_eval gives the shipped figures.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from .ingest_eval import ingest_home
from .ingest_scoring import found
from .ingest_train import claim_row, collected, training_documents

SETS = ("ceiling", "default", "rules")


def collect(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each document's rows of the three sets (see the module's docstring)."""
    from kskill.graph_schema import ingest_queries as iq
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
    from kskill.ingest.linking import EntityLinker
    from kskill.ingest.loaders import load_document
    from kskill.ingest.scorer import FEATURES, ClaimScorer
    from .ingest_scoring import in_scope

    keep_all = ClaimScorer((0.0,) * len(FEATURES), 0.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), 0.5)
    with ingest_home() as (store, retriever, _home):
        linker = EntityLinker(store.run(iq.SKILL_NODES), store.run(iq.METRIC_TEXTS), retriever)
        lowest = RuleExtractor(linker, RuleSettings(min_confidence=0.0), scorer=keep_all)
        default = RuleExtractor(linker, RuleSettings())
        rules = RuleExtractor(linker, RuleSettings(learned=False))
        for doc in docs:
            text = load_document(Path(doc["path"]))
            ruled, weak = lowest.read(text)
            seen = ruled + weak + rules.read(text)[0]
            doc["ceiling"] = in_scope([claim_row(c) for c in seen], doc["scope"])
            doc["default"] = in_scope([claim_row(c) for c in default.extract(text)], doc["scope"])
            doc["rules"] = in_scope([claim_row(c) for c in rules.extract(text)], doc["scope"])
    return docs


def item_kind(item: dict[str, Any]) -> str:
    """What an expected item asks for: evidence, proposal, edge, gain, figure, or any (one of several)."""
    return next(k for k in ("any", "evidence", "proposal", "edge", "gain", "figure") if k in item)


def by_kind(docs: list[dict[str, Any]], rows_key: str) -> dict[str, dict[str, int]]:
    """Expected and found items per kind, and pooled ("all")."""
    out: dict[str, Counter] = {}
    for doc in docs:
        rows = doc[rows_key]
        for item in doc["items"]:
            for kind in (item_kind(item), "all"):
                tally = out.setdefault(kind, Counter())
                tally["expected"] += 1
                tally["found"] += found(item, rows)
    return {k: dict(v) for k, v in out.items()}


def kept_triples(docs: list[dict[str, Any]], rows_key: str) -> int:
    """Distinct triples kept per document, summed: what a person would have to judge."""
    return sum(len({(r["subject"], r["relation"], r["object"]) for r in d[rows_key]}) for d in docs)


def misses(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The expected items the ceiling never proposes, with their document and labelled quote."""
    return [{"document": d["name"], "kind": item_kind(item), "item": item} for d in docs for item in d["items"]
            if not found(item, d["ceiling"])]


def report(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"documents": len(docs),
            **{name: {"by_kind": by_kind(docs, name), "kept_triples": kept_triples(docs, name)} for name in SETS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extra-corpus", type=Path, action="append", default=[],
                        help="a folder holding labelled documents kept outside the repository (repeatable)")
    parser.add_argument("--cache", type=Path, help="rows: read when present, else written here")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--misses", type=Path, help="write the items the ceiling never proposes here")
    args = parser.parse_args()
    docs = collected(training_documents(args.extra_corpus, skip_absent=True), collect, args.cache, SETS)
    figures = report(docs)
    for name in SETS:
        tally = figures[name]["by_kind"]
        cells = ", ".join(f"{k} {v['found']}/{v['expected']}" for k, v in sorted(tally.items()))
        print(f"{name}: {cells}; {figures[name]['kept_triples']} triples")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    if args.misses:
        args.misses.write_text(json.dumps(misses(docs), indent=2, default=str))


if __name__ == "__main__":
    main()
