"""The re-timing at the end of a run: the fastest candidates are timed again against the
reference, and the returned model is chosen by those figures, not by one inflated review.

GPU timings cannot be made here, so the review is scripted: a real CPU review of the problem
serves as the template, and each call gets a speedup from a table and is marked representative
(as a GPU review is). Everything else (recipe brain, Planner, graph, report) is real.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import kskill
from kskill.agents.problem import code_hash
from kskill.agents.reviewer import ReviewOptions, review
from kskill.config import load_settings
from kskill.report import summary
from kskill.run_state import LoopConfig
from kskill.session import start
from kskill.trajectory import Trajectory

PROBLEM = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"
REVIEWED = [1.0, 3.0, 1.4, 0.9, 1.2, 1.1]  # by order of first review: one inflated figure (3.0)
CONFIRMED = [1.0, 1.1, 1.35, 0.9, 1.2, 1.1]  # what the same candidates give when timed again


def scripted_review(reviewed: list[float] = REVIEWED, confirmed: list[float] = CONFIRMED):
    template = review(PROBLEM, PROBLEM.read_text() + "\nModelNew = Model\n",
                      ReviewOptions(trials=1, device="cpu", cpu_timing_reps=2))
    assert template.passed and template.timing is not None
    order: dict[str, int] = {}
    calls: list[int] = []

    def fn(problem, source):
        digest = code_hash(source)
        again = digest in order
        index = order.setdefault(digest, len(order))
        calls.append(index)
        speedup = (confirmed if again else reviewed)[index]
        timing = template.timing.model_copy(update={"speedup": speedup, "representative": True})
        return template.model_copy(update={"timing": timing})

    return fn, calls


def test_the_returned_model_is_chosen_by_the_re_timing(store, tmp_path):
    fn, calls = scripted_review()
    config = LoopConfig(iterations=5, trials=1, retrieval="lexical", device="cpu", learn="never")
    state = start(store, load_settings(), PROBLEM, config, tmp_path / "run", review_fn=fn)

    candidates = [a for a in state.attempts.values() if a.kind != "reference" and a.verified]
    assert len(candidates) >= 3, [a.status for a in state.attempts.values()]
    by_review = sorted(candidates, key=lambda a: (-a.speedup, a.n))
    confirmed = {a.n for a in candidates if a.confirmed_speedup is not None}
    assert confirmed == {a.n for a in by_review[:2]}, "the two fastest by review, and only they, are re-timed"
    assert len(calls) == len(candidates) + 2

    inflated = by_review[0]
    assert inflated.speedup == 3.0 and inflated.confirmed_speedup == 1.1
    best = state.best()
    assert best.n == by_review[1].n and best.confirmed_speedup == 1.35  # 1.35 re-timed beats 3.0 -> 1.1
    data = summary(state)
    assert data["best_speedup"] == 1.35 and data["best_attempt"] == best.n
    assert (tmp_path / "run" / "model_new.py").read_text() == best.source
    assert "re-timed at the end" in (tmp_path / "run" / "report.md").read_text()

    # the re-timing is in the graph: on the attempts, and in the run listing's best speedup
    rows = {r["n"]: r["attempt"] for r in Trajectory(store).attempts(state.run_id)}
    assert {n for n, a in rows.items() if a.get("confirmed_speedup") is not None} == confirmed
    listed = next(r for r in Trajectory(store).runs(10) if r["id"] == state.run_id)
    assert listed["best_speedup"] == 1.35


def test_a_run_whose_candidates_never_beat_the_reference_is_not_re_timed(store, tmp_path):
    """Re-timing guards the choice of a returned candidate; below the gain that returns one
    (1% over the reference) there is no choice to guard, and the reference comes back at once."""
    flat = [1.0, 0.995, 1.005, 0.9, 1.0, 0.97]
    fn, calls = scripted_review(flat, [3.0] * len(flat))  # a re-timing would have made one look fast
    config = LoopConfig(iterations=5, trials=1, retrieval="lexical", device="cpu", learn="never")
    state = start(store, load_settings(), PROBLEM, config, tmp_path / "run", review_fn=fn)

    candidates = [a for a in state.attempts.values() if a.kind != "reference" and a.verified]
    assert len(candidates) >= 3, [a.status for a in state.attempts.values()]
    assert len(calls) == len(candidates), "no candidate was reviewed a second time"
    assert all(a.confirmed_speedup is None for a in state.attempts.values())
    assert state.best().kind == "reference" and summary(state)["confirm_batch"] == {}


@pytest.mark.slow  # a whole run of the loop with real reviews
def test_no_re_timing_without_representative_timings(store, tmp_path):
    config = LoopConfig(iterations=2, trials=1, retrieval="lexical", device="cpu", cpu_timing_reps=2)
    state = start(store, load_settings(), PROBLEM, config, tmp_path / "run")
    assert all(a.confirmed_speedup is None for a in state.attempts.values())  # CPU timings: nothing to confirm


def test_the_search_leaves_the_re_timing_its_time(store, tmp_path):
    """A search that used its whole time limit left the re-timing only the overrun margin, and a
    re-timing cut short let one review's figure choose the returned model. The search now keeps
    back what the re-timing needs (the last batch's seconds per candidate, for each candidate it
    will re-time), so the re-timing begins inside the limit and every candidate in it is timed."""
    review_s, limit_s = 1.0, 6.0
    fn, calls = scripted_review([1.0, 1.3, 1.2, 1.1, 1.05, 1.02] * 4, [1.0, 1.25, 1.15, 1.1, 1.05, 1.02] * 4)

    def slow(problem, source):
        time.sleep(review_s)
        return fn(problem, source)

    config = LoopConfig(iterations=40, trials=1, retrieval="lexical", device="cpu", learn="never",
                        patience=0, roofline_stop=0, time_limit_s=limit_s)
    state = start(store, load_settings(), PROBLEM, config, tmp_path / "run", review_fn=slow)

    assert "wall-time budget spent" in state.stop_reason
    assert state.confirm_batch["candidates"] == 2
    assert state.confirm_batch["began_s"] <= limit_s - review_s, state.confirm_batch  # >= 2 reviews' time kept
    assert sum(a.confirmed_speedup is not None and a.confirmed_speedup > 0 for a in state.attempts.values()) == 2
