"""review_batch on the CPU (Triton interpreter): one judge for many candidates, each with its own verdict.

A batch holds what the optimization loop produces: good candidates and broken ones side by side.
A candidate that crashes, hangs or exhausts memory must get its own class while the others still
get theirs; the time limit must hold while a review is in flight.
"""

import tempfile
import time
from pathlib import Path

import pytest

from kskill.agents.reviewer import ReviewOptions, close_warm, review_batch

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer"
CANDIDATES = FIXTURES / "candidates"
RELU = FIXTURES / "problems" / "relu.py"
pytestmark = pytest.mark.slow

HANG = """import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            x = x + 0
"""
OS_EXIT = """import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(7)
"""
MEMORY_HOG = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(torch.empty(256 * 1024 * 1024))  # a gigabyte at a time, past the 3000 MB limit
"""


def test_a_mixed_batch_gives_each_candidate_its_own_class_and_times_the_good_ones():
    candidates = [CANDIDATES / "honest" / "relu_triton.py", CANDIDATES / "broken" / "wrong_values.py",
                  CANDIDATES / "broken" / "segfault.py", OS_EXIT, HANG, MEMORY_HOG,
                  CANDIDATES / "adversarial" / "alias_input.py"]
    delivered: list[int] = []
    started = time.monotonic()
    # The hang costs its whole limit: 10 s, over 10 times what the honest candidate's checks take.
    reviews = review_batch(RELU, candidates, ReviewOptions(device="cpu", timeout_s=10, memory_limit_mb=3000,
                                                           static_checks=False, profile=False),
                           on_result=lambda i, r: delivered.append(i))
    classes = [r.failure_class for r in reviews]
    assert classes == [None, "numeric", "runtime", "runtime", "timeout", "memory", "cheating"], \
        [f"{r.failure_class}: {r.failure_message}" for r in reviews]
    good = reviews[0]
    assert good.passed and good.timing is not None and good.timing.functions_timed == 2
    assert all(r.timing is None for r in reviews[1:])
    assert "SIGSEGV" in reviews[2].failure_message and "status 7" in reviews[3].failure_message
    assert "10 s limit" in reviews[4].failure_message
    # Each review is handed over once, as soon as it is final: the failures first, the timed one last.
    assert sorted(delivered) == list(range(len(candidates))) and delivered[-1] == 0
    elapsed = time.monotonic() - started
    assert elapsed < 600
    # Where the batch's time went, by phase: the judge's start, the reference, each candidate's steps.
    phases = good.profile["batch"]["phases"]
    assert {"start", "load_problem", "reference", "load_candidate", "correctness", "timing"} <= set(phases), phases
    # Each phase is rounded to 0.01 s, so their sum may pass the elapsed time by half of that per phase.
    assert 0.5 * elapsed < sum(phases.values()) <= elapsed + 0.005 * len(phases), (phases, elapsed)
    # Finer: the judge's own steps and each command to the runner, with the runner's account of its trials.
    steps = good.profile["batch"]["steps"]
    assert {"judge.reference", "judge.compare", "runner.load", "runner.run", "runner.time", "run.call",
            "run.inputs"} <= set(steps), steps
    assert steps["run.call"] <= steps["runner.run"]  # the runner's own account lies inside the command's time
    assert sum(v for k, v in steps.items() if not k.startswith("run.")) <= elapsed, (steps, elapsed)


def test_the_time_limit_holds_while_a_review_is_in_flight_and_finished_reviews_are_kept():
    started = time.monotonic()
    # 30 s: the first two candidates take seconds (the judge's start included), then the hang waits it out.
    reviews = review_batch(RELU, [CANDIDATES / "broken" / "wrong_values.py", CANDIDATES / "broken" / "syntax_error.py",
                                  HANG, CANDIDATES / "honest" / "relu_triton.py"],
                           ReviewOptions(device="cpu", timeout_s=300, profile=False), time_limit_s=30)
    elapsed = time.monotonic() - started
    assert elapsed < 30 + 15, elapsed
    assert [r.failure_class for r in reviews] == ["numeric", "compile", "timeout", "timeout"]
    assert reviews[0].correctness.trials_run == 7  # finished before the budget ran out, and kept
    assert all("time budget ran out" in r.failure_message for r in reviews[2:])


SLOW_UNDER_THE_PROFILER = """import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if torch._C._autograd._profiler_enabled():
            time.sleep(3600)  # right and timed, then the profiler outlasts the batch's time budget
        return torch.relu(x)
