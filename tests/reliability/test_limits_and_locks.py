"""Fault suite, limits and locks: a fork loop and memory spread over forked children fail the review
and leave nothing behind; the run-directory lock goes to exactly one of many concurrent callers."""

from __future__ import annotations

import multiprocessing
import os
import secrets
import signal
import tempfile
import time
from pathlib import Path

import pytest
from fault_support import TINY_MODEL_NEW, TINY_PROBLEM, processes_with

from kskill.agents.reviewer import ReviewOptions, review
from kskill.run_state import release_lock, take_lock
from kskill.trajectory import RunError

pytestmark = pytest.mark.reliability

def options(**kw) -> ReviewOptions:
    return ReviewOptions(device="cpu", trials=1, timing=False, profile=False, static_checks=False, timeout_s=180,
                         **kw)


def test_a_2000_fork_loop_fails_the_review_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the workdir, so its processes can be told apart
    candidate = (f"import os, time\n"
                 f"for _ in range(2000):\n"
                 f"    if os.fork() == 0:\n"
                 f"        time.sleep(120)\n"
                 f"{TINY_MODEL_NEW}")
    start = time.monotonic()
    result = review(TINY_PROBLEM, candidate, options())
    assert result.failure_class == "other" and "too many processes" in result.failure_message, result.failure_message
    assert result.isolation.peak_processes is not None and result.isolation.peak_processes > 256
    assert processes_with(str(tmp_path)) == []  # the forked copies of the worker carry its job's path
    assert time.monotonic() - start < 120


def test_four_children_over_the_limit_together_fail_with_memory():
    """Each child stays under the limit (and under RLIMIT_AS); the sandbox's sum does not."""
    token = f"kskill-memory-{secrets.token_hex(6)}"
    child = f"import time; block = bytearray(b'x') * (500 * 2**20); time.sleep(120)  # {token}"
    candidate = (f"import os, sys, time\n"
                 f"for _ in range(4):\n"
                 f"    if os.fork() == 0:\n"
                 f"        os.execv(sys.executable, [sys.executable, '-c', {child!r}])\n"
                 f"time.sleep(120)\n"
                 f"{TINY_MODEL_NEW}")
    result = review(TINY_PROBLEM, candidate, options(memory_limit_mb=2000))
    assert result.failure_class == "memory", result.failure_message
    assert "above the 2000 MB limit" in result.failure_message
    assert result.isolation.peak_memory_mb > 2000
    assert processes_with(token) == []


def _contend(path: str, start: multiprocessing.Barrier, tried: multiprocessing.Barrier, results) -> None:
    start.wait()
    try:
        take_lock(Path(path))
        results.put("got")
    except RunError:
        results.put("refused")
    tried.wait()  # hold it until everyone has tried
    release_lock(Path(path))


def _contend_in_trials(root: str, callers: int, trials: int, report) -> None:
    """Each trial: `callers` forked processes try for one run folder's lock at once; what each got."""
    context = multiprocessing.get_context("fork")
    for trial in range(trials):
        folder = Path(root) / f"run{trial}"
        folder.mkdir()
        start, tried, results = context.Barrier(callers), context.Barrier(callers), context.Queue()
        procs = [context.Process(target=_contend, args=(str(folder), start, tried, results)) for _ in range(callers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        report.put(sorted(results.get(timeout=10) for _ in range(callers)))


def test_exactly_one_of_many_concurrent_callers_gets_the_run_lock(tmp_path):
    # The callers fork from a fresh small process: forking this one, with torch and the rest loaded,
    # 240 times took seconds.
    spawn, trials = multiprocessing.get_context("spawn"), 30
    report = spawn.Queue()
    contender = spawn.Process(target=_contend_in_trials, args=(str(tmp_path), 8, trials, report))
    contender.start()
    for trial in range(trials):
        outcomes = report.get(timeout=120)
        assert outcomes.count("got") == 1, f"trial {trial}: {outcomes}"
    contender.join(60)
    assert contender.exitcode == 0


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    context = multiprocessing.get_context("fork")
    holding = context.Event()

    def hold() -> None:
        take_lock(tmp_path)
        holding.set()
        time.sleep(60)

    holder = context.Process(target=hold)
    holder.start()
    assert holding.wait(30)
    with pytest.raises(RunError, match=f"process {holder.pid} is working on the run"):
        take_lock(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    take_lock(tmp_path)  # the kernel released it with its holder
    release_lock(tmp_path)
