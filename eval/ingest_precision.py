"""Fit the ingest precision model (does a kept claim's sentence state it?) and estimate it by document.

    python -m kskill.eval.ingest_precision [--extra-corpus DIR] [--cache FILE] [--write] [--json OUT]

Documents: the tune material (eval/ingest_train.training_documents). For each, learned-1 (the rules and the
learned scorer, without this model) reads it, and two sets of claim rows are kept: every candidate the rules
see (the examples) and what learned-1 keeps (what the model filters). A candidate's target is, in order:
- a person's verdict, where the claim and its sentence were judged (eval/ingest/runs/*-judgement.md);
- right, when it is a labelled item read from the passage the label quotes;
- with `--examples all` only: wrong, when it is no labelled item at all (a correct claim nobody listed then
  counts as wrong, which teaches what a document is about rather than what a sentence states: left out by
  default);
- left out otherwise (a labelled item read from another sentence: the labels cannot tell).

Cross-validation by document: for each document, a model fitted on the others' examples scores what
learned-1 keeps in it; no sentence of a held-out document is ever in training. The threshold is chosen on
those pooled held-out scores (best F0.5 of item recall and the precision a person judged: precision counts
twice), and
the figures are reported beside learned-1 unfiltered: item recall, label precision, and the precision over
the kept claims a person judged. `--write` fits the final model on every document and writes
ingest/precision.json with the threshold and these figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from .ingest_eval import ingest_home
from .ingest_judged import judged_index, load_judged, verdict_for
from .ingest_scoring import found, in_scope
from .ingest_train import _same_passage, claim_row, collected, figures, fit, predict, training_documents


def collect(docs: list[dict[str, Any]]) -> None:
    """Each document's candidate rows and the rows learned-1 keeps, with their signals."""
    from kskill.graph_schema import ingest_queries as iq
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
    from kskill.ingest.linking import EntityLinker
    from kskill.ingest.loaders import load_document

    with ingest_home() as (store, retriever, _home):
        linker = EntityLinker(store.run(iq.SKILL_NODES), store.run(iq.METRIC_TEXTS), retriever)
        learned = RuleExtractor(linker, RuleSettings(precision=False))
        for doc in docs:
            ruled, weak = learned.read(load_document(Path(doc["path"])))
            rows = {}
            for claim in ruled + weak:
                rows.setdefault((*claim.triple, claim.evidence.quote), claim_row(claim))
            doc["candidates"] = in_scope(list(rows.values()), doc["scope"])
            doc["kept"] = in_scope([claim_row(c) for c in learned.kept(ruled, weak)], doc["scope"])


def examples(doc: dict[str, Any], judged: dict, source: str = "all") -> tuple[np.ndarray, np.ndarray]:
    """Signals and targets of a document's candidates (see the module docstring for the targets). `source`:
    "all" (verdicts and labels), "judged" (verdicts only), "positives" (verdicts, and labelled items read from
    the quoted passage: the labels' negatives, claims nobody listed, left out)."""
    from kskill.ingest.precision import PRECISION_FEATURES, with_interactions
    from kskill.ingest.scorer import as_vector

    xs, ys = [], []
    for r in doc["candidates"]:
        target = target_of(doc, r, judged)
        judged_row = verdict_for(doc["name"], r, judged) is not None
        if source == "judged" and not judged_row or source == "positives" and not judged_row and target != 1.0:
            continue
        if target is not None:
            xs.append(as_vector(with_interactions(r["signals"]), PRECISION_FEATURES))
            ys.append(target)
    return np.array(xs, dtype=float).reshape(len(xs), len(PRECISION_FEATURES)), np.array(ys)


def target_of(doc: dict[str, Any], row: dict[str, Any], judged: dict) -> float | None:
    verdict = verdict_for(doc["name"], row, judged)
    if verdict is not None:
        return 1.0 if verdict else 0.0
    matched = [item for item in doc["items"] if found(item, [row])]
    if matched and not any(_same_passage(row["quote"], item.get("quote", "")) for item in matched):
        return None
    return 1.0 if matched else 0.0


