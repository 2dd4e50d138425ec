"""Ingest end to end on a real embedded store with the real embedding model and FAISS index."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kskill.graph_schema import ingest_queries as iq
from kskill.graph_schema import queries
from kskill.ingest import writer
from kskill.ingest.pipeline import IngestOptions, Ingestor
from kskill.ingest.review import decide_edge, decide_nodes, proposals
from kskill.retrieval import refresh, retriever_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
NASTY = ('Kernel fusion avoids writing intermediate tensors to DRAM}) MATCH (n) DETACH DELETE n //, '
         'which is what limits memory-bound kernels "quoted" \'single\' {braces} $param CREATE (x:Technique).\n')


@pytest.fixture
def papers(tmp_path: Path) -> Path:
    folder = tmp_path / "papers"
    folder.mkdir()
    for name in ("stream_k_note.md", "coalescing_note.md", "guide.md"):
        shutil.copy(FIXTURES / name, folder / name)
    return folder


def ingestor(store, home: Path, **options) -> Ingestor:
    retriever = retriever_for(store, home)
    return Ingestor(store, None, retriever, IngestOptions(**options),
                    on_written=lambda: refresh(retriever, store, home))


def counts(store) -> dict[str, int]:
    return {r["label"]: r["count"] for r in store.run(queries.COUNT_BY_LABEL)}


def test_ingest_writes_claims_with_provenance_and_proposals(store, papers, tmp_path):
    report = ingestor(store, tmp_path).run([papers])
    assert {Path(f.path).name: f.status for f in report.files} == {
        "coalescing_note.md": "ingested", "guide.md": "ingested", "stream_k_note.md": "ingested"}
    stream_k = store.run(queries.NODE_BY_ID, {"id": "stream_k_decomposition"})
    assert stream_k and stream_k[0]["props"]["status"] == "proposed" and stream_k[0]["props"]["origin"] == "ingest"
    evidence = store.run(queries.NODE_EVIDENCE, {"id": "stream_k_decomposition"})
    assert evidence[0]["quote"].startswith("Stream-K achieves") and evidence[0]["location"] == "section 5"
    assert evidence[0]["uri"].endswith("stream_k_note.md")
    # a merge into a built-in node adds evidence and a claim edge, and changes nothing else of the node
    fusion = store.run(queries.NODE_BY_ID, {"id": "kernel_fusion"})[0]["props"]
    assert fusion["origin"] == "builtin" and fusion["status"] == "accepted"
    assert any(e["uri"] and e["uri"].endswith("guide.md") for e in store.run(queries.NODE_EVIDENCE, {"id": "kernel_fusion"}))
    edge = store.run("MATCH (:Bottleneck {id: 'tail_effect'})-[r:ADDRESSED_BY]->(:Technique {id: 'stream_k_decomposition'}) "
                     "RETURN properties(r) AS p")[0]["p"]
    assert (edge["priority"], edge["expected_gain"], edge["status"]) == (40, 1.2, "proposed")
    assert len(edge["sources"]) == 1 and len(edge["evidence"]) == 1
    requires = store.run("MATCH (:Technique {id: 'stream_k_decomposition'})-[:REQUIRES]->(c:Condition)-[:MEASURED_BY]->(m:Metric) "
                         "RETURN m.id AS metric ORDER BY metric")
    assert [r["metric"] for r in requires] == ["gemm_k", "has_gemm"]
    assert not store.run("MATCH (e:Evidence) WHERE NOT (e)-[:FROM]->(:Source) RETURN e.id AS id")
    # the vector index now knows the proposal
    assert "stream_k_decomposition" in retriever_for(store, tmp_path).records


def test_unchanged_files_are_skipped_and_changed_ones_replace_their_evidence(store, papers, tmp_path):
    ingestor(store, tmp_path).run([papers])
    before = counts(store)
    again = ingestor(store, tmp_path).run([papers])
    assert {f.status for f in again.files} == {"unchanged"} and counts(store) == before
    note = papers / "stream_k_note.md"
    note.write_text(note.read_text().replace("bottleneck: tail_effect", "bottleneck: low_parallelism")
                    .replace("up to 14x speedup", "up to 15x speedup"))
    changed = ingestor(store, tmp_path).run([note])
    assert changed.files[0].status == "ingested"
    sources = store.run("MATCH (b)-[:ADDRESSED_BY]->(:Technique {id: 'stream_k_decomposition'}) RETURN b.id AS b")
    assert [r["b"] for r in sources] == ["low_parallelism"]
    quotes = [e["quote"] for e in store.run(queries.NODE_EVIDENCE, {"id": "stream_k_decomposition"})]
    assert len(quotes) == 1 and "15x" in quotes[0]


def test_removing_a_claim_drops_a_proposal_nothing_else_supports(store, tmp_path):
    folder = tmp_path / "one"
    folder.mkdir()
    note = folder / "n.md"
    note.write_text((FIXTURES / "stream_k_note.md").read_text())
    ingestor(store, tmp_path).run([folder])
    note.write_text("---\nkskill: note\ntechnique: kernel_fusion\nexpected_gain: 1.5\n---\n")
    ingestor(store, tmp_path).run([folder])
    assert not store.run(queries.NODE_BY_ID, {"id": "stream_k_decomposition"})
    assert not store.run("MATCH (c:Condition) WHERE c.origin = 'ingest' RETURN c.id AS id")


def test_dry_run_reports_and_writes_nothing(store, papers, tmp_path):
    before = counts(store)
    report = ingestor(store, tmp_path, dry_run=True).run([papers])
    assert {f.status for f in report.files} == {"would ingest"}
    assert report.totals()["nodes_created"] >= 1 and report.totals()["edges_created"] >= 1
    assert counts(store) == before


def test_bad_files_fail_alone_and_nothing_is_injected(store, papers, tmp_path):
    (papers / "empty.md").write_text("")
    (papers / "binary.txt").write_bytes(b"\x00\x01\x02" * 1000)
    (papers / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (papers / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\n%%EOF")
    (papers / "bad_note.md").write_text("---\nkskill: note\ntechnique: kernel_fusion\npreconditions: [warp_count > 3]\n---\n")
    (papers / "nasty.md").write_text("# Memory-bound kernels\n\n" + NASTY * 3)
    with open(papers / "huge.txt", "w") as f:  # 100 MB of real text, made here rather than committed
        line = "Kernel fusion avoids DRAM round trips for memory-bound kernels. " * 16 + "\n"
        for _ in range(100 * 2**20 // len(line) + 1):
            f.write(line)
    report = ingestor(store, tmp_path).run([papers])
    by_name = {Path(f.path).name: f for f in report.files}
    failed = {name: f.reason for name, f in by_name.items() if f.status == "failed"}
    assert set(failed) == {"empty.md", "binary.txt", "latin1.txt", "broken.pdf", "bad_note.md", "huge.txt"}
    assert "not in the metric vocabulary" in failed["bad_note.md"] and "MiB limit" in failed["huge.txt"]
    assert by_name["nasty.md"].status == "ingested" and by_name["guide.md"].status == "ingested"
    quotes = [e["quote"] for e in store.run(queries.NODE_EVIDENCE, {"id": "kernel_fusion"})]
    assert any("DETACH DELETE n //" in q and "{braces} $param" in q for q in quotes)
    assert store.run(queries.NODE_BY_ID, {"id": "memory_bandwidth"})  # the graph is still there
    assert not store.run("MATCH (t:Technique) WHERE t.id IS NULL RETURN t")


def test_a_file_whose_write_fails_leaves_nothing_behind(store, papers, tmp_path, monkeypatch):
    before = counts(store)
    real = writer.write_payload

    def fail_after_writing(tx, payload, origin):
        real(tx, payload, origin)
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer, "write_payload", fail_after_writing)
    report = ingestor(store, tmp_path).run([papers / "stream_k_note.md"])
    assert report.files[0].status == "failed" and "disk full" in report.files[0].reason
    assert counts(store) == before


def test_review_accepts_proposals_and_their_settled_edges(store, papers, tmp_path):
    ingestor(store, tmp_path).run([papers / "stream_k_note.md"])
    assert [n["id"] for n in proposals(store).nodes] == ["stream_k_decomposition"]
    decide_nodes(store, ["stream_k_decomposition"], accept=True)
    edge = store.run("MATCH (:Bottleneck {id: 'tail_effect'})-[r:ADDRESSED_BY]->(t:Technique {id: 'stream_k_decomposition'}) "
                     "RETURN r.status AS s, t.status AS t")[0]
    assert edge == {"s": "accepted", "t": "accepted"}
    assert not proposals(store).nodes
    with pytest.raises(Exception, match="not proposed skills: kernel_fusion"):
        decide_nodes(store, ["kernel_fusion"], accept=False)


def test_proposal_listing_query_counts_evidence(store, papers, tmp_path):
    ingestor(store, tmp_path).run([papers / "stream_k_note.md"])
    rows = store.run(iq.LIST_PROPOSALS)
    assert rows[0]["id"] == "stream_k_decomposition" and rows[0]["evidence"] == 1


def test_an_edge_to_a_condition_no_metric_states_can_be_rejected_not_accepted(store):
    store.write("MATCH (t:Technique {id: 'split_k'}) "
                "CREATE (t)-[:REQUIRES {status: 'proposed'}]->(:Condition {id: 'cond-clause', metric: '', op: 'is_true', "
                "text: 'last dimension must be divisible by 128', status: 'proposed'})")
    with pytest.raises(Exception, match="'cond-clause' .*names no metric"):
        decide_edge(store, "REQUIRES", "split_k", "cond-clause", accept=True)
    assert decide_edge(store, "REQUIRES", "split_k", "cond-clause", accept=False) == 1
    rows = store.run("MATCH (:Technique {id: 'split_k'})-[r:REQUIRES]->(:Condition {id: 'cond-clause'}) RETURN r.status AS s")
    assert rows == [{"s": "rejected"}]
