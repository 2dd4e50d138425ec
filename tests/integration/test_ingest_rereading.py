"""Re-extraction, source metadata and exit codes, on a real embedded store."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from click.testing import CliRunner
from ingest_support import pdf_bytes

from kskill.cli import cli
from kskill.graph_schema import queries
from kskill.ingest.pipeline import IngestOptions, Ingestor

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "ingest" / "formats"


class Versioned:
    """An extractor that says one thing per version, so that a version change is visible in the graph."""

    name = "rules"

    def __init__(self, version: str, claim_for):
        self.version = version
        self.claim_for = claim_for

    def extract(self, doc):
        return self.claim_for(doc, self.version)


def fixed_claims(doc, version):
    from kskill.ingest.claims import Claim, EntityRef, Span

    technique = "software_pipelining" if version == "v1" else "kernel_fusion"
    quote = f"Read by {version}: this text explains {technique} in a full sentence."
    return [Claim(EntityRef("Technique", technique), "SUPPORTS", None, 0.9, Span(quote, "offset 0"), "rules")]


def evidence_sources(store, node_id: str) -> list[str]:
    return [e["quote"] for e in store.run(queries.NODE_EVIDENCE, {"id": node_id}) if e["uri"]]


def test_force_and_a_new_extractor_version_reread_and_take_back_the_old_reading(store, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(FORMATS / "notes.txt", folder / "notes.txt")
    Ingestor(store, Versioned("v1", fixed_claims)).run([folder])
    assert any("Read by v1" in q for q in evidence_sources(store, "software_pipelining"))

    same = Ingestor(store, Versioned("v1", fixed_claims)).run([folder])
    assert same.files[0].status == "unchanged"
    forced = Ingestor(store, Versioned("v1", fixed_claims), options=IngestOptions(force=True)).run([folder])
    assert forced.files[0].status == "ingested"
    assert len([q for q in evidence_sources(store, "software_pipelining") if "Read by v1" in q]) == 1

    upgraded = Ingestor(store, Versioned("v2", fixed_claims)).run([folder])
    assert upgraded.files[0].status == "ingested" and "v1, now v2" in upgraded.files[0].reason
    assert not any("Read by" in q for q in evidence_sources(store, "software_pipelining"))  # taken back
    assert any("Read by v2" in q for q in evidence_sources(store, "kernel_fusion"))
    source = store.run("MATCH (s:Source) WHERE s.uri ENDS WITH 'notes.txt' RETURN s.extractor AS v")
    assert [r["v"] for r in source] == ["v2"]


def test_sources_carry_front_matter_pdf_metadata_slides_and_readmes(store, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(FORMATS / "pipelining.md", folder / "pipelining.md")
    (folder / "deck.pdf").write_bytes(pdf_bytes(
        [["Tiling talk"], ["Shared memory tiling reads each input once per tile instead of once per use."]],
        title="Tiling for everyone", author="C. Speaker", landscape=True))
    (folder / "paper.pdf").write_bytes(pdf_bytes([["A long page of prose " * 20] * 30], title="untitled"))
    (folder / "README.md").write_text("# Fastkern\n\nKernel fusion keeps intermediates in registers instead of DRAM.\n")
    report = Ingestor(store, Versioned("v1", lambda doc, version: [])).run([folder])
    assert {f.status for f in report.files} == {"ingested"}
    rows = {r["uri"].rsplit("/", 1)[-1]: r for r in store.run(
        "MATCH (s:Source) WHERE s.origin = 'ingest' RETURN s.uri AS uri, s.kind AS kind, s.title AS title, "
        "s.authors AS authors")}
    assert (rows["pipelining.md"]["title"], rows["pipelining.md"]["authors"]) == (
        "Hiding memory latency in GEMM kernels", "A. Writer, B. Reviewer")
    assert (rows["deck.pdf"]["kind"], rows["deck.pdf"]["title"], rows["deck.pdf"]["authors"]) == (
        "slides", "Tiling for everyone", "C. Speaker")
    assert rows["paper.pdf"]["kind"] == "paper" and rows["paper.pdf"]["title"].startswith("A long page")
    assert rows["README.md"]["kind"] == "note"


def test_exit_status_is_one_when_a_path_is_missing_or_a_file_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("KSKILL_HOME", str(tmp_path / "home"))
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(FORMATS / "notes.txt", docs / "notes.txt")
    runner = CliRunner()
    try:
        ok = runner.invoke(cli, ["ingest", str(docs), "--lexical", "--json"])
        assert ok.exit_code == 0, ok.output
        missing = runner.invoke(cli, ["ingest", str(tmp_path / "nowhere"), "--lexical"])
        assert missing.exit_code == 1 and "no such file or folder" in missing.output
        (docs / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a pdf\n%%EOF")
        (docs / "more.txt").write_text("Vectorized loads move 16 bytes per thread, which reduces memory instructions.\n")
        mixed = runner.invoke(cli, ["ingest", str(docs), "--lexical"])
        assert mixed.exit_code == 1
        for name, status in (("more.txt", "ingested"), ("broken.pdf", "failed"), ("notes.txt", "unchanged")):
            assert re.search(rf"{re.escape(name)}\W+{status}", mixed.output), (name, status, mixed.output)
        as_json = runner.invoke(cli, ["ingest", str(docs), "--lexical", "--json", "--force"])
        assert as_json.exit_code == 1
        statuses = {Path(f["path"]).name: f["status"] for f in json.loads(as_json.stdout)["files"]}
        assert statuses == {"broken.pdf": "failed", "more.txt": "ingested", "notes.txt": "ingested"}
    finally:
        runner.invoke(cli, ["graph", "stop"])
