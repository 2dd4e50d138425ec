"""Scoring what `kskill ingest` read from a document against what an expert expects from it.

Labels (eval/ingest/labels_corpus.yaml) list items per document: evidence for an existing node,
claim edges, gains, figures, proposals, or either of two readings. A file's extraction is the
list of claim rows the pipeline reports (`FileReport.triples`). Recall is the share of items
found; the extracted items themselves are judged by a person from a printed sample, since a
correct extraction an expert did not think of is not an error.

A proposal (and an edge or a gain whose side is given by {match: ...}) is found in a file's rows
when a side is a proposed node of that kind and name: one the file proposes, or one an earlier
file proposed and this file gives evidence to (the pipeline reports both alike). Scores are the
same whatever the order in which the documents were ingested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Row = Mapping[str, Any]


@dataclass
class DocumentLabel:
    name: str
    half: str
    items: list[dict[str, Any]]
    kind: str = ""
    title: str = ""
    subject: tuple[str, ...] = ()
    scope: str | None = None


def load_corpus_labels(path: Path) -> dict[str, DocumentLabel]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))["documents"]
    return {name: DocumentLabel(name, entry["half"], entry["items"], entry.get("kind", ""), entry.get("title", ""),
                                tuple(entry.get("subject") or ()), entry.get("scope"))
            for name, entry in data.items()}


def in_scope(rows: Iterable[Row], scope: str | None) -> list[Row]:
    """Rows located in a section whose title matches `scope` (all rows when there is no scope)."""
    if not scope:
        return list(rows)
    pattern = re.compile(scope)
    return [r for r in rows if pattern.search(_section(r.get("location", "")))]


def _section(location: str) -> str:
    m = re.match(r"section (.*), offset \d+$", location)
    return m.group(1) if m else ""


def found(item: Mapping[str, Any], rows: list[Row]) -> bool:
    """Whether an expected item is among the extracted rows."""
    if "any" in item:
        return any(found(alt, rows) for alt in item["any"])
    if "evidence" in item:
        node = item["evidence"]
        return any(node in (r["subject"], r["object"]) for r in rows)
    if "edge" in item:
        subject, relation, obj = item["edge"]
        return any(r["relation"] == relation and _is(r, "subject", subject) and _is(r, "object", obj) for r in rows)
    if "gain" in item:
        subject, factor = item["gain"]
        return any(r.get("gain") and abs(r["gain"] - factor) <= 0.05 * factor and _is(r, "subject", subject)
                   for r in rows)
    if "figure" in item:
        node, number = item["figure"]
        wanted = re.compile(rf"(?<![\d.]){re.escape(f'{number:g}')}(?![\d])")
        return any(node in (r["subject"], r["object"]) and any(wanted.search(f) for f in r.get("figures", ()))
                   for r in rows)
    if "proposal" in item:
        spec = item["proposal"]
        pattern = re.compile(spec["match"], re.I)
        return any((p := r.get(f"{side}_proposed")) and p["kind"] == spec["kind"] and pattern.search(p["name"])
                   for r in rows for side in ("subject", "object"))
    raise ValueError(f"unknown label item {item}")


def _is(row: Row, side: str, want: Any) -> bool:
    """The row's subject or object is `want`: an id, a condition text, or {match: regex} on a proposal."""
    if isinstance(want, Mapping):
        proposed = row.get(f"{side}_proposed")
        return bool(proposed) and re.search(want["match"], proposed["name"], re.I) is not None
    return row[side] == want


def items_of(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The distinct things extracted from one file, each with the sentence that supports it."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["subject"], r["relation"], r["object"])
        if key in out and out[key]["confidence"] >= r["confidence"]:
            continue
        out[key] = {"item": describe(r), "quote": r["quote"], "location": r["location"], "confidence": r["confidence"]}
    return list(out.values())


def describe(row: Row) -> str:
    """A claim row in words a reviewer can judge."""
    subject = _name(row, "subject")
    relation, obj = row["relation"], _name(row, "object")
    if relation == "SUPPORTS":
        what = f" ({row['kind']})" if row.get("kind") else ""
        return f"evidence for {subject}{what}"
    if relation == "GAIN":
        return f"{subject} gives a {row['gain']:g}x speedup"
    return f"{subject} {relation} {obj}"


def _name(row: Row, side: str) -> str:
    proposed = row.get(f"{side}_proposed")
    if proposed:
        return f"NEW {proposed['kind']} '{proposed['name']}'"
    return str(row[side])


def recall(labels: Iterable[DocumentLabel], rows_by_doc: Mapping[str, list[Row]]) -> dict[str, Any]:
    """Per document and pooled: items expected, found, and which were missed."""
    per_doc: dict[str, Any] = {}
    expected = hit = 0
    for label in labels:
        rows = in_scope(rows_by_doc.get(label.name, []), label.scope)
        found_items = [found(i, rows) for i in label.items]
        per_doc[label.name] = {"expected": len(label.items), "found": sum(found_items),
                               "missed": [_label_text(i) for i, ok in zip(label.items, found_items) if not ok],
                               "subject_evidence": _subject_evidence(label, rows)}
        expected += len(label.items)
        hit += sum(found_items)
    return {"documents": per_doc, "expected": expected, "found": hit, "recall": hit / expected if expected else None}


def _subject_evidence(label: DocumentLabel, rows: list[Row]) -> bool | None:
    if not label.subject:
        return None
    return any(r["subject"] in label.subject or r["object"] in label.subject for r in rows)


def _label_text(item: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in item.items() if k != "quote")
