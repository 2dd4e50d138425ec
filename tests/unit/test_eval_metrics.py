"""Scores of an evaluation (eval/metrics.py) on rows whose figures are worked out by hand."""

from __future__ import annotations

import pytest

from kskill.eval.metrics import geomean, review_times, summarize


def row(problem: str, level: int, speedup: float | None, strict: bool, compatible: bool, compile_vs_eager: float | None,
        compile_strict: bool = True, rules: bool = False) -> dict:
    eager_ms = 1.0
    kskill_ms = eager_ms / speedup if speedup else None
    compile_ms = eager_ms / compile_vs_eager if compile_vs_eager else None
    return {"problem": problem, "level": level, "status": "done", "correct_strict": strict,
            "correct_compatible": compatible, "speedup_eager": speedup, "kb_triton_rules": rules,
            "compile_default_ms": compile_ms, "compile_default_vs_eager": compile_vs_eager,
            "compile_default_correct_strict": compile_strict, "compile_default_correct_compatible": True,
            "speedup_compile_default": compile_ms / kskill_ms if compile_ms and kskill_ms else None,
            "iterations_to_best": 2, "wall_s": 10.0, "tokens": 100, "cost_usd": 0.01}


ROWS = [
    row("l1/a", 1, 4.0, True, True, 2.0, rules=True),      # 2x faster than compile
    row("l1/b", 1, 1.0, True, True, 2.0),                  # as fast as eager, slower than compile
    row("l1/c", 1, 3.0, False, True, 1.5),                 # correct only at the loose tolerance
    row("l2/d", 2, 1.6, True, True, 0.8, compile_strict=False),  # compile fails 1e-4: not a baseline there
]


def test_means_and_fast_p_against_eager():
    strict = summarize(ROWS, ["strict", "compatible"], ("default",))["overall"]["strict"]
    assert strict["problems"] == 4 and strict["correct"] == 3
    assert strict["geomean_speedup_eager"] == pytest.approx((4.0 * 1.0 * 1.6) ** (1 / 3))
    assert strict["mean_speedup_eager"] == pytest.approx((4.0 + 1.0 + 1.6) / 3)
    # fast_p: correct AND more than p times faster, over ALL problems (KernelBench)
    assert strict["eager"] == {"fast_0": 0.75, "fast_1": 0.5, "fast_1.5": 0.5, "fast_2": 0.25}
    assert strict["kb_triton_rules_pass"] == 1 and strict["fast_1_kb_triton_rules"] == 0.25


def test_compile_counts_only_where_it_is_correct():
    strict = summarize(ROWS, ["strict", "compatible"], ("default",))["overall"]["strict"]["compile"]["default"]
    assert strict["problems"] == 3 and strict["compile_failed_tolerance"] == 1
    # kskill vs compile on the rows where both are correct at 1e-4: a (2.0) and b (0.5)
    assert strict["geomean_speedup"] == pytest.approx(1.0)
    assert strict["share_faster"] == 0.5
    assert strict["fast_1"] == pytest.approx(1 / 3)  # a, over the 3 problems with a valid compile
    assert strict["compile_geomean_vs_eager"] == pytest.approx(geomean([2.0, 2.0, 1.5]))


def test_compatible_score_is_the_arithmetic_mean_over_its_own_correct_set_and_levels_split():
    summary = summarize(ROWS, ["strict", "compatible"], ("default",))
    compatible = summary["overall"]["compatible"]
    assert compatible["correct"] == 4
    assert compatible["mean_speedup_eager"] == pytest.approx((4.0 + 1.0 + 3.0 + 1.6) / 4)
    assert summary["levels"]["1"]["compatible"]["mean_speedup_eager"] == pytest.approx(8.0 / 3)
    assert summary["levels"]["2"]["strict"]["compile"]["default"]["problems"] == 0
    run = summary["overall"]["run"]
    assert run["tokens"] == 400 and run["mean_iterations_to_best"] == 2 and run["failed"] == []


def test_a_failed_problem_counts_in_fast_p_denominators_only():
    failed = {"problem": "l1/x", "level": 1, "status": "failed", "correct_strict": False, "correct_compatible": False}
    strict = summarize(ROWS + [failed], ["strict"], ("default",))["overall"]["strict"]
    assert strict["eager"]["fast_0"] == pytest.approx(3 / 5) and strict["eager"]["fast_2"] == pytest.approx(1 / 5)
    assert strict["geomean_speedup_eager"] == pytest.approx((4.0 * 1.0 * 1.6) ** (1 / 3)), "means skip it"
    assert summarize(ROWS + [failed], ["strict"], ())["overall"]["run"]["failed"] == ["l1/x"]


def test_review_times_leave_the_seed_out_of_the_median_and_report_the_worst_overrun():
    rows = [{"review_batches": [{"candidates": 1, "seconds": 20.0, "seed": True},
                                {"candidates": 4, "seconds": 8.0, "seed": False}],
             "optimize_wall_s": 70.0, "time_limit_s": 60.0},
            {"review_batches": [{"candidates": 1, "seconds": 31.0, "seed": True},
                                {"candidates": 2, "seconds": 12.0, "seed": False},
                                {"candidates": 3, "seconds": 3.0, "seed": False}],
             "optimize_wall_s": 50.0, "time_limit_s": 60.0},
            {"review_batches": [], "optimize_wall_s": 90.0}]  # no limit: no overrun
    got = review_times(rows)
    assert got == {"median_review_s_per_candidate": 2.0, "batches_after_seed": 3, "max_seed_review_s": 31.0,
                   "max_overrun_s": 10.0}
    assert review_times([])["median_review_s_per_candidate"] is None
