"""The built-in skill base: YAML files under graph_schema/skills/, validated and loaded idempotently.

The files are the authored source of truth; `read_builtin()` turns them into a `GraphPayload`
(typed nodes plus edges) and `ensure_builtin()` writes that payload when the stored version or
content hash differs. Built-in nodes and edges carry `origin: builtin`; an upgrade replaces them
and never touches what users ingested.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml
from pydantic import ValidationError

from . import queries
from .errors import SchemaError
from .migrations import now_iso
from .model import (
    RELATIONSHIPS, AddressedBy, Bottleneck, Condition, Evidence, FailurePattern, Metric, Node, ProtocolStep,
    Source, Technique, Variant, stable_id,
)
from .store import GraphStore

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster
SKILL_FILES = ("skillbase", "sources", "metrics", "bottlenecks", "techniques", "failures", "protocol")
BATCH = 500


@dataclass(frozen=True)
class Edge:
    rel: str
    start_label: str
    start: str
    end_label: str
    end: str
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.rel}:{self.start}->{self.end}"


@dataclass
class GraphPayload:
    """Nodes and edges ready to write; ids are unique per label."""

    nodes: dict[tuple[str, str], Node] = field(default_factory=dict)  # (label, id) -> node
    edges: list[Edge] = field(default_factory=list)
    _keys: set[str] = field(default_factory=set, repr=False)

    def add(self, node: Node) -> Node:
        return self.nodes.setdefault((node.label, node.id), node)

    def get(self, label: str, node_id: str) -> Node | None:
        return self.nodes.get((label, node_id))

    def link(self, rel: str, start: Node, end: Node, **props: Any) -> None:
        if (start.label, end.label) not in RELATIONSHIPS[rel]:
            raise SchemaError(f"{rel} cannot join {start.label} to {end.label}")
        edge = Edge(rel, start.label, start.id, end.label, end.id, props)
        if edge.key not in self._keys:  # a condition shared by several skills is measured once
            self._keys.add(edge.key)
            self.edges.append(edge)


@dataclass(frozen=True)
class SkillBaseInfo:
    version: str
    content_hash: str
    payload: GraphPayload


def read_builtin() -> SkillBaseInfo:
    """Parse and validate the packaged skill files."""
    return parse_skill_texts(_builtin_texts())


def _builtin_texts() -> dict[str, str]:
    folder = resources.files("kskill.graph_schema") / "skills"
    texts = {}
    for name in SKILL_FILES:
        try:
            texts[name] = (folder / f"{name}.yaml").read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise SchemaError(f"the built-in skill base lacks skills/{name}.yaml") from exc
    return texts


def _digest(texts: dict[str, str]) -> str:
    return hashlib.sha256("".join(texts[n] for n in SKILL_FILES).encode()).hexdigest()[:16]


def parse_skill_texts(texts: dict[str, str]) -> SkillBaseInfo:
    return _parse_cached(tuple(texts[n] for n in SKILL_FILES))


@functools.lru_cache(maxsize=4)
def _parse_cached(ordered: tuple[str, ...]) -> SkillBaseInfo:
    texts = dict(zip(SKILL_FILES, ordered))
    digest = _digest(texts)
    data = {name: _load_yaml(name, text) for name, text in texts.items()}
    version = str((data["skillbase"] or {}).get("version", ""))
    if not version:
        raise SchemaError("skills/skillbase.yaml must state a version")
    payload = GraphPayload()
    builder = _Builder(payload)
    for entry in data["sources"] or []:
        builder.node("sources", Source, entry)
    for entry in data["metrics"] or []:
        builder.node("metrics", Metric, entry)
    for entry in data["techniques"] or []:
        builder.technique(entry)
    for entry in data["bottlenecks"] or []:
        builder.bottleneck(entry)
    for entry in data["failures"] or []:
        builder.failure(entry)
    for entry in data["protocol"] or []:
        builder.node("protocol", ProtocolStep, entry, drop=("evidence",))
    builder.resolve_references()
    return SkillBaseInfo(version=version, content_hash=digest, payload=payload)


def ensure_builtin(store: GraphStore, force: bool = False) -> bool:
    """Load the built-in skill base unless the store already holds this exact content."""
    texts = _builtin_texts()
    state = store.run(queries.SKILLBASE_STATE)
    if state and state[0]["content_hash"] == _digest(texts) and not force:
        return False
    info = parse_skill_texts(texts)
    with store.transaction() as tx:
        write_payload(tx, info.payload, origin="builtin")
        tx.write(queries.DELETE_STALE_BUILTIN_EDGES, {"keep": [e.key for e in info.payload.edges]})
        tx.write(queries.DELETE_STALE_BUILTIN_NODES, {"keep": [f"{label}:{node_id}" for label, node_id in info.payload.nodes]})
        tx.write(queries.RECORD_SKILLBASE,
                 {"version": info.version, "content_hash": info.content_hash, "now": now_iso()})
    return True


def write_payload(store: GraphStore, payload: GraphPayload, origin: str) -> None:
    """Upsert nodes by label, then edges by type, in UNWIND batches."""
    now = now_iso()
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in payload.nodes.values():
        props = node.properties()
        props.pop("created_at", None)
        props["origin"] = origin
        by_label[node.label].append({"id": node.id, "props": props})
    for label, rows in by_label.items():
        for chunk in _chunks(rows):
            store.write(queries.merge_nodes(label), {"rows": chunk, "now": now})
    by_shape: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for edge in payload.edges:
        props = dict(edge.props, origin=origin, key=edge.key)
        by_shape[(edge.rel, edge.start_label, edge.end_label)].append(
            {"start": edge.start, "end": edge.end, "props": props})
    for (rel, start, end), rows in by_shape.items():
        for chunk in _chunks(rows):
            store.write(queries.merge_edges(rel, start, end), {"rows": chunk})


def _chunks(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [rows[i:i + BATCH] for i in range(0, len(rows), BATCH)]


def _load_yaml(name: str, text: str) -> Any:
    try:
        return yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise SchemaError(f"skills/{name}.yaml is not valid YAML: {exc}") from exc


class _Builder:
    """Turns YAML entries into nodes and edges, collecting references to check at the end."""

    def __init__(self, payload: GraphPayload):
        self.payload = payload
        # rel, start label, start id, end label, end id, props
        self.pending: list[tuple[str, str, str, str, str, dict[str, Any]]] = []

    def node(self, where: str, model: type[Node], entry: dict[str, Any], drop: tuple[str, ...] = ()) -> Node:
        fields = {k: v for k, v in entry.items() if k not in drop}
        try:
            node = model(**fields)
        except ValidationError as exc:
            raise SchemaError(f"skills/{where}.yaml entry {entry.get('id', '?')!r}: {_first_error(exc)}") from exc
        if self.payload.get(node.label, node.id) is not None:
            raise SchemaError(f"skills/{where}.yaml: id {node.id!r} is used twice")
        self.payload.add(node)
        self._evidence(where, node, entry.get("evidence") or [])
        return node

    def technique(self, entry: dict[str, Any]) -> None:
        node = self.node("techniques", Technique, entry,
                         drop=("requires", "forbidden_when", "conflicts_with", "evidence", "variants"))
        self.guards(node, entry)
        for other in entry.get("conflicts_with") or []:
            self.pending.append(("CONFLICTS_WITH", node.label, node.id, "Technique", other, {}))
        for spec in entry.get("variants") or []:
            if not isinstance(spec, dict) or not isinstance(spec.get("params", {}), dict):
                raise SchemaError(f"skills/techniques.yaml {node.id!r}: a variant is a mapping with params, "
                                  f"got {spec!r}")
            fields = {**spec, "params": json.dumps(spec.get("params") or {}, sort_keys=True)}
            variant = self.node("techniques", Variant, fields, drop=("requires", "forbidden_when", "evidence"))
            self.payload.link("HAS_VARIANT", node, variant)
            self.guards(variant, spec)

    def guards(self, node: Node, entry: dict[str, Any]) -> None:
        """The REQUIRES and FORBIDDEN_WHEN conditions of a technique or a variant."""
        for spec in entry.get("requires") or []:
            self.payload.link("REQUIRES", node, self.condition("techniques", node.id, spec))
        for spec in entry.get("forbidden_when") or []:
            self.payload.link("FORBIDDEN_WHEN", node, self.condition("techniques", node.id, spec))

    def bottleneck(self, entry: dict[str, Any]) -> None:
        node = self.node("bottlenecks", Bottleneck, entry, drop=("signature", "techniques", "evidence"))
        if not entry.get("signature"):
            raise SchemaError(f"skills/bottlenecks.yaml entry {node.id!r} has no signature")
        for spec in entry["signature"]:
            self.payload.link("DETECTED_BY", node, self.condition("bottlenecks", node.id, spec))
        for link in entry.get("techniques") or []:
            try:
                props = AddressedBy(priority=link["priority"], expected_gain=link["expected_gain"])
            except (KeyError, ValidationError, TypeError) as exc:
                raise SchemaError(f"skills/bottlenecks.yaml {node.id!r}: bad technique link {link!r}") from exc
            self.pending.append(("ADDRESSED_BY", node.label, node.id, "Technique", link["technique"],
                                 props.model_dump(include={"priority", "expected_gain"})))

    def failure(self, entry: dict[str, Any]) -> None:
        node = self.node("failures", FailurePattern, entry, drop=("remedied_by", "evidence"))
        for technique in entry.get("remedied_by") or []:
            self.pending.append(("REMEDIED_BY", node.label, node.id, "Technique", technique, {}))

    def condition(self, where: str, owner: str, spec: Any) -> Condition:
        if not isinstance(spec, list) or len(spec) not in (2, 3):
            raise SchemaError(f"skills/{where}.yaml {owner!r}: a condition is [metric, op, value], got {spec!r}")
        try:
            cond = Condition.of(*spec)
        except ValidationError as exc:
            raise SchemaError(f"skills/{where}.yaml {owner!r}: condition {spec!r}: {_first_error(exc)}") from exc
        cond = self.payload.add(cond)
        self.pending.append(("MEASURED_BY", cond.label, cond.id, "Metric", cond.metric, {}))
        return cond

    def _evidence(self, where: str, node: Node, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("quote") or not entry.get("source"):
                raise SchemaError(f"skills/{where}.yaml {node.id!r}: evidence needs a source and a quote")
            evidence = self.payload.add(Evidence(
                id=stable_id("ev", entry["source"], entry["quote"]), quote=entry["quote"].strip(),
                location=str(entry.get("location", "")), confidence=float(entry.get("confidence", 1.0))))
            self.payload.link("SUPPORTED_BY", node, evidence)
            self.pending.append(("FROM", evidence.label, evidence.id, "Source", entry["source"], {}))

    def resolve_references(self) -> None:
        for rel, start_label, start_id, end_label, end_id, props in self.pending:
            end = self.payload.get(end_label, end_id)
            if end is None:
                raise SchemaError(f"{start_label} {start_id!r} refers to unknown {end_label} {end_id!r}")
            self.payload.link(rel, self.payload.get(start_label, start_id), end, **props)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err['msg']}" if where else err["msg"]
