"""Fit the ingest claim scorer on the labelled tune documents, and estimate how it generalizes.

    python -m kskill.eval.ingest_train [--write] [--cache FILE] [--json OUT]

Training documents: eval/ingest/corpus's tune material (TUNE_HALVES, labels_corpus.yaml) and the development
set (../shared/corpus, labels.yaml). Never the held-out half. Every candidate claim the rules and the proposal finder
see in a document (ingest/extract_rules.py, `candidates`) is one example: positive when it is an item an
expert listed for that document (eval/ingest_scoring.found) read from the passage the expert quoted, negative
when it is no listed item (see `examples`). Recall and "label precision" count a kept claim right when it is
a listed item; a correct claim nobody listed counts as wrong, so label precision is not a person's judgement.

Leave-one-document-out: for each document, a model is fitted on all the others and applied to it; the
threshold is then chosen on those held-out scores (pooled), and recall and label precision are reported at
it, beside the rules alone (`rules-3`) and the scorer alone (deciding every candidate) on the same documents.
What ships is the rules' own claims plus the weak candidates the scorer keeps (ingest/extract_rules.py).
`--write` fits the final model on every training document and writes ingest/scorer.json with the chosen
threshold and these figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .ingest_eval import CORPUS_LABELS, DEV_CORPUS, DEV_LABELS, TUNE_HALVES, _find, corpus_file, ingest_home
from .ingest_scoring import found, in_scope, load_corpus_labels

L2 = 1.0  # ridge strength on standardised signals: a few hundred examples, about thirty weights
STEPS = 3000


# --- examples ------------------------------------------------------------------------------------

def training_documents(extra: list[Path] = (), skip_absent: bool = False) -> list[dict[str, Any]]:
    """(path, items, scope) for every labelled training document (those kept outside the repository are read
    from the `extra` folders); `skip_absent`: leave out, naming them on stderr, those found in neither."""
    docs = []
    for label in load_corpus_labels(CORPUS_LABELS).values():
        if label.half in TUNE_HALVES and skip_absent and not _find(label.name, extra):
            print(f"left out, not found: {label.name}", file=sys.stderr)
        elif label.half in TUNE_HALVES:
            docs.append({"name": label.name, "path": str(corpus_file(label.name, extra)), "items": label.items,
                         "scope": label.scope})
    if DEV_CORPUS.is_dir():
        for name, entry in yaml.safe_load(DEV_LABELS.read_text(encoding="utf-8"))["documents"].items():
            triples = entry if isinstance(entry, list) else entry["triples"]
            scope = None if isinstance(entry, list) else entry.get("scope")
            docs.append({"name": name, "path": str(DEV_CORPUS / name), "scope": scope,
                         "items": [_dev_item(t["triple"]) for t in triples]})
    return docs


def _dev_item(triple: list[Any]) -> dict[str, Any]:
    subject, relation, obj = triple
    return {"gain": [subject, float(obj)]} if relation == "GAIN" else {"edge": [subject, relation, str(obj)]}


def collect(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each document's candidate rows (one per candidate claim, with its signals), and its rules-3 rows."""
    from kskill.graph_schema import ingest_queries as iq
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
    from kskill.ingest.linking import EntityLinker
    from kskill.ingest.loaders import load_document
    from kskill.ingest.scorer import ClaimScorer, FEATURES

    # A scorer that keeps everything: the rules propose with their low bars, nothing is filtered here.
    keep_all = ClaimScorer((0.0,) * len(FEATURES), 0.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), 0.5)
    with ingest_home() as (store, retriever, _home):
        linker = EntityLinker(store.run(iq.SKILL_NODES), store.run(iq.METRIC_TEXTS), retriever)
        learned = RuleExtractor(linker, RuleSettings(min_confidence=0.0), scorer=keep_all)
        rules = RuleExtractor(linker, RuleSettings(learned=False))
        for doc in docs:
            text = load_document(Path(doc["path"]))
            doc["candidates"] = in_scope([claim_row(c) for c in learned.candidates(text)], doc["scope"])
            doc["rules3"] = in_scope([claim_row(c) for c in rules.extract(text)], doc["scope"])
    return docs


