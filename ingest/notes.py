"""Structured engineering notes: Markdown that states a skill exactly, ingested without guessing.

Two spellings of the same content (README, "Engineering notes format"):

- YAML front matter with `kskill: note` and the keys bottleneck(s), technique, preconditions,
  forbidden_when, expected_gain, priority, evidence, source;
- fixed `##` headings: Bottleneck, Technique, Preconditions, Forbidden when, Expected gain,
  Priority, Evidence.

Bottleneck and technique are an existing id or a name (with a description). Preconditions are
Conditions over the metric vocabulary, written `metric op value` or `[metric, op, value]`; a
metric outside the vocabulary is a `NoteError` naming the closest known names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from kskill.graph_schema.model import Condition

from .claims import Claim, EntityRef, Span
from .errors import NoteError
from .loaders import Document

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
HEADING = re.compile(r"^##[ \t]+(.+?)[ \t#]*$", re.M)
HEADINGS = {"bottleneck": "bottleneck", "bottlenecks": "bottleneck", "technique": "technique",
            "preconditions": "preconditions", "requires": "preconditions", "forbidden when": "forbidden_when",
            "expected gain": "expected_gain", "priority": "priority", "evidence": "evidence"}
OPS = ("<=", ">=", "==", "!=", "<", ">", "in", "is_true")
CONDITION_TEXT = re.compile(r"^\s*([a-z0-9_]+)\s+(<=|>=|==|!=|<|>|in|is_true)\s*(.*?)\s*$")
GAIN_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(x|×|%)?")
MAX_PRIORITY = 100


def is_note(doc: Document) -> bool:
    """True for Markdown in the notes format (front matter `kskill: note`, or both fixed headings)."""
    if doc.kind != "markdown":
        return False
    front = FRONT_MATTER.match(doc.raw)
    if front:
        try:
            data = yaml.safe_load(front.group(1))
        except yaml.YAMLError:
            return "kskill: note" in front.group(1)  # malformed: parse_note reports it
        return isinstance(data, dict) and data.get("kskill") == "note"
    headings = {h.strip().lower() for h in HEADING.findall(doc.raw)}
    return {"bottleneck", "technique"} <= headings or {"bottlenecks", "technique"} <= headings


def parse_note(doc: Document, metrics: Mapping[str, str]) -> list[Claim]:
    """The note's claims; `metrics` maps vocabulary names to their type (number, bool, string)."""
    fields = _front_matter(doc) if FRONT_MATTER.match(doc.raw) else _headings(doc)
    return NoteReader(doc, metrics).claims(fields)


def note_citation(doc: Document) -> str:
    """A citation the note's front matter gives for the work it summarises, if any."""
    front = FRONT_MATTER.match(doc.raw)
    if not front:
        return ""
    try:
        data = yaml.safe_load(front.group(1)) or {}
    except yaml.YAMLError:
        return ""
    source = data.get("source") if isinstance(data, dict) else None
    if isinstance(source, dict):
        return " ".join(str(source.get(k, "")) for k in ("citation", "title", "uri") if source.get(k)).strip()
    return str(source or "")