"""


def test_a_candidate_checked_and_timed_keeps_its_review_when_the_budget_ends_in_its_profile():
    started = time.monotonic()
    review, = review_batch(RELU, [SLOW_UNDER_THE_PROFILER], ReviewOptions(device="cpu", timeout_s=300,
                                                                         static_checks=False), time_limit_s=30)
    assert time.monotonic() - started < 30 + 15
    assert review.passed, review.failure_message
    assert review.timing is not None and review.correctness.trials_run >= 5
    assert "time budget ran out before torch.profiler" in review.unavailable["kernel_launches_per_forward"]
    assert any("its correctness and timing stand" in note for note in review.profile["notes"])


def test_identity_passes_a_relu_on_non_negative_inputs_only_without_input_variants():
    """`return x` (a copy of x) is a ReLU as far as torch.rand inputs can tell."""
    problem = FIXTURES / "problems" / "relu_nonneg.py"
    candidate = CANDIDATES / "adversarial" / "identity_relu.py"
    fooled, caught = (review_batch(problem, [candidate], ReviewOptions(device="cpu", timing=False, profile=False,
                                                                       trials=2, input_variants=variants))[0]
                      for variants in (False, True))
    assert fooled.passed
    assert caught.failure_class == "numeric"
    failing = [t for t in caught.correctness.trials if not t.passed]
    assert failing and {t.variant for t in failing} == {"mixed_signs"}
    assert all(t.passed for t in caught.correctness.trials if t.variant is None)


def test_all_zeros_fail_a_softmax_whose_outputs_sit_below_the_tolerance():
    problem = FIXTURES / "problems" / "softmax_wide.py"
    honest, zeros = review_batch(problem, [CANDIDATES / "honest" / "softmax_triton.py",
                                           CANDIDATES / "adversarial" / "zeros_softmax.py"],
                                 ReviewOptions(device="cpu", timing=False, profile=False, trials=2))
    assert honest.passed, honest.failure_message
    assert any(f.code == "weak_reference_output" and f.severity == "warn" for f in honest.flags)
    assert not zeros.passed
    assert all(not t.passed for t in zeros.correctness.trials)
    assert "judged by relative error" in zeros.correctness.trials[0].outputs[0].note


def _processes_under(folder: Path) -> list[int]:
    """Host processes whose command line names a path under folder (review workers, runners)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(folder).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_warm_judge_reviews_the_next_batch_and_none_outlives_close_warm(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # review workdirs go here
    options = ReviewOptions(device="cpu", timeout_s=120, profile=False)
    honest = CANDIDATES / "honest" / "relu_triton.py"
    try:
        first = review_batch(RELU, [honest], options, keep_warm=True)
        assert _processes_under(tmp_path), "no judge was kept warm for the next batch"
        second = review_batch(RELU, [CANDIDATES / "broken" / "wrong_values.py", honest], options, keep_warm=True)
    finally:
        close_warm()
    assert first[0].passed and [r.failure_class for r in second] == ["numeric", None]
    # The second batch's judge had imported torch and started its runner before the batch began.
    cold, warm = first[0].profile["batch"]["phases"]["start"], second[1].profile["batch"]["phases"]["start"]
    assert warm < 0.5 * cold, (warm, cold)
    assert not _processes_under(tmp_path) and not list(tmp_path.iterdir())


USES_KERNEL_CACHE = """import os
import pathlib

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        cache = pathlib.Path(os.environ["TRITON_CACHE_DIR"])
        if not (cache / "planted" / "kernel.cubin").exists():
            raise RuntimeError("the kernel of an earlier batch is not in this batch's cache")
        (cache / "compiled_here").mkdir(exist_ok=True)
        (cache / "compiled_here" / "kernel.cubin").write_bytes(b"new")
        return torch.relu(x)
"""


def test_a_kernel_cache_carries_compiled_kernels_into_a_batch_and_its_new_ones_out(tmp_path):
    cache = tmp_path / "kernels"
    (cache / "planted").mkdir(parents=True)
    (cache / "planted" / "kernel.cubin").write_bytes(b"old")
    options = ReviewOptions(device="cpu", static_checks=False, profile=False, kernel_cache=str(cache))
    [review] = review_batch(RELU, [USES_KERNEL_CACHE], options)
    assert review.passed, review.failure_message
    assert sorted(p.name for p in cache.iterdir()) == ["compiled_here", "planted"]
    [without] = review_batch(RELU, [USES_KERNEL_CACHE], options.model_copy(update={"kernel_cache": None}))
    assert not without.passed and "not in this batch's cache" in without.failure_message
