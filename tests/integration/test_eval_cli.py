"""`kskill eval` end to end on the CPU, as users run it (the CLI in a subprocess, the real embedded
store, real optimize runs, the sandboxed baseline worker, Triton's interpreter).

One evaluation of a three-problem suite is killed (SIGKILL) once its first problem has finished,
then resumed; the tests below read what that left: resume skipped the finished problem, the
problem that crashes every worker was recorded and the others went on, the CSV has its columns,
and the HTML report renders its figures in headless Chromium.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kskill
from kskill.eval.results import csv_fields

pytestmark = pytest.mark.slow  # three optimize runs and their baselines, in subprocesses

FIXTURES = Path(__file__).parents[1] / "fixtures"
EXAMPLES = Path(kskill.__file__).parent / "examples"
CHROMIUM = Path("/usr/bin/chromium")
FAST = ["--iterations", "2", "--device", "cpu", "--optimize-option=--retrieval=lexical", "--optimize-option=--trials=1"]
# The first problem wins on the CPU too: its second attempt (algebraic simplification) replaces a
# 1024^3 matrix product by a row scaling. The second crashes every worker; the third returns the reference.
SUITE = {
    "level1/1_diag_scale_matmul.py": EXAMPLES / "diag_scale_matmul.py",
    "level1/2_crash_forward.py": FIXTURES / "eval" / "crash_forward.py",
    "level2/1_relu.py": FIXTURES / "reviewer" / "problems" / "relu.py",
}


def kskill_eval(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kskill", "eval", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("eval")
    suite = root / "suite"
    for name, source in SUITE.items():
        (suite / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, suite / name)
    out = root / "out"
    env = {**os.environ, "KSKILL_HOME": str(tmp_path_factory.getbasetemp() / "kskill-home"), "KSKILL_EXAMPLE_SCALE": "4"}
    args = [str(suite), "--out", str(out), *FAST]

    first = kskill_eval(args, env)
    deadline = time.monotonic() + 600
    while not list((out / "rows").glob("*.json")) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    first.send_signal(signal.SIGKILL)  # no clean-up: whatever was in flight is lost
    first.communicate()
    killed_rows = {p.name: p.read_text() for p in (out / "rows").glob("*.json")}

    again = kskill_eval([str(suite), "--out", str(out), *FAST], env)
    refused = again.communicate(timeout=120)
    resumed = kskill_eval([*args, "--resume", "--json"], env)
    stdout, stderr = resumed.communicate(timeout=900)
    return {"out": out, "killed_rows": killed_rows, "refused": (again.returncode, refused[1]),
            "resumed": (resumed.returncode, stdout, stderr)}


def rows_by_name(out: Path) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads((out / "results.json").read_text())["rows"]}


def test_resume_after_a_kill_skips_the_finished_problem_and_runs_the_rest(evaluated):
    out = evaluated["out"]
    code, stdout, stderr = evaluated["resumed"]
    assert code == 0, stderr[-3000:]
    assert list(evaluated["killed_rows"]) == ["level1__1_diag_scale_matmul.json"], "killed after the first problem"
    for name, text in evaluated["killed_rows"].items():
        assert (out / "rows" / name).read_text() == text, "a finished problem is not run again"
    summary = json.loads(stdout)
    assert summary["finished"] == summary["selected"] == 3 and summary["not_started"] == []
    # the problem in flight at the kill keeps its folder aside and ran again in a fresh one
    assert (out / "problems" / "level1__2_crash_forward.interrupted-1").is_dir()
    assert (out / "problems" / "level1__2_crash_forward" / "optimize.log").is_file()
    code, stderr = evaluated["refused"]
    assert code == 1 and "already holds an evaluation: pass --resume" in stderr and stderr.count("\n") == 1


def test_a_problem_that_crashes_every_worker_is_recorded_and_the_others_go_on(evaluated):
    rows = rows_by_name(evaluated["out"])
    crash = rows["2_crash_forward"]
    assert crash["status"] == "failed" and crash["stage"] == "optimize,baselines"
    assert "kskill optimize failed" in crash["error"] and "SIGSEGV" in crash["error"]
    assert not crash["correct_strict"] and crash["speedup_eager"] is None
    diag, relu = rows["1_diag_scale_matmul"], rows["1_relu"]
    assert diag["status"] == relu["status"] == "done"
    assert not diag["returned_reference"] and diag["correct_strict"] and diag["correct_compatible"]
    assert diag["speedup_eager"] > 1 and diag["flops"] > 0 and diag["bytes_moved"] > 0
    assert relu["returned_reference"] and relu["kskill_ms"] == relu["eager_ms"]
    assert relu["kb_triton_rules"] is False and "no_triton_kernel" in relu["kb_rule_errors"]
    for r in (diag, relu):
        assert not r["timings_representative"] and r["gpu"] == "cpu" and r["torch"] and r["kskill_version"]
        assert r["iterations_to_best"] is not None and r["tokens"] == 0 and r["engine"] == "local"
        # Where optimize's clock went before its loop: each step named, together no more than when the loop began.
        setup = {k: v for k, v in r["optimize_step_seconds"].items() if k.startswith("setup: ")}
        assert set(setup) == {"setup: imports", "setup: store", "setup: agents"}
        assert sum(setup.values()) <= r["optimize_loop_began_s"] + 0.05


def test_results_csv_has_one_row_per_problem_with_the_documented_columns(evaluated):
    with open(evaluated["out"] / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == csv_fields(())
    assert [r["problem"] for r in rows] == ["level1/1_diag_scale_matmul", "level1/2_crash_forward", "level2/1_relu"]
    for column in ("gpu", "driver", "torch", "triton", "kskill_version", "git_commit", "finished_at"):
        assert all(r[column] for r in rows if r["status"] == "done"), column
    summary = json.loads((evaluated["out"] / "results.json").read_text())["summary"]
    assert summary["overall"]["strict"]["correct"] == 2 and summary["overall"]["strict"]["problems"] == 3
    assert summary["levels"]["1"]["strict"]["eager"]["fast_1"] == 0.5


def test_the_report_states_both_scores_and_renders_its_figures(evaluated):
    out = evaluated["out"]
    markdown = (out / "report.md").read_text()
    for text in ("## Protocol", "atol = rtol = 1e-4", "atol = rtol = 1e-2", "KernelSkill", "arXiv:2603.10085",
                 "No GPU: correctness only", "level1/2_crash_forward"):
        assert text in markdown, text
    figures = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert figures == ["iterations.png", "levels.png", "speedups.png"], "no compile on the CPU: no scatter"
    for name in figures:
        assert f"(plots/{name})" in markdown
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    dom = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--dump-dom", (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('data-rendered="yes"') == len(figures), "every figure decoded in the browser"
    assert 'data-rendered="no"' not in dom.stdout and "Scores</h2>" in dom.stdout