def _front_matter(doc: Document) -> dict[str, Any]:
    text = FRONT_MATTER.match(doc.raw).group(1)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NoteError(f"the note's front matter is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise NoteError("the note's front matter must be a mapping of keys (bottleneck, technique, ...)")
    return data


def _headings(doc: Document) -> dict[str, Any]:
    matches = list(HEADING.finditer(doc.raw))
    fields: dict[str, Any] = {}
    for i, m in enumerate(matches):
        key = HEADINGS.get(m.group(1).strip().lower())
        if key is None:
            continue
        end = matches[i + 1].start() if i + 1 < len(matches) else len(doc.raw)
        body = doc.raw[m.end():end].strip()
        items = [line.strip()[2:].strip() for line in body.splitlines() if line.strip().startswith(("- ", "* "))]
        if key in ("preconditions", "forbidden_when"):
            fields[key] = items
        elif key == "bottleneck":
            fields[key] = items or [_name_description(body)]
        elif key == "technique":
            fields[key] = _name_description(body)
        elif key == "evidence":
            fields[key] = _quotes(body)
        else:
            fields[key] = body.splitlines()[0].strip() if body else ""
    return fields


def _name_description(body: str) -> Any:
    """`name: description` on the first line, or a name line followed by a description paragraph."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0].lstrip("-* ").strip()
    if len(lines) == 1 and ":" not in first:
        return first
    if ":" in first and len(lines) == 1:
        name, _, description = first.partition(":")
        return {"name": name.strip(), "description": description.strip()}
    return {"name": first.rstrip(":"), "description": " ".join(lines[1:])}


def _quotes(body: str) -> list[dict[str, str]]:
    """`> quote` lines, each optionally followed by `(location)` or `-- location`."""
    quotes = []
    for block in re.split(r"\n\s*\n", body):
        lines = [line.strip()[1:].strip() for line in block.splitlines() if line.strip().startswith(">")]
        if not lines:
            continue
        text = " ".join(lines)
        m = re.search(r"\s*(?:\(([^()]*)\)|--\s*(.+))\s*$", text)
        location = ""
        if m:
            location = (m.group(1) or m.group(2) or "").strip()
            text = text[:m.start()].strip()
        quotes.append({"quote": text.strip('"“” '), "location": location})
    return quotes


class NoteReader:
    """Validates a note's fields and turns them into claims of confidence 1."""

    def __init__(self, doc: Document, metrics: Mapping[str, str]):
        self.doc = doc
        self.metrics = metrics

    def claims(self, fields: dict[str, Any]) -> list[Claim]:
        unknown = sorted(set(fields) - {"kskill", "bottleneck", "bottlenecks", "technique", "preconditions",
                                         "requires", "forbidden_when", "expected_gain", "priority", "evidence",
                                         "source", "title"})
        if unknown:
            raise NoteError(f"unknown key {unknown[0]!r} in the note; see the README's 'Engineering notes format'")
        technique = self._skill("Technique", fields.get("technique"))
        if technique is None:
            raise NoteError("the note names no technique: add `technique:` (an id, or name and description)")
        bottlenecks_raw = fields.get("bottlenecks", fields.get("bottleneck"))
        if not isinstance(bottlenecks_raw, list):
            bottlenecks_raw = [bottlenecks_raw] if bottlenecks_raw else []
        bottlenecks = [b for b in (self._skill("Bottleneck", raw) for raw in bottlenecks_raw) if b]
        gain = self._gain(fields.get("expected_gain"))
        priority = self._priority(fields.get("priority"))
        spans = self._evidence(fields.get("evidence"), technique)
        first, rest = spans[0], tuple(spans[1:])

        def claim(subject: EntityRef, relation: str, obj: Any, **extra: Any) -> Claim:
            return Claim(subject, relation, obj, 1.0, first, "note", extra_evidence=rest, **extra)

        out = [claim(b, "ADDRESSED_BY", technique, gain=gain, priority=priority) for b in bottlenecks]
        for spec in fields.get("preconditions", fields.get("requires")) or []:
            out.append(claim(technique, "REQUIRES", self._condition(spec)))
        for spec in fields.get("forbidden_when") or []:
            out.append(claim(technique, "FORBIDDEN_WHEN", self._condition(spec)))
        if not bottlenecks and gain is not None:
            out.append(claim(technique, "GAIN", None, gain=gain))
        if not out:
            raise NoteError("the note states nothing to record: give a bottleneck, preconditions or an expected gain")
        return out

    def _skill(self, kind: str, raw: Any) -> EntityRef | None:
        if raw is None or raw == "":
            return None
        if isinstance(raw, str):
            raw = raw.strip()
            is_id = re.fullmatch(r"[a-z0-9][a-z0-9_]*", raw) is not None
            return EntityRef(kind, id=raw if is_id else "", name=raw)
        if isinstance(raw, dict):
            name = str(raw.get("name") or raw.get("id") or "").strip()
            if not name:
                raise NoteError(f"the note's {kind.lower()} needs an id or a name")
            return EntityRef(kind, id=str(raw.get("id") or ""), name=name, description=str(raw.get("description") or ""))
        raise NoteError(f"the note's {kind.lower()} must be an id, or a mapping with name and description")

    def _condition(self, spec: Any) -> Condition:
        if isinstance(spec, str):
            m = CONDITION_TEXT.match(spec)
            if not m:
                raise NoteError(f"precondition {spec!r} is not `metric op value` (ops: {', '.join(OPS)})")
            metric, op, value_text = m.groups()
            value: Any = yaml.safe_load(value_text) if value_text else None
        elif isinstance(spec, list) and len(spec) in (2, 3):
            metric, op, value = (spec + [None])[:3]
        else:
            raise NoteError(f"precondition {spec!r} is not `metric op value` or [metric, op, value]")
        metric = str(metric)
        if metric not in self.metrics:
            close = difflib.get_close_matches(metric, list(self.metrics), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise NoteError(f"precondition metric {metric!r} is not in the metric vocabulary{hint} "
                            "(`kskill skills` and graph_schema/skills/metrics.yaml list the names)")
        value = _typed(value, self.metrics[metric], op, spec)
        try:
            return Condition.of(metric, op, value)
        except ValidationError as exc:
            raise NoteError(f"precondition {spec!r}: {exc.errors()[0]['msg']}") from exc

    def _gain(self, raw: Any) -> float | None:
        if raw is None or raw == "":
            return None
        m = GAIN_TEXT.match(str(raw))
        if not m:
            raise NoteError(f"expected gain {raw!r} is not a speedup such as 1.5, 1.5x or 30%")
        value = float(m.group(1))
        value = 1 + value / 100 if m.group(2) == "%" else value
        if value < 1.0:
            raise NoteError(f"expected gain {raw!r} is below 1: state a speedup factor (1.0 means none)")
        return value

    def _priority(self, raw: Any) -> int | None:
        if raw is None or raw == "":
            return None
        try:
            value = int(str(raw).strip())
        except ValueError as exc:
            raise NoteError(f"priority {raw!r} is not a whole number from 0 to {MAX_PRIORITY}") from exc
        if not 0 <= value <= MAX_PRIORITY:
            raise NoteError(f"priority {value} is outside 0 to {MAX_PRIORITY}")
        return value

    def _evidence(self, raw: Any, technique: EntityRef) -> list[Span]:
        entries = raw if isinstance(raw, list) else ([raw] if raw else [])
        spans = []
        for entry in entries:
            if isinstance(entry, str):
                entry = {"quote": entry}
            if not isinstance(entry, dict) or not str(entry.get("quote") or "").strip():
                raise NoteError(f"evidence {entry!r} needs a quote")
            spans.append(Span(" ".join(str(entry["quote"]).split()), str(entry.get("location") or "note")))
        if not spans:  # the note itself is the evidence: quote what it says of the technique
            spans.append(Span(f"{technique.name}: {technique.description}".strip(": "), "note"))
        return spans


def _typed(value: Any, metric_type: str, op: str, spec: Any) -> Any:
    if op == "is_true":
        return None
    if op == "in":
        if not isinstance(value, list) or not value:
            raise NoteError(f"precondition {spec!r}: 'in' needs a list such as [float16, bfloat16]")
        return [_scalar(v, metric_type, spec) for v in value]
    if value is None:
        raise NoteError(f"precondition {spec!r}: {op!r} needs a value")
    return _scalar(value, metric_type, spec)


def _scalar(value: Any, metric_type: str, spec: Any) -> Any:
    if metric_type == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NoteError(f"precondition {spec!r}: the metric is a number, {value!r} is not")
        return value
    if metric_type == "bool":
        if not isinstance(value, bool):
            raise NoteError(f"precondition {spec!r}: the metric is true or false, {value!r} is not")
        return value
    return str(value)