def cross_validate(docs: list[dict[str, Any]], judged: dict, source: str) -> None:
    """Each document's kept rows scored by a model fitted on the other documents (`doc["held_out"]`)."""
    from kskill.ingest.precision import PRECISION_FEATURES, with_interactions
    from kskill.ingest.scorer import as_vector

    data = [examples(d, judged, source) for d in docs]
    for i, doc in enumerate(docs):
        rest = [data[j] for j in range(len(docs)) if j != i and len(data[j][1])]
        model = fit(np.vstack([x for x, _ in rest]), np.concatenate([y for _, y in rest]))
        x = np.array([as_vector(with_interactions(r["signals"]), PRECISION_FEATURES) for r in doc["kept"]],
                     dtype=float)
        doc["held_out"] = predict(model, x.reshape(-1, len(PRECISION_FEATURES)))


def kept_at(doc: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    return [r for r, p in zip(doc["kept"], doc["held_out"]) if p >= threshold]


def judged_precision(docs: list[dict[str, Any]], judged: dict, threshold: float) -> dict[str, Any]:
    """Among the kept claims a person judged (distinct per document), how many are right."""
    right = total = 0
    for doc in docs:
        verdicts = {}
        for r in kept_at(doc, threshold):
            verdict = verdict_for(doc["name"], r, judged)
            if verdict is not None:
                verdicts[(r["subject"], r["relation"], r["object"], r["quote"])] = verdict
        right += sum(verdicts.values())
        total += len(verdicts)
    return {"right": right, "judged": total, "precision": round(right / total, 3) if total else None}


def curve(docs: list[dict[str, Any]], judged: dict) -> list[dict[str, Any]]:
    out = []
    for t in np.arange(0.0, 0.9, 0.025):
        t = round(float(t), 3)
        out.append({"threshold": t, **figures(docs, lambda d, t=t: kept_at(d, t)),
                    "judged": judged_precision(docs, judged, t)})
    return out


def choose(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The threshold with the best F0.5 of item recall and judged precision (precision counts twice)."""
    def f_half(p: dict[str, Any]) -> float:
        r, q = p["recall"] or 0.0, p["judged"]["precision"] or 0.0
        return 0.0 if not r or not q else 1.25 * r * q / (0.25 * q + r)
    return max(points, key=f_half)


def write_model(docs: list[dict[str, Any]], judged: dict, source: str, chosen: dict[str, Any],
                report: dict[str, Any]) -> None:
    from kskill.ingest.precision import PRECISION_FEATURES, PRECISION_WEIGHTS

    data = [examples(d, judged, source) for d in docs]
    model = fit(np.vstack([x for x, _ in data]), np.concatenate([y for _, y in data]))
    payload = {
        "features": list(PRECISION_FEATURES),
        "weights": [round(float(v), 6) for v in model["weights"]],
        "bias": round(float(model["bias"]), 6),
        "mean": [round(float(v), 6) for v in model["mean"]],
        "scale": [round(float(v), 6) for v in model["scale"]],
        "threshold": chosen["threshold"],
        "examples": source,
        "trained_on": sorted(d["name"] for d in docs),
        "cross_validated": report,
    }
    target = Path(__file__).resolve().parent.parent / "ingest" / PRECISION_WEIGHTS.name  # the source tree
    target.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {target} ({len(docs)} documents, threshold {chosen['threshold']}, "
          f"{sum(len(y) for _, y in data)} examples)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extra-corpus", type=Path, action="append", default=[],
                        help="a folder holding labelled documents kept outside the repository (repeatable)")
    parser.add_argument("--cache", type=Path, help="claim rows: read when present, else written here")
    parser.add_argument("--write", action="store_true", help="write ingest/precision.json")
    parser.add_argument("--json", type=Path, help="write the whole curve and per-document figures here")
    parser.add_argument("--examples", choices=["all", "judged", "positives"], default="positives",
                        help="which candidates train the model (see examples())")
    args = parser.parse_args()
    docs = collected(training_documents(args.extra_corpus), collect, args.cache, ("candidates", "kept"))
    judged = judged_index(load_judged())
    cross_validate(docs, judged, args.examples)
    points = curve(docs, judged)
    chosen = choose(points)
    report = {"documents": len(docs), "examples": args.examples, "learned1_unfiltered": points[0], "chosen": chosen}
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": report, "curve": points}, indent=2))
    if args.write:
        write_model(docs, judged, args.examples, chosen, report)


if __name__ == "__main__":
    main()
