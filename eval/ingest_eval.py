"""Evaluate `kskill ingest`: triples per document, precision/recall of the rule extractor, throughput.

    python -m kskill.eval.ingest_eval [--corpus DIR] [--labels FILE] [--retrieval] [--pdf-copies N] [--json OUT]

Precision and recall compare the rule extractor's distinct triples with eval/ingest/labels.yaml,
document by document (within a document's labelled scope) and pooled. Throughput runs the
real pipeline (embedded FalkorDB in a temporary home, the embedding model, per-file
transactions and the vector-index refresh) over copies of the corpus PDF and counts pages per
second; loading the model and building the first index are timed apart.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
from kskill.ingest.lexicon import Lexicon
from kskill.ingest.loaders import load_document

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"
DEFAULT_LABELS = HERE / "ingest" / "labels.yaml"


def builtin_skill_rows() -> list[dict[str, str]]:
    payload = read_builtin().payload
    return [{"id": n.id, "kind": n.label, "name": n.name} for (label, _), n in payload.nodes.items()
            if label in ("Bottleneck", "Technique")]


def load_labels(path: Path) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))["documents"]
    out = {}
    for name, entry in data.items():
        items = entry if isinstance(entry, list) else entry["triples"]
        scope = None if isinstance(entry, list) else entry.get("scope")
        out[name] = {"scope": scope, "triples": {_norm(i["triple"]) for i in items}}
    return out


def _norm(triple: list[Any]) -> tuple[str, str, str]:
    s, r, o = triple
    return (str(s), str(r), f"{float(o):g}" if r == "GAIN" else str(o))


def score(found: set[tuple[str, str, str]], expected: set[tuple[str, str, str]]) -> dict[str, Any]:
    hit = found & expected
    return {"found": len(found), "expected": len(expected), "correct": len(hit),
            "precision": len(hit) / len(found) if found else None,
            "recall": len(hit) / len(expected) if expected else None,
            "false_positives": sorted(found - expected), "missed": sorted(expected - found)}


def extract_corpus(corpus: Path, labels: dict[str, dict[str, Any]], min_confidence: float,
                   with_retrieval: bool = False) -> dict[str, Any]:
    """Score the rule extractor; `with_retrieval` adds the hybrid retrieval finder the pipeline uses
    (the built-in skill files as records, the default embedding model)."""
    rows = builtin_skill_rows()
    finder = None
    if with_retrieval:
        from kskill.ingest.resolve import Resolver
        from kskill.retrieval import Retriever, load_embedder
        from kskill.retrieval.records import records_from_skill_files

        skills = Path(__file__).resolve().parents[1] / "graph_schema" / "skills"
        finder = Resolver(rows, Retriever(records_from_skill_files(skills), load_embedder())).find
    extractor = RuleExtractor(Lexicon(rows), finder, RuleSettings(min_confidence=min_confidence))
    per_doc: dict[str, Any] = {}
    pooled_found: set = set()
    pooled_expected: set = set()
    for path in sorted(corpus.iterdir()):
        if path.name == "SOURCES.md" or not path.is_file():
            continue
        doc = load_document(path)
        claims = extractor.extract(doc)
        label = labels.get(path.name)
        row: dict[str, Any] = {"triples": sorted({c.triple for c in claims}), "pages": doc.pages}
        if label is not None:
            scope = re.compile(label["scope"]) if label["scope"] else None
            in_scope = {c.triple for c in claims
                        if scope is None or any(scope.search(doc.section_of(_offset(s.location)))
                                                for s in (c.evidence, *c.extra_evidence))}
            row["score"] = score(in_scope, label["triples"])
            pooled_found |= {(path.name, *t) for t in in_scope}
            pooled_expected |= {(path.name, *t) for t in label["triples"]}
        per_doc[path.name] = row
    return {"documents": per_doc, "overall": score(pooled_found, pooled_expected)}


def _offset(location: str) -> int:
    m = re.search(r"offset (\d+)", location)
    return int(m.group(1)) if m else 0


def throughput(corpus: Path, copies: int) -> dict[str, Any]:
    """Pages per second of the whole pipeline over `copies` copies of each corpus PDF."""
    from kskill.graph_schema.embedded import EmbeddedServer
    from kskill.graph_schema.skillbase import ensure_builtin
    from kskill.graph_schema.store import open_store
    from kskill.ingest.pipeline import Ingestor
    from kskill.retrieval import refresh, retriever_for

    pdfs = sorted(corpus.glob("*.pdf"))
    home = Path(tempfile.mkdtemp(prefix="kskill-ingest-eval-"))
    try:
        folder = home / "papers"
        folder.mkdir()
        for i in range(copies):
            for pdf in pdfs:
                shutil.copy(pdf, folder / f"{pdf.stem}-{i}.pdf")
        store = open_store("embedded", home)
        try:
            ensure_builtin(store)
            started = time.perf_counter()
            retriever = retriever_for(store, home)
            setup = time.perf_counter() - started
            ingestor = Ingestor(store, None, retriever, on_written=lambda: refresh(retriever, store, home))
            started = time.perf_counter()
            report = ingestor.run([folder])
            seconds = time.perf_counter() - started
        finally:
            store.close()
            EmbeddedServer(home / "graph").shutdown()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    pages = report.totals()["pages"]
    return {"files": len(report.files), "pages": pages, "seconds": round(seconds, 3),
            "pages_per_second": round(pages / seconds, 1), "model_and_index_setup_seconds": round(setup, 2),
            "statuses": {k: v for k, v in report.totals().items() if k in ("ingested", "failed")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    parser.add_argument("--min-confidence", type=float, default=0.5)
    parser.add_argument("--retrieval", action="store_true",
                        help="let retrieval fill a missing bottleneck or technique, as `kskill ingest` does")
    parser.add_argument("--pdf-copies", type=int, default=4, help="copies of each PDF for the throughput run (0: skip)")
    parser.add_argument("--json", type=Path, default=None, help="also write the full results here")
    args = parser.parse_args()
    results = extract_corpus(args.corpus, load_labels(args.labels), args.min_confidence, args.retrieval)
    if args.pdf_copies:
        results["throughput"] = throughput(args.corpus, args.pdf_copies)
    print("| document | triples found | labelled | correct | precision | recall |")
    print("|---|---|---|---|---|---|")
    for name, row in results["documents"].items():
        s = row.get("score")
        cells = [str(s["expected"]), str(s["correct"]), _pct(s["precision"]), _pct(s["recall"])] if s else ["-"] * 4
        print(f"| {name} | {len(row['triples'])} | " + " | ".join(cells) + " |")
    o = results["overall"]
    print(f"| **overall (labelled)** | {o['found']} | {o['expected']} | {o['correct']} | "
          f"{_pct(o['precision'])} | {_pct(o['recall'])} |")
    if "throughput" in results:
        t = results["throughput"]
        print(f"\nthroughput: {t['pages']} PDF pages in {t['seconds']} s = {t['pages_per_second']} pages/s "
              f"(model load and first index build {t['model_and_index_setup_seconds']} s, not counted)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=list))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