def claim_row(claim) -> dict[str, Any]:
    """A claim as the scoring code reads rows (pipeline._triple_row's fields), with its signals."""
    from kskill.ingest.claims import EntityRef

    subject, relation, obj = claim.triple
    row: dict[str, Any] = {"subject": subject, "relation": relation, "object": obj, "quote": claim.evidence.quote,
                           "location": claim.evidence.location, "kind": claim.kind, "confidence": claim.confidence,
                           "figures": list(claim.figures), "signals": dict(claim.signals)}
    if claim.gain is not None:
        row["gain"] = claim.gain
    for side, ref in (("subject", claim.subject), ("object", claim.object)):
        if isinstance(ref, EntityRef) and not ref.id:
            row[f"{side}_proposed"] = {"kind": ref.kind, "name": ref.name, "nearest": list(ref.nearest)}
    return row


def examples(doc: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Signals and targets of a document's candidates. A candidate is positive when it is a listed item read
    from the passage the expert quoted for it, negative when it is no listed item at all; one that is a listed
    item read from another sentence is left out (right or wrong, the labels cannot tell)."""
    from kskill.ingest.scorer import FEATURES, as_vector

    xs, ys = [], []
    for r in doc["candidates"]:
        matched = [item for item in doc["items"] if found(item, [r])]
        if matched and not any(_same_passage(r["quote"], item.get("quote", "")) for item in matched):
            continue
        xs.append(as_vector(r["signals"]))
        ys.append(1.0 if matched else 0.0)
    return np.array(xs, dtype=float).reshape(len(xs), len(FEATURES)), np.array(ys)


def _same_passage(quote: str, label_quote: str) -> bool:
    """Most content words of the shorter text appear in the other (label quotes abridge with "...")."""
    a, b = _content_words(quote), _content_words(label_quote)
    return bool(a and b) and len(a & b) >= 0.5 * min(len(a), len(b))


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z0-9_]{2,}", text.lower()) if w not in _STOP}


_STOP = {"the", "and", "for", "with", "that", "this", "are", "can", "from", "into", "which", "not", "but", "its"}


# --- the model -----------------------------------------------------------------------------------

def fit(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Ridge-penalised logistic regression by gradient descent: deterministic, no library state."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    w = np.zeros(z.shape[1])
    b = 0.0
    n = len(y)
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        w -= 0.5 * (z.T @ (p - y) / n + L2 * w / n)
        b -= 0.5 * float((p - y).mean())
    return {"weights": w, "bias": b, "mean": mean, "scale": scale}


def predict(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(((x - model["mean"]) / model["scale"]) @ model["weights"] + model["bias"])))


def leave_one_out(docs: list[dict[str, Any]]) -> None:
    """Each document's candidates scored by a model fitted without it (`doc["held_out"]`)."""
    from kskill.ingest.scorer import FEATURES, as_vector

    data = [examples(d) for d in docs]
    for i, doc in enumerate(docs):
        rest = [data[j] for j in range(len(docs)) if j != i and len(data[j][1])]
        model = fit(np.vstack([x for x, _ in rest]), np.concatenate([y for _, y in rest]))
        x = np.array([as_vector(r["signals"]) for r in doc["candidates"]], dtype=float).reshape(-1, len(FEATURES))
        doc["held_out"] = predict(model, x)


def figures(docs: list[dict[str, Any]], kept_rows) -> dict[str, Any]:
    """Pooled item recall and label precision (distinct triples per document) of the rows kept."""
    expected = hit = kept = correct = 0
    for doc in docs:
        rows = kept_rows(doc)
        expected += len(doc["items"])
        hit += sum(found(item, rows) for item in doc["items"])
        triples = {}
        for r in rows:
            triples.setdefault((r["subject"], r["relation"], r["object"]), []).append(r)
        kept += len(triples)
        correct += sum(any(any(found(item, [r]) for item in doc["items"]) for r in rs) for rs in triples.values())
    return {"recall": _ratio(hit, expected), "found": hit, "expected": expected,
            "label_precision": _ratio(correct, kept), "kept": kept, "correct": correct}


def scored_alone(doc: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """The candidates the held-out scorer keeps, when it decides alone."""
    return [r for r, p in zip(doc["candidates"], doc["held_out"]) if p >= threshold]


def rules_and_scored(doc: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """What the extractor keeps: the rules' own claims, plus the candidates the held-out scorer keeps."""
    have = {_key(r) for r in doc["rules3"]}
    return doc["rules3"] + [r for r in scored_alone(doc, threshold) if _key(r) not in have]


def _key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (row["subject"], row["relation"], row["object"], row["quote"])


def choose_threshold(docs: list[dict[str, Any]], kept_rows=rules_and_scored) -> tuple[float, dict[str, Any]]:
    """The held-out threshold with the best F1 of item recall and label precision."""
    best = (-1.0, 0.5, {})
    for t in np.arange(0.05, 0.95, 0.025):
        f = figures(docs, lambda d, t=t: kept_rows(d, t))
        score = _f1(f["recall"], f["label_precision"])
        if score > best[0]:
            best = (score, round(float(t), 3), f)
    return best[1], best[2]


def _f1(r: float | None, p: float | None) -> float:
    return 0.0 if not r or not p else 2 * r * p / (r + p)


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def collected(docs: list[dict[str, Any]], collect_rows: Any, cache: Path | None,
              keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """The documents with their rows (`keys`): read from `cache` when it exists, else collected by
    `collect_rows(docs)` and, when a cache is named, written there for the next run."""
    if cache and cache.is_file():
        cached = json.loads(cache.read_text())
        for doc in docs:
            doc.update(cached[doc["name"]])
        return docs
    collect_rows(docs)
    if cache:
        cache.write_text(json.dumps({d["name"]: {k: d[k] for k in keys} for d in docs}))
    return docs


# --- command -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write ingest/scorer.json")
    parser.add_argument("--cache", type=Path, help="candidate rows: read when present, else written here")
    parser.add_argument("--json", type=Path, help="write the per-document figures here")
    parser.add_argument("--extra-corpus", type=Path, action="append", default=[],
                        help="a folder holding labelled documents kept outside the repository (repeatable)")
    args = parser.parse_args()
    docs = training_documents(args.extra_corpus, skip_absent=True)
    docs = collected(docs, collect, args.cache, ("candidates", "rules3"))
    leave_one_out(docs)
    threshold, held_out = choose_threshold(docs)
    alone_threshold, alone = choose_threshold(docs, scored_alone)
    report = {"documents": len(docs), "threshold": threshold, "leave_one_out": held_out,
              "scorer_alone": {"threshold": alone_threshold, **alone},
              "candidates_upper_bound": figures(docs, lambda d: d["candidates"] + d["rules3"]),
              "rules3_same_documents": figures(docs, lambda d: d["rules3"])}
    print(json.dumps(report, indent=2))
    per_doc = {d["name"]: {"learned": figures([d], lambda d: rules_and_scored(d, threshold)),
                           "rules3": figures([d], lambda d: d["rules3"])} for d in docs}
    if args.json:
        args.json.write_text(json.dumps({"summary": report, "documents": per_doc}, indent=2))
    if args.write:
        write_weights(docs, threshold, report)


def write_weights(docs: list[dict[str, Any]], threshold: float, report: dict[str, Any]) -> None:
    from kskill.ingest.scorer import FEATURES, WEIGHTS

    data = [examples(d) for d in docs]
    model = fit(np.vstack([x for x, _ in data]), np.concatenate([y for _, y in data]))
    payload = {
        "features": list(FEATURES),
        "weights": [round(float(v), 6) for v in model["weights"]],
        "bias": round(float(model["bias"]), 6),
        "mean": [round(float(v), 6) for v in model["mean"]],
        "scale": [round(float(v), 6) for v in model["scale"]],
        "threshold": threshold,
        "trained_on": sorted(d["name"] for d in docs),
        "leave_one_out": report,
    }
    target = Path(__file__).resolve().parent.parent / "ingest" / WEIGHTS.name  # the source tree, not an install
    target.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {target} ({len(docs)} documents, threshold {threshold}, {sum(len(y) for _, y in data)} examples)")


if __name__ == "__main__":
    main()
