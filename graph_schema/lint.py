"""`kskill skills lint`: find skills the Planner can never use, or uses on shaky ground.

The skill graph is copied into networkx for reachability; condition sets are checked for
contradictions by intersecting, metric by metric, the value sets each condition allows.
Errors make the skill base wrong (the command exits non-zero); warnings deserve a look.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import networkx as nx

from . import queries
from .store import GraphStore

PAGE = 1_000_000
NUMERIC_OPS = {"<", "<=", ">", ">="}


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" or "warning"
    rule: str
    subject: str
    detail: str


def lint_skills(store: GraphStore, statuses: tuple[str, ...] = ("accepted",)) -> list[Finding]:
    graph = _load(store)
    findings = _reachability(graph, statuses) + _conditions(graph) + _sources(graph)
    return sorted(findings, key=lambda f: (f.severity != "error", f.rule, f.subject))


def _load(store: GraphStore) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph()
    for label in ("Bottleneck", "Technique", "Variant", "ProtocolStep", "FailurePattern", "Condition", "Metric",
                  "Evidence", "Source"):
        for row in store.run(queries.all_nodes(label), {"skip": 0, "limit": PAGE}):
            graph.add_node((label, row["props"]["id"]), label=label, **row["props"])
    for rel in ("DETECTED_BY", "ADDRESSED_BY", "REQUIRES", "FORBIDDEN_WHEN", "CONFLICTS_WITH", "REMEDIED_BY",
                "MEASURED_BY", "SUPPORTED_BY", "FROM", "HAS_VARIANT"):
        for row in store.run(queries.all_edges(rel), {"skip": 0, "limit": PAGE}):
            graph.add_edge((row["start_label"], row["start"]), (row["end_label"], row["end"]), key=rel, rel=rel)
    return graph


def _out(graph: nx.MultiDiGraph, node: tuple[str, str], rel: str) -> list[tuple[str, str]]:
    return [v for _, v, k in graph.out_edges(node, keys=True) if k == rel]


def _reachability(graph: nx.MultiDiGraph, statuses: tuple[str, ...]) -> list[Finding]:
    """A technique no usable bottleneck (or failure pattern) leads to can never be selected."""
    usable = [n for n, d in graph.nodes(data=True)
              if d["label"] in ("Bottleneck", "FailurePattern") and d.get("status", "accepted") in statuses]
    paths = nx.DiGraph()
    paths.add_nodes_from(graph.nodes)
    paths.add_edges_from((u, v) for u, v, k in graph.edges(keys=True) if k in ("ADDRESSED_BY", "REMEDIED_BY"))
    reached: set[tuple[str, str]] = set()
    for start in usable:
        reached |= nx.descendants(paths, start)
    findings = []
    for node, data in graph.nodes(data=True):
        if data["label"] == "Technique" and data.get("status", "accepted") in statuses and node not in reached:
            findings.append(Finding("error", "unreachable technique", node[1],
                                    "no usable bottleneck or failure pattern leads to it"))
        if data["label"] == "Bottleneck" and not _out(graph, node, "ADDRESSED_BY"):
            findings.append(Finding("warning", "bottleneck without techniques", node[1],
                                    "detecting it can never lead to an action"))
    return findings


def _conditions(graph: nx.MultiDiGraph) -> list[Finding]:
    findings = []
    metrics = {n[1]: d for n, d in graph.nodes(data=True) if d["label"] == "Metric"}
    for node, data in graph.nodes(data=True):
        if data["label"] != "Condition" or data.get("status") == "proposed":  # proposed by ingest: no metric until review
            continue
        metric = metrics.get(data.get("metric", ""))
        if metric is None:
            findings.append(Finding("error", "unknown metric", node[1],
                                    f"{data.get('text')}: {data.get('metric')!r} is not in the vocabulary"))
        elif not _fits_type(data, metric.get("type", "number")):
            findings.append(Finding("error", "unsatisfiable condition", node[1],
                                    f"{data.get('text')} can never hold for a {metric.get('type')} metric"))
    for node, data in graph.nodes(data=True):
        if data["label"] == "Bottleneck":
            what, conds = "signature", _out(graph, node, "DETECTED_BY")
        elif data["label"] in ("Technique", "Variant"):
            what, conds = "preconditions", _guards(graph, node, "REQUIRES")
        else:
            continue
        clash = _contradiction([graph.nodes[c] for c in conds])
        if clash:
            findings.append(Finding("error", f"contradictory {what}", node[1], clash))
        if data["label"] in ("Technique", "Variant"):
            required = [graph.nodes[c] for c in conds]
            for c in _guards(graph, node, "FORBIDDEN_WHEN"):
                forbidden = graph.nodes[c]
                if _implied(required, forbidden):
                    findings.append(Finding("error", "never eligible", node[1],
                                            f"its preconditions imply its exclusion {forbidden.get('text')}"))
        if data["label"] == "Variant" and not _owners(graph, node):
            findings.append(Finding("error", "variant without technique", node[1],
                                    "no technique HAS_VARIANT it, so no plan can propose it"))
    return findings


def _owners(graph: nx.MultiDiGraph, variant: tuple[str, str]) -> list[tuple[str, str]]:
    return [u for u, _, k in graph.in_edges(variant, keys=True) if k == "HAS_VARIANT"]


def _guards(graph: nx.MultiDiGraph, node: tuple[str, str], rel: str) -> list[tuple[str, str]]:
    """A node's own guards; a variant holds its technique's too, since it is only used with them."""
    found = _out(graph, node, rel)
    for owner in _owners(graph, node):
        found += _out(graph, owner, rel)
    return found


def _sources(graph: nx.MultiDiGraph) -> list[Finding]:
    findings = []
    for node, data in graph.nodes(data=True):
        if data["label"] not in ("Bottleneck", "Technique", "Variant", "FailurePattern"):
            continue
        cited = [s for e in _out(graph, node, "SUPPORTED_BY") for s in _out(graph, e, "FROM")]
        if not cited:
            findings.append(Finding("error", "no source", node[1], f"{data['label']} cites no Evidence from a Source"))
    return findings


# --- value-set reasoning -------------------------------------------------------------------

def _fits_type(cond: dict[str, Any], kind: str) -> bool:
    op, value, values = cond.get("op"), cond.get("value"), cond.get("values") or []
    if kind == "bool":
        return op == "is_true" or (op in ("==", "!=") and isinstance(value, bool)) or (
            op == "in" and all(isinstance(v, bool) for v in values))
    if kind == "number":
        if op == "is_true":
            return False
        operands = values if op == "in" else [value]
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in operands)
    return op in ("==", "!=", "in") and all(isinstance(v, str) for v in (values if op == "in" else [value]))


class _Allowed:
    """The values of one metric a set of conditions allows: an interval, a finite set, exclusions."""

    def __init__(self) -> None:
        self.lo, self.lo_open, self.hi, self.hi_open = -math.inf, False, math.inf, False
        self.choices: set[Any] | None = None
        self.excluded: set[Any] = set()

    def add(self, op: str, value: Any, values: list[Any]) -> None:
        if op == "is_true":
            op, value = "==", True
        if op in NUMERIC_OPS:
            if op in (">", ">=") and (value > self.lo or (value == self.lo and op == ">")):
                self.lo, self.lo_open = value, op == ">"
            if op in ("<", "<=") and (value < self.hi or (value == self.hi and op == "<")):
                self.hi, self.hi_open = value, op == "<"
        elif op == "==":
            self.choices = {value} if self.choices is None else self.choices & {value}
        elif op == "in":
            self.choices = set(values) if self.choices is None else self.choices & set(values)
        elif op == "!=":
            self.excluded.add(value)

    def empty(self) -> bool:
        if self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open)):
            return True
        if self.choices is None:
            return False
        return not [v for v in self.choices if v not in self.excluded and self._in_interval(v)]

    def _in_interval(self, v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return self.lo == -math.inf and self.hi == math.inf
        above = v > self.lo or (v == self.lo and not self.lo_open)
        below = v < self.hi or (v == self.hi and not self.hi_open)
        return above and below


def _allowed(conds: list[dict[str, Any]]) -> dict[str, _Allowed]:
    by_metric: dict[str, _Allowed] = defaultdict(_Allowed)
    for c in conds:
        by_metric[c.get("metric", "")].add(c.get("op"), c.get("value"), c.get("values") or [])
    return by_metric


def _contradiction(conds: list[dict[str, Any]]) -> str:
    for metric, allowed in sorted(_allowed(conds).items()):
        if allowed.empty():
            texts = [c.get("text") for c in conds if c.get("metric") == metric]
            return f"no value of {metric} satisfies {' and '.join(texts)}"
    return ""


def _implied(required: list[dict[str, Any]], forbidden: dict[str, Any]) -> bool:
    """True when every value the preconditions allow also satisfies the forbidding condition."""
    negation = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!="}.get(forbidden.get("op"))
    if forbidden.get("op") == "is_true":
        negation_cond = {"metric": forbidden["metric"], "op": "!=", "value": True}
    elif negation is None:
        return False
    else:
        negation_cond = {"metric": forbidden["metric"], "op": negation, "value": forbidden.get("value")}
    same_metric = [c for c in required if c.get("metric") == forbidden.get("metric")]
    if not same_metric:
        return False
    return _allowed(same_metric + [negation_cond])[forbidden["metric"]].empty()
