"""`kskill ingest`: walk, load, extract, resolve and write, file by file, each file in one transaction.

A file that cannot be used (bad bytes, bad note, an extractor or store failure) is reported
with its reason and the walk goes on. A file whose content hash and extractor version match
what the graph already holds for its path is skipped (unless forced); a changed file, or one
read by another extractor version, replaces what its earlier reading said.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kskill.graph_schema import ingest_queries as iq
from kskill.graph_schema.model import Condition
from kskill.graph_schema.store import GraphStore

from .claims import Claim
from .errors import FileRejected
from .extract_rules import RuleExtractor, RuleSettings
from .linking import EntityLinker
from .loaders import MAX_PDF_BYTES, MAX_TEXT_BYTES, Document, discover, load_document
from .notes import is_note, note_citation, parse_note
from .resolve import Resolution, Resolver
from .writer import FilePlan, existing, plan_file, source_for, write_plan

log = logging.getLogger(__name__)


class Extractor(Protocol):
    name: str
    version: str  # recorded on each Source; another version re-reads the file

    def extract(self, doc: Document) -> list[Claim]: ...


@dataclass
class IngestOptions:
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    dry_run: bool = False
    force: bool = False  # re-extract files the graph already holds unchanged
    min_confidence: float = 0.5
    learned: bool = True  # the offline extractor uses its learned scorer (False: the rules alone, rules-9)
    precision: bool = False  # and its sentence-level precision model (precision-10; off by default, see RuleSettings)
    sense: bool = False  # and the sense check (sense-8; off by default, see RuleSettings)
    max_text_bytes: int = MAX_TEXT_BYTES
    max_pdf_bytes: int = MAX_PDF_BYTES


@dataclass
class FileReport:
    path: str
    status: str  # ingested | unchanged | skipped | failed (dry runs: "would ingest")
    reason: str = ""
    kind: str = ""
    pages: int = 0
    note: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    triples: list[dict[str, Any]] = field(default_factory=list)
    source: dict[str, str] = field(default_factory=dict)  # kind, title and authors recorded for the file


@dataclass
class IngestReport:
    files: list[FileReport] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {"files": len(self.files), "pages": sum(f.pages for f in self.files)}
        for f in self.files:
            out[f.status] = out.get(f.status, 0) + 1
            for key, value in f.counts.items():
                out[key] = out.get(key, 0) + value
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "seconds": round(self.seconds, 3), "totals": self.totals(),
                "files": [vars(f) for f in self.files]}


Progress = Callable[[str, int, int], None]  # (path, done, total)


class Ingestor:
    """Runs ingest over paths against one store; the extractor and retriever are chosen by the caller."""

    def __init__(self, store: GraphStore, extractor: Extractor | None = None, retriever=None,
                 options: IngestOptions | None = None, on_written: Callable[[], None] | None = None):
        self.store = store
        self.options = options or IngestOptions()
        nodes = store.run(iq.SKILL_NODES)
        self.metrics = {r["id"]: r["type"] or "number" for r in store.run(iq.METRIC_NAMES)}
        self.resolver = Resolver(nodes, retriever)
        self.extractor = extractor or RuleExtractor(
            EntityLinker(nodes, store.run(iq.METRIC_TEXTS), retriever),
            RuleSettings(min_confidence=self.options.min_confidence, learned=self.options.learned,
                         precision=self.options.precision, sense=self.options.sense))
        self.on_written = on_written

    def run(self, paths: Sequence[Path], progress: Progress | None = None) -> IngestReport:
        started = time.perf_counter()
        report = IngestReport(dry_run=self.options.dry_run)
        found = discover(paths, self.options.include, self.options.exclude)
        wrote = False
        for i, item in enumerate(found):
            if item.skipped:
                status = "failed" if item.missing else "skipped"
                report.files.append(FileReport(str(item.path), status, item.skipped))
            else:
                file_report = self.ingest_file(item.path)
                wrote = wrote or file_report.status == "ingested"
                report.files.append(file_report)
            if progress:
                progress(str(item.path), i + 1, len(found))
        if wrote and self.on_written is not None:
            self.on_written()  # the vector index catches up with the new nodes and evidence
        report.seconds = time.perf_counter() - started
        return report

    def ingest_file(self, path: Path) -> FileReport:
        report = FileReport(str(path), "failed")
        try:
            doc = load_document(path, self.options.max_text_bytes, self.options.max_pdf_bytes)
            report.kind, report.pages = doc.kind, doc.pages
            uri = path.resolve().as_uri()
            held = self.store.run(iq.SOURCE_BY_URI, {"uri": uri})
            report.note = is_note(doc)
            version = "note" if report.note else self.extractor.version
            if held and held[0]["content_hash"] == doc.content_hash and not self.options.force:
                if held[0]["extractor"] in (version, None) or report.note:
                    report.status, report.reason = "unchanged", "already ingested with this content"
                    return report
                report.reason = f"re-read: extracted by {held[0]['extractor']}, now {version}"
            plan = self.plan(doc, uri, report.note, version)
            report.triples = [_triple_row(c, self.resolver.proposed) for c in plan.claims]
            report.source = {"kind": plan.source.kind, "title": plan.source.title, "authors": plan.source.authors}
            nodes, edges = existing(self.store, plan)
            report.counts = plan.counts(nodes, edges)
            if self.options.dry_run:
                report.status = "would ingest"
                return report
            write_plan(self.store, plan, replaces=held[0]["id"] if held else None)
            report.status = "ingested"
        except FileRejected as exc:
            report.reason = str(exc)
        except Exception as exc:  # one file's failure (store, extractor, a library bug) must not stop the rest
            log.debug("ingest of %s failed", path, exc_info=True)
            report.reason = f"{type(exc).__name__}: {exc}"
        return report

    def plan(self, doc: Document, uri: str, note: bool, version: str = "") -> FilePlan:
        claims = parse_note(doc, self.metrics) if note else self.extractor.extract(doc)
        kind = "note" if note else doc.source_kind
        source = source_for(uri, doc.title, kind, doc.content_hash, note_citation(doc) if note else "",
                            authors=doc.authors, extractor=version)
        resolved: list[tuple[Claim, Resolution, Resolution | None]] = []
        for claim in claims:
            subject = self.resolver.resolve(claim.subject)
            obj = None
            if claim.object is not None and not hasattr(claim.object, "metric"):
                obj = self.resolver.resolve(claim.object)
            final = claim.with_refs(subject.ref, obj.ref if obj else claim.object)
            resolved.append((final, subject, obj))
        return plan_file(source, resolved)


def _triple_row(claim: Claim, proposed: set[str]) -> dict[str, Any]:
    """A claim as the report lists it. A side that is a proposal (a node new to the base, whether this file or an
    earlier one proposed it) carries the kind and name this file gives it: what a file says does not depend on the
    order in which files are read (the counts tell created from merged nodes)."""
    subject, relation, obj = claim.triple
    row = {"subject": subject, "relation": relation, "object": obj, "confidence": claim.confidence,
           "extractor": claim.extractor, "quote": claim.evidence.quote, "location": claim.evidence.location,
           "kind": claim.kind}
    if claim.gain is not None:
        row["gain"] = claim.gain
    if claim.figures:
        row["figures"] = list(claim.figures)
    for side, ref in (("subject", claim.subject), ("object", claim.object)):
        if hasattr(ref, "kind") and getattr(ref, "id", "") in proposed:
            row[f"{side}_proposed"] = {"kind": ref.kind, "name": ref.name, "nearest": list(ref.nearest)}
    if isinstance(claim.object, Condition) and claim.object.status == "proposed":
        row["object_proposed"] = {"kind": "Condition", "name": claim.object.text, "nearest": []}
    return row
