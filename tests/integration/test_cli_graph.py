"""The CLI for real: a private KSKILL_HOME, the embedded server started and stopped by each command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kskill.cli import cli


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KSKILL_HOME", str(tmp_path))
    return tmp_path


def kskill(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_status_reports_the_skill_base_counts(home: Path):
    code, out = kskill("graph", "status", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["engine"] == "falkordb"
    assert report["skill_base"]["version"]
    assert report["nodes"]["Bottleneck"] >= 12
    assert report["nodes"]["Technique"] >= 30
    assert report["nodes"]["FailurePattern"] >= 15
    assert report["relationships"]["ADDRESSED_BY"] > 0
    assert report["server"]["running"] is True


def test_init_is_idempotent(home: Path):
    assert kskill("graph", "init") == (0, "built-in skill base loaded\n")
    assert kskill("graph", "init") == (0, "built-in skill base already up to date\n")


def test_skills_list_show_and_check(home: Path):
    code, out = kskill("skills", "list", "--kind", "technique", "--json")
    ids = {row["id"] for row in json.loads(out)}
    assert code == 0 and {"kernel_fusion", "cuda_graph", "online_softmax"} <= ids
    code, out = kskill("skills", "show", "kernel_fusion", "--json")
    detail = json.loads(out)
    assert detail["kind"] == "Technique"
    assert detail["evidence"] and all(ev["quote"] and ev["source"] for ev in detail["evidence"])
    assert kskill("graph", "check")[0] == 0
    assert kskill("skills", "lint")[0] == 0


def test_export_import_round_trip_through_the_cli(home: Path, tmp_path: Path):
    script = tmp_path / "graph.cypher"
    assert kskill("graph", "export", str(script))[0] == 0
    before = json.loads(kskill("graph", "status", "--json")[1])
    assert kskill("graph", "reset", "--yes")[0] == 0
    assert kskill("graph", "import", str(script))[0] == 0
    after = json.loads(kskill("graph", "status", "--json")[1])
    assert after["nodes"] == before["nodes"] and after["relationships"] == before["relationships"]


def test_config_show_masks_secrets(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abcdefghijklmnop")
    code, out = kskill("config", "show", "--json")
    shown = json.loads(out)
    assert code == 0 and "abcdefgh" not in out and shown["openai_api_key"].startswith("****")
    assert shown["home"] == str(home)


def _run(*args: str, env_home: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "KSKILL_HOME": str(env_home)}
    return subprocess.run([sys.executable, "-m", "kskill", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_errors_are_one_line_without_traceback(tmp_path: Path):
    (tmp_path / "kskill.toml").write_text('grpah_uri = "x"\n')
    result = _run("graph", "status", env_home=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "unknown key 'grpah_uri'" in result.stderr and "Traceback" not in result.stderr


def test_unreachable_neo4j_names_the_cause(tmp_path: Path):
    import os

    env = {**os.environ, "KSKILL_HOME": str(tmp_path), "KSKILL_GRAPH_URI": "bolt://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-m", "kskill", "graph", "status"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 1
    assert "cannot reach Neo4j at bolt://127.0.0.1:9" in result.stderr and "Traceback" not in result.stderr


def test_graph_stop(home: Path):
    kskill("graph", "init")
    assert kskill("graph", "stop") == (0, "not running\n"), "the last command already stopped its server"
