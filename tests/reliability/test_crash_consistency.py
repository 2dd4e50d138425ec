"""Crash consistency: `kskill optimize` killed with SIGKILL (the process, or its whole process
group) at named points of its work, then `--resume RUN` to the end.

Each case stops the run deterministically at one arrival at one fault point (kskill/faults.py):
before a new attempt is written, between a candidate's file and its graph node, before a
Decision is recorded, when a review result arrives, between a review's file and the graph,
while a review worker runs (the point marks, the suite waits for the worker, then kills), and
around the end-of-run writes. After the resume: the run is finished, no attempt is pending or
repeated, nothing the killed run had acknowledged in the graph is lost or changed, every attempt
has its files, and `kskill graph check` finds nothing.

CPU-cheap: a tiny bundled problem, `--device cpu`, three candidates. The CI runs the first
KSKILL_CRASH_CASES cases (default 2); `KSKILL_CRASH_CASES=all` runs every one (24).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kskill

pytestmark = pytest.mark.reliability

PROBLEM = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"
KSKILL = [sys.executable, "-m", "kskill"]
# (fault point, which arrival, what is killed, mode): "mark" goes on and the kill lands while a
# review worker runs; "pause" holds the run at the point until the kill.
CASES = [
    ("review.disk", 1, "process", "pause"), ("review.start", 1, "group", "mark"),
    ("submit", 1, "process", "pause"), ("submit", 2, "group", "pause"), ("submit", 3, "process", "pause"),
    ("submit.disk", 1, "group", "pause"), ("submit.disk", 2, "process", "pause"),
    ("submit.disk", 3, "group", "pause"),
    ("decision", 1, "process", "pause"), ("decision", 2, "group", "pause"),
    ("review.start", 1, "process", "mark"), ("review.start", 2, "group", "mark"),
    ("review.start", 2, "process", "mark"),
    ("review.result", 1, "group", "pause"), ("review.result", 2, "process", "pause"),
    ("review.result", 3, "group", "pause"),
    ("review.disk", 2, "group", "pause"), ("review.disk", 3, "process", "pause"),
    ("finish", 1, "process", "pause"), ("finish", 1, "group", "pause"),
    ("finish.run", 1, "process", "pause"), ("finish.run", 1, "group", "pause"),
    ("review.start", 1, "group", "pause"), ("decision", 1, "group", "pause"),
]
_wanted = os.environ.get("KSKILL_CRASH_CASES", "2")
SELECTED = CASES if _wanted == "all" else CASES[:int(_wanted)]
ARGS = ["--iterations", "3", "--trials", "1", "--device", "cpu", "--retrieval", "off", "--learn", "never"]


def _kskill(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*KSKILL, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process below `pid`, read from /proc."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current:
                found.append((child, commands.get(child, "")))
                frontier.append(child)
    return found


def _wait_for(check, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _shown(run_id: str, kskill_main) -> dict:
    code, out, err = kskill_main("runs", "show", run_id, "--json")
    assert code == 0, err[-2000:]
    return json.loads(out)


@pytest.mark.parametrize(("point", "arrival", "target", "mode"), SELECTED,
                         ids=[f"{p}:{a}-{t}-{m}" for p, a, t, m in SELECTED])
def test_killed_run_resumes_consistently(tmp_path, monkeypatch, kskill_main, point, arrival, target, mode):
    """The killed run and its resume are processes of their own; what they left is read in this one."""
    home, out, mark = tmp_path / "home", tmp_path / "run", tmp_path / "fault.mark"
    env = {**os.environ, "KSKILL_HOME": str(home)}
    monkeypatch.setenv("KSKILL_HOME", str(home))
    faulty = {**env, "KSKILL_FAULT_AT": f"{point}:{arrival}", "KSKILL_FAULT_MARK": str(mark),
              "KSKILL_FAULT_MODE": mode}
    proc = subprocess.Popen([*KSKILL, "optimize", str(PROBLEM), *ARGS, "--out", str(out)], env=faulty,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for(mark.exists, 400, f"fault point {point}:{arrival}", proc)
        if mode == "mark":  # kill while the review worker runs
            _wait_for(lambda: any("kskill.agents.reviewer" in cmd for _, cmd in _descendants(proc.pid)), 200,
                      "a review worker", proc)
        (os.killpg if target == "group" else os.kill)(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        listed = json.loads(kskill_main("runs", "list", "--json")[1])
        assert len(listed) == 1 and listed[0]["status"] in ("running", "interrupted"), listed
        run_id = listed[0]["id"]
        acknowledged = {a["n"]: a for a in _shown(run_id, kskill_main)["attempts"] if a["status"] != "pending"}

        resumed = _kskill(["optimize", "--resume", run_id, "--json"], env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        shown = _shown(run_id, kskill_main)
        attempts = shown["attempts"]
        assert shown["run"]["status"] == "finished"
        assert [a["n"] for a in attempts] == list(range(len(attempts))), "attempt numbers without gaps"
        assert all(a["status"] != "pending" for a in attempts)
        assert len({a["code_hash"] for a in attempts}) == len(attempts), "no attempt repeated"
        for n, before in acknowledged.items():  # nothing the killed run acknowledged is lost or changed
            assert attempts[n]["code_hash"] == before["code_hash"]
            assert (attempts[n]["status"], attempts[n]["speedup"]) == (before["status"], before["speedup"])
        for a in attempts[1:]:
            folder = next(out.glob(f"attempts/{a['n']:03d}-*"))
            assert (folder / "candidate.py").is_file()
            if a["status"] not in ("unreviewed",):
                assert json.loads((folder / "review.json").read_text())["candidate_hash"] == a["code_hash"]
        assert (out / "model_new.py").is_file() and (out / "report.md").is_file()
        code, checked, err = kskill_main("graph", "check")
        assert code == 0 and "0 problem(s)" in checked, checked + err
    finally:
        kskill_main("graph", "stop")
