"""Every Cypher constant and builder in graph_schema/ runs on the embedded store, and on Neo4j
whenever KSKILL_NEO4J_URI names a server (a throwaway database: these tests empty it).

A new query constant without an entry in PARAMS fails `test_every_constant_is_covered`, so the
suite grows with the code.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import kskill.graph_schema as graph_schema
from kskill.graph_schema import queries
from kskill.graph_schema.model import NODE_TYPES, RELATIONSHIPS

QUERY_MODULES = [
    importlib.import_module(f"kskill.graph_schema.{m.name}")
    for m in pkgutil.iter_modules(graph_schema.__path__) if m.name.endswith("queries")
]

# name -> parameters to run it with (on a graph that holds the built-in skill base)
PARAMS: dict[str, dict] = {
    "RECORD_MIGRATION": {"id": "m999", "now": "t"},
    "APPLIED_MIGRATIONS": {},
    "SKILLBASE_STATE": {},
    "RECORD_SKILLBASE": {"version": "0", "content_hash": "h", "now": "t"},
    "DELETE_STALE_BUILTIN_NODES": {"keep": ["nothing-matches-this"]},
    "DELETE_STALE_BUILTIN_EDGES": {"keep": []},
    "DELETE_ALL": {},
    "COUNT_BY_LABEL": {},
    "COUNT_BY_REL": {},
    "LIST_SKILLS": {"kind": "Technique", "status": None},
    "NODE_BY_ID": {"id": "kernel_fusion"},
    "NODE_NEIGHBOURS": {"id": "kernel_fusion"},
    "NODE_EVIDENCE": {"id": "kernel_fusion"},
    "CHECK_NODES_WITHOUT_ID": {},
    "CHECK_UNKNOWN_LABELS": {"labels": list(NODE_TYPES)},
    "CHECK_DUPLICATE_IDS": {},
    "CHECK_EDGE_ENDPOINTS": {},
    "CHECK_EVIDENCE_WITHOUT_SOURCE": {},
    "CHECK_SKILLS_WITHOUT_EVIDENCE": {},
    "CHECK_BOTTLENECKS_WITHOUT_SIGNATURE": {},
    "CHECK_CONDITIONS_UNKNOWN_METRIC": {},
    "CHECK_ATTEMPTS_WITHOUT_RUN": {},
    # planner_queries
    "BOTTLENECK_SIGNATURES": {"obs": {"dram_throughput_pct": 90.0}, "statuses": ["accepted"]},
    "CONDITION_TEXTS": {"ids": ["cond:none"]},
    "BLOCKING_GUARDS": {"obs": {}, "statuses": ["accepted"], "bottlenecks": ["memory_bandwidth"]},
    "NAMED_BLOCKING_GUARDS": {"obs": {}, "statuses": ["accepted"], "techniques": ["kernel_fusion"]},
    "CANDIDATE_EDGES": {"statuses": ["accepted"], "bottlenecks": ["memory_bandwidth"], "blocked": ["cuda_graph"]},
    "NAMED_TECHNIQUES": {"statuses": ["accepted"], "techniques": ["kernel_fusion", "nowhere"]},
    "LINEAGE_TECHNIQUES": {"parent": "att:none"},
    "CHILD_OUTCOMES": {"parent": "att:none"},
    "RUN_VARIANTS_OUT_OF_TOLERANCE": {"parent": "att:none"},
    "RUN_TECHNIQUES_OUT_OF_TOLERANCE": {"parent": "att:none", "repeats": 2},
    "RECORD_OUTCOME": {"bottleneck": "memory_bandwidth", "technique": "kernel_fusion", "gain": 1.2, "min_gain": 1.01},
    "WRITE_DECISION": {"id": "dec:conformance", "tier": "rule", "case": "c", "now": "t"},
    "WRITE_OBSERVATIONS": {"decision": "dec:conformance", "rows": [{"id": "obs:c", "props": {"metric": "m"}}]},
    "WRITE_MATCHED_BOTTLENECKS": {"decision": "dec:conformance", "rows": [{"bottleneck": "memory_bandwidth"}]},
    "WRITE_MATCHED_CONDITIONS": {"decision": "dec:conformance", "rows": []},
    "WRITE_SELECTED": {"decision": "dec:conformance", "rows": [
        {"technique": "kernel_fusion", "bottleneck": "b", "rank": 1, "outcome": "written as attempt 1"}]},
    "TECHNIQUE_VARIANTS": {"statuses": ["accepted"], "techniques": ["gemm_epilogue_fusion", "nowhere"]},
    "VARIANT_BLOCKING_GUARDS": {"obs": {"rtol": 1e-6}, "statuses": ["accepted"], "techniques": ["gemm_epilogue_fusion"]},
    "WRITE_GENERATED": {"decision": "dec:conformance", "rows": [
        {"variant": "gemm_epilogue_fusion.library", "technique": "gemm_epilogue_fusion", "attempt": 1}]},
    "WRITE_RULED_OUT": {"decision": "dec:conformance", "rows": [
        {"variant": "gemm_epilogue_fusion.triton_tf32", "technique": "gemm_epilogue_fusion", "reason": "r"}]},
    "WRITE_REJECTED": {"decision": "dec:conformance", "rows": [{"technique": "cuda_graph", "reason": "r"}]},
    # trajectory_queries
    "WRITE_RUN": {"id": "run-conformance", "props": {"problem": "p", "status": "running"}, "now": "t"},
    "WRITE_ATTEMPT": {"run": "run-conformance", "id": "att:conformance", "now": "t",
                      "props": {"n": 1, "kind": "seed", "code_hash": "h", "status": "pending"}},
    "LINK_DERIVED_FROM": {"child": "att:conformance", "parent": "att:conformance-parent"},
    "LINK_APPLIED": {"attempt": "att:conformance", "techniques": ["kernel_fusion"]},
    "LINK_DECIDED_BY": {"attempt": "att:conformance", "decision": "dec:conformance"},
    "WRITE_FAILURE": {"attempt": "att:conformance", "id": "fail:conformance", "now": "t",
                      "props": {"failure_class": "compile", "message": "m"}},
    "LINK_FAILURE_PATTERNS": {"failure": "fail:conformance", "patterns": ["fp_timeout"]},
    "RUN_BY_ID": {"id": "run-conformance"},
    "LIST_RUNS": {"limit": 5},
    "RUN_ATTEMPTS": {"run": "run-conformance"},
    "FAILURE_PATTERNS": {"statuses": ["accepted"]},
    "DECISION_OBSERVATIONS": {"decision": "dec:conformance"},
    "DECISION_MATCHED": {"decision": "dec:conformance"},
    "DECISION_SELECTED": {"decision": "dec:conformance"},
    "DECISION_REJECTED": {"decision": "dec:conformance"},
    "DECISION_VARIANTS": {"decision": "dec:conformance"},
    "DECISION_ADDRESSED": {"decision": "dec:conformance"},
    # printed for Neo4j Browser, which draws the nodes and paths they return; the port returns plain
    # values only, so here they run on ids that match nothing (parsed and planned, no rows)
    "AUDIT_ATTEMPT_SUBGRAPH": {"attempt": "att:none"},
    "AUDIT_RUN_SUBGRAPH": {"run": "run-none"},
    # retrieval_queries
    "EVIDENCE_TEXTS": {},
    "EVIDENCE_FINGERPRINT": {},
    # ingest_queries
    "SKILL_NODES": {},
    "METRIC_NAMES": {},
    "METRIC_TEXTS": {},
    "SOURCE_BY_URI": {"uri": "file:///nowhere.md"},
    "SOURCE_EVIDENCE_IDS": {"source": "src:nowhere"},
    "EXISTING_IDS": {"ids": ["kernel_fusion", "nowhere"]},
    "FORGET_SOURCE_EVIDENCE": {"source": "src:nowhere"},
    "FORGET_SOURCE_ON_EDGES": {"source": "src:nowhere", "evidence": []},
    "DELETE_UNSOURCED_EDGES": {},
    "DELETE_UNSUPPORTED_PROPOSALS": {},
    "DELETE_UNUSED_CONDITIONS": {},
    "LIST_PROPOSALS": {},
    "LIST_PROPOSED_EDGES": {},
    "NODES_WITH_STATUS": {"ids": ["kernel_fusion"], "status": "accepted"},
    "SET_NODE_STATUS": {"ids": ["nowhere"], "status": "accepted", "now": "t"},
    "ACCEPT_SETTLED_EDGES": {"ids": ["nowhere"]},
    "UNMEASURED_CONDITION": {"id": "cond:none"},
    "SET_EDGE_STATUS": {"start": "a", "end": "b", "rel": "REQUIRES", "status": "accepted"},
}
# Writes that would empty the graph run last, in their own tests.
DESTRUCTIVE = {"DELETE_ALL", "DELETE_STALE_BUILTIN_NODES", "DELETE_STALE_BUILTIN_EDGES"}


def _constants():
    for module in QUERY_MODULES:
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and not name.startswith("_"):
                yield module.__name__.rsplit(".", 1)[1], name, value


CONSTANTS = sorted(_constants())


@pytest.fixture(params=["embedded", "neo4j"])
def any_store(request):
    if request.param == "embedded":
        store = request.getfixturevalue("store")
    else:
        store = request.getfixturevalue("neo4j_store")
        from kskill.graph_schema.skillbase import ensure_builtin

        ensure_builtin(store, force=True)
    return store


def test_every_constant_is_covered():
    missing = [f"{mod}.{name}" for mod, name, _ in CONSTANTS if name not in PARAMS]
    assert not missing, f"add parameters for {missing} to PARAMS in this file"


@pytest.mark.parametrize("module,name,text", [c for c in CONSTANTS if c[1] not in DESTRUCTIVE],
                         ids=lambda v: v if isinstance(v, str) and v.isupper() else "")
def test_constant_runs(any_store, module, name, text):
    if name not in PARAMS:
        pytest.fail(f"{module}.{name} has no parameters in PARAMS")
    rows = any_store.run(text, PARAMS[name])
    assert isinstance(rows, list)


def test_reads_return_the_skill_base(any_store):
    assert any_store.run(queries.NODE_BY_ID, PARAMS["NODE_BY_ID"])[0]["kind"] == "Technique"
    assert any_store.run(queries.NODE_EVIDENCE, PARAMS["NODE_EVIDENCE"]), "kernel_fusion cites evidence"
    labels = {r["label"] for r in any_store.run(queries.COUNT_BY_LABEL)}
    assert {"Bottleneck", "Technique", "Condition", "Metric", "FailurePattern", "Source", "Evidence"} <= labels


@pytest.mark.parametrize("label", sorted(NODE_TYPES))
def test_node_builders_run(any_store, label):
    any_store.write(queries.merge_nodes(label), {"rows": [{"id": "conformance-node", "props": {"name": "c"}}],
                                                  "now": "t"})
    rows = any_store.run(queries.all_nodes(label), {"skip": 0, "limit": 100000})
    assert any(r["props"]["id"] == "conformance-node" for r in rows)


@pytest.mark.parametrize("rel", sorted(RELATIONSHIPS))
def test_edge_builders_run(any_store, rel):
    start, end = sorted(RELATIONSHIPS[rel])[0]
    for label, node_id in ((start, "conf-a"), (end, "conf-b")):
        any_store.write(queries.merge_nodes(label), {"rows": [{"id": node_id, "props": {}}], "now": "t"})
    any_store.write(queries.merge_edges(rel, start, end),
                    {"rows": [{"start": "conf-a", "end": "conf-b", "props": {"w": 1}}]})
    rows = any_store.run(queries.all_edges(rel), {"skip": 0, "limit": 100000})
    assert any(r["start"] == "conf-a" and r["end"] == "conf-b" and r["props"]["w"] == 1 for r in rows)


def test_destructive_writes(any_store):
    any_store.write(queries.DELETE_STALE_BUILTIN_EDGES, {"keep": []})
    assert not any_store.run("MATCH ()-[r]->() WHERE r.origin = 'builtin' RETURN r LIMIT 1")
    any_store.write(queries.DELETE_STALE_BUILTIN_NODES, {"keep": []})
    assert not any_store.run("MATCH (n) WHERE n.origin = 'builtin' RETURN n.id LIMIT 1")
    any_store.write(queries.DELETE_ALL)
    assert any_store.run(queries.COUNT_BY_LABEL) == []
