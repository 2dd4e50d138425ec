"""`kskill optimize` killed mid-run (SIGKILL, no chance to clean up) continues with `--resume RUN`
from the graph and the run directory, without repeating or losing an attempt. The killed run and the
resume are processes of their own; what they left is read in the test's process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kskill

pytestmark = pytest.mark.slow  # two runs of `kskill optimize` in subprocesses

KSKILL = [sys.executable, "-m", "kskill"]
PROBLEM = Path(kskill.__file__).parent / "examples" / "gemm_bias_gelu.py"


def _kskill(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*KSKILL, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _reviews(out: Path) -> list[Path]:
    return sorted(out.glob("attempts/*/review.json"))


def test_resume_after_a_killed_run(tmp_path, monkeypatch, kskill_main):
    env = {**os.environ, "KSKILL_HOME": str(tmp_path / "home")}
    monkeypatch.setenv("KSKILL_HOME", env["KSKILL_HOME"])
    out = tmp_path / "run"
    args = ["optimize", str(PROBLEM), "--iterations", "5", "--trials", "1", "--retrieval", "lexical",
            "--device", "cpu", "--out", str(out)]
    first = subprocess.Popen([*KSKILL, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while len(_reviews(out)) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, f"the run ended before it could be killed: {first.communicate()[1][-2000:]}"
    first.kill()  # SIGKILL: no handler runs, the lock file and a pending attempt may stay behind
    first.wait(timeout=30)
    reviewed_before = {p.parent.name for p in _reviews(out)}
    assert not (out / "model_new.py").exists()

    listed = json.loads(kskill_main("runs", "list", "--json")[1])
    assert len(listed) == 1 and listed[0]["status"] == "running"
    run_id = listed[0]["id"]
    shown = json.loads(kskill_main("runs", "show", run_id, "--json")[1])
    attempts_before = {a["n"]: a for a in shown["attempts"]}

    resumed = _kskill(["optimize", "--resume", run_id, "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert summary["run"] == run_id and summary["stop_reason"]
    assert (out / "model_new.py").is_file() and (out / "report.md").is_file()

    shown = json.loads(kskill_main("runs", "show", run_id, "--json")[1])
    assert shown["run"]["status"] == "finished"
    attempts = shown["attempts"]
    assert [a["n"] for a in attempts] == list(range(len(attempts))) and len(attempts) > len(reviewed_before) + 1
    assert len({a["code_hash"] for a in attempts}) == len(attempts), "no attempt repeated after the resume"
    assert all(a["status"] != "pending" for a in attempts)
    for n, before in attempts_before.items():  # what the killed run wrote is kept, not redone
        after = attempts[n]
        assert after["code_hash"] == before["code_hash"]
        if before["status"] != "pending":
            assert after["status"] == before["status"] and after["speedup"] == before["speedup"]
    assert sum(a["kind"] == "seed" for a in attempts) == 1
    assert reviewed_before <= {p.parent.name for p in _reviews(out)}
    assert summary["reviewed"] == min(5, len(attempts) - 1) or "no technique left" in summary["stop_reason"] \
        or "plans in a row" in summary["stop_reason"]

    code, _, err = kskill_main("optimize", "--resume", run_id)
    assert code == 1 and "is finished" in err
