"""Budgets that hold: a review in flight is bounded by what is left of the time limit, a run
overruns its limit by at most max(10 %, 15 s), and a time limit that is not a finite number of
seconds is refused with one line."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from search_support import FAST, GEMM

from kskill.agents.brains.base import CannotApply, CannotRepair, Draft, Usage
from kskill.agents.problem import load_problem
from kskill.agents.reviewer import ReviewOptions
from kskill.cli import cli as main
from kskill.config import load_settings
from kskill.run_state import LoopConfig
from kskill.session import one_by_one, start

HANGS = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        total = 0
        while True:  # a candidate that never returns
            total += 1
"""


class HangingBrain:
    """A brain whose seed never returns when run: the recipe brain never writes such code, and a
    real endpoint that would is not reachable here."""

    name = "hanging"
    used = Usage()

    def seed(self, task):
        return Draft(source=HANGS)

    def optimize(self, task):
        raise CannotApply("this brain writes seeds only")

    def repair(self, task):
        raise CannotRepair("this brain writes seeds only")

    def can_apply(self, problem_source, technique):
        return True, ""


@pytest.mark.slow  # runs until its 20 s budget is spent
def test_the_time_limit_stops_a_review_in_flight(store, tmp_path):
    limit = 20.0
    config = LoopConfig(**{**FAST, "time_limit_s": limit, "review_timeout_s": 300.0})
    started = time.monotonic()
    state = start(store, load_settings(), GEMM, config, tmp_path / "run", brain=HangingBrain())
    wall = time.monotonic() - started
    seed = state.attempts[1]
    assert seed.kind == "seed" and seed.status == "unreviewed", (seed.status, seed.failure)
    assert state.stop_reason.startswith("wall-time budget spent")
    assert wall <= limit + config.overrun_s, f"{wall:.1f} s for a {limit:.0f} s limit"
    assert wall >= limit - 2, "the review ran until the budget was spent, not until its own 300 s limit"


def test_time_spent_before_the_run_counts_against_its_limit(store, tmp_path):
    """`optimize` starts the clock before it checks the problem: a run begun with its whole limit
    already spent reviews nothing and says the budget is spent."""
    config = LoopConfig(**{**FAST, "time_limit_s": 30.0})
    state = start(store, load_settings(), GEMM, config, tmp_path / "run", began=time.monotonic() - 30.0,
                  setup_seconds={"setup: store": 29.5})
    assert state.stop_reason.startswith("wall-time budget spent"), state.stop_reason
    assert all(a.status == "unreviewed" for a in state.attempts.values() if a.n > 0)
    # Where the clock went before the loop is in the run's step seconds: the caller's steps, and start's own.
    assert state.step_seconds["setup: store"] == 29.5 and 0 <= state.step_seconds["setup: agents"] < 30
    assert state.loop_began_s >= 30


def test_the_one_by_one_batch_bounds_each_review_by_what_is_left(tmp_path):
    problem = load_problem(GEMM)
    seen: list[float] = []
    results: list[tuple[int, str]] = []

    def slow_review(prob, source, options):
        seen.append(options.timeout_s)
        time.sleep(0.6)
        from kskill.agents.reviewer import Review

        return Review(problem=prob.name, candidate_hash="x", failure_class="timeout",
                      failure_message=f"ran past {options.timeout_s:g} s")

    out = one_by_one(problem, ["a", "b", "c"], ReviewOptions(timeout_s=300), time_limit_s=1.5,
                     on_result=lambda i, r: results.append((i, r.failure_phase)),
                     review_one=slow_review)
    assert len(out) == 3 and [i for i, _ in results] == [0, 1, 2]
    assert all(t <= 1.5 for t in seen), "each review gets at most what is left of the limit"
    assert out[-1].failure_phase == "budget" and "budget ran out" in out[-1].failure_message
    assert out[0].failure_phase == "budget", "a timeout under a bound tighter than its own is the budget's"


def test_a_time_limit_that_is_not_a_finite_number_is_refused(tmp_path):
    runner = CliRunner()
    for bad in ("nan", "inf", "-5", "soon"):
        result = runner.invoke(main, ["optimize", str(GEMM), "--time-limit", bad, "--out", str(tmp_path / bad)])
        assert result.exit_code == 2, (bad, result.output)
        assert "--time-limit" in result.output and "Traceback" not in result.output
        assert not (tmp_path / bad).exists()
    result = runner.invoke(main, ["optimize", str(GEMM), "--rtol", "nan"])
    assert result.exit_code == 2 and "--rtol" in result.output


def test_run_settings_refuse_non_finite_numbers():
    from pydantic import ValidationError

    for field in ("time_limit_s", "atol", "min_gain"):
        with pytest.raises(ValidationError, match="finite"):
            LoopConfig(**{field: float("nan")})
    assert LoopConfig(time_limit_s=100).overrun_s == 15.0 and LoopConfig(time_limit_s=600).overrun_s == 60.0


def test_a_reference_the_first_review_cannot_build_fails_the_run(store, tmp_path):
    """`optimize` checks the problem in its first review (the judge builds the reference there),
    not in a review of its own before the run: the error ends the run, marked failed."""
    from kskill.agents.errors import ProblemError
    from kskill.trajectory import Trajectory

    def reference_breaks(problem, source):
        raise ProblemError(f"problem {problem.name} failed while reference: TypeError: boom")

    config = LoopConfig(**{**FAST, "time_limit_s": 60.0})
    with pytest.raises(ProblemError, match="boom"):
        start(store, load_settings(), GEMM, config, tmp_path / "run", review_fn=reference_breaks)
    runs = [r for r in Trajectory(store).runs() if r.get("problem") == load_problem(GEMM).name]
    assert [r["status"] for r in runs] == ["failed"], runs
