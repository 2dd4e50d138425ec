"""From one file's resolved claims to graph writes, landed in one transaction.

A `FilePlan` holds the Source, its Evidence (with SUPPORTED_BY and FROM), new proposed
nodes, conditions, and claim edges. Writing a plan first takes back what an earlier version
of the same file said (its evidence, its ids on shared edges, edges only it supported),
then writes the new payload, then drops proposals that no evidence supports any more.
Existing nodes are never overwritten: a merge adds evidence to them, nothing else.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kskill.graph_schema import ingest_queries as iq
from kskill.graph_schema.migrations import now_iso
from kskill.graph_schema.model import (
    AddressedBy, Bottleneck, Condition, Evidence, Node, ProtocolStep, Source, Technique, stable_id,
)
from kskill.graph_schema.skillbase import BATCH, GraphPayload, write_payload
from kskill.graph_schema.store import GraphStore

from .claims import Claim, EntityRef, Span
from .resolve import Resolution

ORIGIN = "ingest"
INGESTED_PRIORITY = 10  # below every built-in technique link: ingested links are tie-breakers until reviewed
SKILL_MODELS = {"Bottleneck": Bottleneck, "Technique": Technique, "ProtocolStep": ProtocolStep}


@dataclass
class ClaimEdge:
    rel: str
    start_label: str
    start: str
    end_label: str
    end: str
    props: dict[str, Any]
    evidence: list[str]


@dataclass
class FilePlan:
    source: Source
    fresh: GraphPayload = field(default_factory=GraphPayload)  # Source, Evidence, SUPPORTED_BY, FROM
    new_nodes: dict[str, Node] = field(default_factory=dict)  # proposed skills and new conditions
    merged_ids: set[str] = field(default_factory=set)
    edges: dict[tuple[str, str, str], ClaimEdge] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    nearest: dict[str, list[str]] = field(default_factory=dict)  # proposed node -> closest existing nodes

    def counts(self, existing_nodes: set[str], existing_edges: set[tuple[str, str, str]]) -> dict[str, int]:
        created_nodes = [n for n in self.new_nodes if n not in existing_nodes]
        return {
            "claims": len(self.claims),
            "nodes_created": len(created_nodes),
            "nodes_merged": len(self.merged_ids | (set(self.new_nodes) & existing_nodes)),
            "edges_created": len([k for k in self.edges if k not in existing_edges]),
            "edges_merged": len([k for k in self.edges if k in existing_edges]),
            "evidence": len([n for n in self.fresh.nodes.values() if isinstance(n, Evidence)]),
        }


def source_for(uri: str, title: str, kind: str, content_hash: str, citation: str = "", authors: str = "",
               extractor: str = "") -> Source:
    return Source(id=stable_id("src", uri), kind=kind, title=title[:200] or uri, uri=uri, citation=citation,
                  authors=authors, content_hash=content_hash, extractor=extractor)


def plan_file(source: Source, resolved: list[tuple[Claim, Resolution, Resolution | None]]) -> FilePlan:
    """The writes for one file. `resolved` pairs each claim with its resolved subject and object
    (None for conditions and GAIN)."""
    plan = FilePlan(source=source)
    plan.fresh.add(source)
    for claim, subject, obj in resolved:
        plan.claims.append(claim)
        start = _skill_node(plan, subject)
        spans = (claim.evidence, *claim.extra_evidence)
        evidence = [_evidence(plan, source, span, claim) for span in spans]
        for ev in evidence:
            plan.fresh.link("SUPPORTED_BY", start, ev)
        if claim.relation in ("GAIN", "SUPPORTS"):
            continue
        if isinstance(claim.object, Condition):
            end = plan.new_nodes.setdefault(claim.object.id, claim.object)
        else:
            end = _skill_node(plan, obj)
        for ev in evidence:
            plan.fresh.link("SUPPORTED_BY", end, ev)
        props = {"origin": ORIGIN, "status": "proposed", "confidence": claim.confidence, "extractor": claim.extractor}
        if claim.relation == "ADDRESSED_BY":
            link = AddressedBy(priority=claim.priority if claim.priority is not None else INGESTED_PRIORITY,
                               expected_gain=max(claim.gain or 1.0, 1.0))
            props.update(link.model_dump(include={"priority", "expected_gain"}))
        key = (claim.relation, start.id, end.id)
        edge = plan.edges.setdefault(key, ClaimEdge(claim.relation, start.label, start.id, end.label, end.id, props, []))
        edge.evidence.extend(ev.id for ev in evidence if ev.id not in edge.evidence)
    return plan


def _skill_node(plan: FilePlan, resolution: Resolution) -> Node:
    ref: EntityRef = resolution.ref
    model = SKILL_MODELS[ref.kind]
    if resolution.merged:
        plan.merged_ids.add(ref.id)
        # A stand-in that carries label and id for linking; it is never written.
        return model(id=ref.id, name=ref.name or ref.id, description=ref.description or ref.id)
    if ref.id not in plan.new_nodes:
        plan.new_nodes[ref.id] = model(id=ref.id, name=ref.name or ref.id,
                                       description=ref.description or f"Proposed from {plan.source.title}.",
                                       status="proposed")
        if ref.nearest:
            plan.nearest[ref.id] = [n for n in ref.nearest if n != ref.id]
    return plan.new_nodes[ref.id]


def _evidence(plan: FilePlan, source: Source, span: Span, claim: Claim) -> Evidence:
    ev = Evidence(id=stable_id("ev", source.id, span.quote, span.location), quote=span.quote,
                  location=span.location, confidence=round(claim.confidence, 3), claim=claim.kind,
                  figures=[f for f in claim.figures if f in span.quote],
                  gain=claim.gain if span == claim.evidence else None)
    ev = plan.fresh.add(ev)
    plan.fresh.link("FROM", ev, source)
    return ev


# --- reading what exists (for counts and --dry-run) ------------------------------------------

def existing(store: GraphStore, plan: FilePlan) -> tuple[set[str], set[tuple[str, str, str]]]:
    ids = list(plan.new_nodes)
    nodes = {r["id"] for r in store.run(iq.EXISTING_IDS, {"ids": ids})} if ids else set()
    edges: set[tuple[str, str, str]] = set()
    for (rel, start_label, end_label), rows in _edge_rows(plan).items():
        for row in store.run(iq.existing_edges(rel, start_label, end_label), {"rows": rows}):
            edges.add((rel, row["start"], row["end"]))
    return nodes, edges


def _edge_rows(plan: FilePlan) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    rows: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for edge in plan.edges.values():
        rows[(edge.rel, edge.start_label, edge.end_label)].append(
            {"start": edge.start, "end": edge.end, "props": edge.props, "evidence": edge.evidence,
             "source": plan.source.id})
    return rows


# --- writing -------------------------------------------------------------------------------

def write_plan(store: GraphStore, plan: FilePlan, replaces: str | None) -> None:
    """Write one file's plan in one transaction; `replaces` is the id of the Source it supersedes."""
    old_evidence = [r["id"] for r in store.run(iq.SOURCE_EVIDENCE_IDS, {"source": replaces})] if replaces else []
    now = now_iso()
    with store.transaction() as tx:
        if replaces:
            tx.write(iq.FORGET_SOURCE_ON_EDGES, {"source": replaces, "evidence": old_evidence})
            tx.write(iq.FORGET_SOURCE_EVIDENCE, {"source": replaces})
        _create_nodes(tx, plan, now)
        write_payload(tx, plan.fresh, origin=ORIGIN)
        for (rel, start_label, end_label), rows in _edge_rows(plan).items():
            for i in range(0, len(rows), BATCH):
                tx.write(iq.claim_edges(rel, start_label, end_label), {"rows": rows[i:i + BATCH], "now": now})
        if replaces:
            # After the new payload, so that a link the new version still makes keeps its review status.
            tx.write(iq.DELETE_UNSOURCED_EDGES)
            tx.write(iq.DELETE_UNSUPPORTED_PROPOSALS)
            tx.write(iq.DELETE_UNUSED_CONDITIONS)


def _create_nodes(tx: GraphStore, plan: FilePlan, now: str) -> None:
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    measured: list[dict[str, Any]] = []
    for node in plan.new_nodes.values():
        props = node.properties()
        props.pop("created_at", None)
        props["origin"] = ORIGIN
        if plan.nearest.get(node.id):
            props["nearest"] = plan.nearest[node.id]
        by_label[node.label].append({"id": node.id, "props": props})
        if isinstance(node, Condition) and node.metric:  # a proposed condition has no metric yet
            measured.append({"start": node.id, "end": node.metric, "props": {"origin": ORIGIN}})
    for label, rows in by_label.items():
        for i in range(0, len(rows), BATCH):
            tx.write(iq.create_nodes(label), {"rows": rows[i:i + BATCH], "now": now})
    if measured:
        tx.write(iq.create_edges("MEASURED_BY", "Condition", "Metric"), {"rows": measured})
