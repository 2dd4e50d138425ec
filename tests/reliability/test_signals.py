"""Fault suite, signals: SIGINT, SIGTERM and SIGHUP of a real `kskill review` or `kskill optimize`
whose worker hangs end the command, its worker and everything the worker started, leave no
review workdir behind, and (optimize) mark the run interrupted and print how to resume it.

The hanging code also starts a marker process with posix_spawn; "no worker survives" is checked
by looking for that marker, and the worker itself, among all processes of the host.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fault_support import processes_with

from kskill.run_state import release_lock, take_lock

pytestmark = pytest.mark.reliability

KSKILL = str(Path(sys.executable).with_name("kskill"))
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def hang(token: str, indent: int) -> str:
    """Code that starts a marker process, says so in the worker's log, and hangs."""
    code = (f'os.posix_spawn(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)  # {token}"],\n'
            f'               dict(os.environ))\n'
            f'print("HANGING", flush=True)\n'
            f'time.sleep(3600)\n')
    return textwrap.indent(code, " " * indent)


PROBLEM = """import os
import sys
import time

import torch
import torch.nn as nn


CALLS = 0


class Model(nn.Module):
    def forward(self, x):
        global CALLS
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":  # in the worker, not while kskill traces it
            CALLS += 1
            if CALLS > {calls}:
{hang}        return x * 2


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
"""
CANDIDATE = """import os
import sys
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
{hang}        return x * 2
"""


def workers_of(tmpdir: Path) -> list[int]:
    """Host processes still running the review worker on a job under tmpdir."""
    return [pid for pid in processes_with("kskill.agents.reviewer.worker")
            if str(tmpdir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()]


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A KSKILL_HOME and a TMPDIR (where review workdirs go) of the test's own, and a token."""
    home, tmpdir = tmp_path / "home", tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "KSKILL_HOME": str(home), "TMPDIR": str(tmpdir), "PYTHONUNBUFFERED": "1"}
    token = f"kskill-signal-{secrets.token_hex(6)}"
    yield home, tmpdir, env, token
    for pid in processes_with(token):
        os.kill(pid, signal.SIGKILL)


def run_until_hanging(args: list[str], env: dict, tmpdir: Path, timeout_s: float = 300) -> subprocess.Popen:
    proc = subprocess.Popen([KSKILL, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = list(tmpdir.glob("kskill-review-*/*.log"))
        if any("HANGING" in log.read_text(errors="replace") for log in logs):
            return proc
        if proc.poll() is not None:
            pytest.fail(f"kskill exited ({proc.returncode}) before its worker hung: {proc.communicate()}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"the worker did not start within {timeout_s} s: {proc.communicate()}")


def stop(proc: subprocess.Popen, signum: int) -> tuple[int, str, float]:
    """Send the signal as a terminal (SIGINT, to the process group) or a supervisor would."""
    start = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, time.monotonic() - start


def assert_nothing_left(tmpdir: Path, token: str) -> None:
    assert processes_with(token) == [], "a process the worker started outlived kskill"
    assert workers_of(tmpdir) == [], "the review worker outlived kskill"
    assert list(tmpdir.glob("kskill-review-*")) == [], "a review workdir was left behind"


def hanging_review(place) -> subprocess.Popen:
    """`kskill review` of a candidate that starts a marker process and hangs, once it hangs."""
    home, tmpdir, env, token = place
    problem, candidate = tmpdir.parent / "problem.py", tmpdir.parent / "candidate.py"
    problem.write_text(PROBLEM.format(calls=0, hang="                pass\n"))
    candidate.write_text(CANDIDATE.format(hang=hang(token, 8)))
    proc = run_until_hanging(["review", str(problem), str(candidate), "--device", "cpu", "--trials", "1",
                              "--no-timing", "--timeout", "600"], env, tmpdir)
    assert processes_with(token), "the marker process did not start"
    return proc


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_review_stops_its_worker(place, signum):
    home, tmpdir, env, token = place
    proc = hanging_review(place)
    code, err, took = stop(proc, signum)
    assert code == 128 + signum, err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    assert took < 30
    assert_nothing_left(tmpdir, token)


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_optimize_stops_marks_the_run_interrupted_and_says_how_to_resume(place, signum, monkeypatch, kskill_main):
    home, tmpdir, env, token = place
    problem = tmpdir.parent / "problem.py"
    # Hangs in the run's first review: the check before the run (one trial) calls the reference 3 times,
    # the seed's review with 4 trials 6 times.
    problem.write_text(PROBLEM.format(calls=4, hang=hang(token, 16)))
    proc = run_until_hanging(["optimize", str(problem), "--device", "cpu", "--iterations", "2", "--trials", "4",
                              "--retrieval", "off", "--learn", "never"], env, tmpdir)
    code, err, _ = stop(proc, signum)
    assert code == 128 + signum, err
    resume = re.search(r"kskill optimize --resume (run-\S+)", err)
    assert resume, err
    assert_nothing_left(tmpdir, token)
    run_id = resume.group(1)
    monkeypatch.setenv("KSKILL_HOME", str(home))
    _, shown, err = kskill_main("runs", "show", run_id, "--json")  # read in this process
    assert '"status": "interrupted"' in shown, shown + err
    out_dir = home / "runs" / run_id
    take_lock(out_dir)  # released: this process can take it
    release_lock(out_dir)


def test_kill_9_of_kskill_still_ends_its_worker(place):
    """No clean-up can run after SIGKILL; the sandbox's init sees kskill go and kills everything."""
    home, tmpdir, env, token = place
    proc = hanging_review(place)
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while (processes_with(token) or workers_of(tmpdir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(token) == [] and workers_of(tmpdir) == []
