"""The CLI for real: a private KSKILL_HOME, the embedded server started and stopped by each command."""

from __future__ import annotations

import io
import json
import socket
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


# --- every `kskill graph` subcommand exits non-zero when its job failed ------------------------------

def _broken_home(home: Path) -> None:
    (home / "graph").write_text("")  # the data directory cannot be created: the store cannot open


def _squatted_socket(home: Path) -> socket.socket:
    from kskill.graph_schema import datadir
    from kskill.graph_schema.embedded import EmbeddedServer

    server = EmbeddedServer(home / "graph")
    datadir.prepare(server.data_dir)
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(str(server.socket_path))
    squatter.listen(1)
    return squatter


@pytest.mark.parametrize("args", [["status"], ["init"], ["check"], ["export", "out.cypher"], ["compact"],
                                  ["reset", "--yes"]])
def test_graph_commands_fail_when_the_store_cannot_open(home: Path, kskill_main, args: list[str]):
    _broken_home(home)
    code, _, err = kskill_main("graph", *args)
    assert code == 1
    assert err.startswith("error: cannot create") and "Traceback" not in err and err.count("\n") == 1


def test_graph_check_fails_on_problems(home: Path, kskill_main):
    assert kskill_main("graph", "check")[0] == 0
    from kskill.graph_schema.store import open_store

    with open_store("embedded", home) as store:
        store.write("CREATE (:Stray {id: 'x'})")
    code, out, _ = kskill_main("graph", "check")
    assert code == 1 and "unknown label" in out


def test_graph_export_fails_when_the_file_cannot_be_written(home: Path, kskill_main):
    code, _, err = kskill_main("graph", "export", str(home / "no-such-dir" / "graph.cypher"))
    assert code == 1 and "no-such-dir" in err and "Traceback" not in err


def test_graph_import_fails_on_a_bad_script_and_on_a_missing_file(home: Path, kskill_main):
    script = home / "bad.cypher"
    script.write_text("MATCH (n RETURN n;\n")
    code, _, err = kskill_main("graph", "import", str(script))
    assert code == 1 and "nothing imported" in err
    assert kskill_main("graph", "import", str(home / "missing.cypher"))[0] == 2


def test_graph_compact_reports_sizes_and_refuses_neo4j(home: Path, kskill_main, monkeypatch: pytest.MonkeyPatch):
    code, out, _ = kskill_main("graph", "compact", "--json")
    report = json.loads(out)
    assert code == 0 and report["before_bytes"] > 0 and report["after_bytes"] > 0
    monkeypatch.setenv("KSKILL_GRAPH_URI", "bolt://127.0.0.1:9")
    assert kskill_main("graph", "compact")[0] == 2
    assert kskill_main("graph", "stop")[0] == 2


def test_graph_stop_fails_when_something_else_holds_the_socket(home: Path, kskill_main):
    squatter = _squatted_socket(home)
    try:
        code, _, err = kskill_main("graph", "stop")
    finally:
        squatter.close()
    assert code == 1 and "in use by another program" in err


def test_graph_reset_fails_unless_confirmed(home: Path, kskill_main, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    code, _, err = kskill_main("graph", "reset")
    assert code != 0 and "aborted" in err
    assert json.loads(kskill_main("graph", "status", "--json")[1])["nodes"]["Technique"] > 0, "nothing deleted"


def test_read_only_commands_do_not_grow_the_log(home: Path, kskill_main):
    from kskill.graph_schema import aof

    assert kskill_main("graph", "init")[0] == 0
    sizes = []
    for args in (["skills", "list"], ["graph", "status"], ["runs", "list"], ["skills", "list"]):
        assert kskill_main(*args)[0] == 0
        sizes.append(aof.total_size(home / "graph"))
    assert len(set(sizes)) == 1, f"the append-only file grew: {sizes}"
