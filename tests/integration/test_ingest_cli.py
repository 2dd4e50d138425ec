"""`kskill ingest` and the review command through click, against the embedded store in a private home."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from kskill.cli import cli
from kskill.commands.review_skills import review

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"


def test_ingest_json_dry_run_then_real_run_then_review(tmp_path, monkeypatch):
    monkeypatch.setenv("KSKILL_HOME", str(tmp_path / "home"))
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(FIXTURES / "stream_k_note.md", papers)
    (papers / "data.csv").write_text("a,b\n")
    runner = CliRunner()
    try:
        dry = runner.invoke(cli, ["ingest", str(papers), "--dry-run", "--json", "--lexical"], catch_exceptions=False)
        report = json.loads(dry.output)
        assert report["dry_run"] and report["totals"]["would ingest"] == 1 and report["totals"]["skipped"] == 1
        real = runner.invoke(cli, ["ingest", str(papers), "--lexical"], catch_exceptions=False)
        assert "1 read, 0 unchanged, 1 skipped, 0 failed" in " ".join(real.output.split())
        listed = runner.invoke(cli, ["skills", "show", "stream_k_decomposition", "--json"], catch_exceptions=False)
        assert json.loads(listed.output)["evidence"][0]["location"] == "section 5"
        from kskill.app import App

        app = App()
        try:
            result = runner.invoke(review, ["--accept", "stream_k_decomposition"], obj=app, catch_exceptions=False)
            assert "accepted: stream_k_decomposition" in result.output
            after = runner.invoke(review, ["--json"], obj=app, catch_exceptions=False)
            assert json.loads(after.output)["nodes"] == []
        finally:
            app.close()
    finally:
        runner.invoke(cli, ["graph", "stop"])
