"""The search loop on the CPU, with scripted review verdicts (see search_support): rounds that
plan wide and review in batches, the beam, the variant choice under the tolerance, resuming a
half-reviewed batch, the roofline stop, the exhaustive setting, and one capture per run."""

from __future__ import annotations

import importlib

import pytest
from search_support import BROADCAST, FAST, GEMM, TF32X3, ScriptedReview

from kskill.agents import gpus
from kskill.agents.observe import FeatureExtractor
from kskill.config import load_settings
from kskill.graph_schema.store import GraphStore
from kskill.run_state import LoopConfig
from kskill.search import frontier, plan_for
from kskill.session import resume, start
from kskill.trajectory import Trajectory

pytestmark = pytest.mark.slow  # whole runs of the loop (with scripted verdicts), a few seconds each
capture_module = importlib.import_module("kskill.agents.recipes.capture")  # the package exports its function
GENERATED = "MATCH (d:Decision {id: $id})-[r:GENERATED]->(v:Variant) RETURN v.id AS variant ORDER BY variant"
RULED_OUT = "MATCH (d:Decision {id: $id})-[r:RULED_OUT]->(v:Variant) RETURN v.id AS variant, r.reason AS reason"


def tf32x3_wins(source: str) -> float:
    """What an H200 shows for this kind of problem: the 3xTF32 GEMM well ahead, the rest a little."""
    return 1.6 if TF32X3 in source else 1.1


def run(store: GraphStore, tmp_path, problem, review, name: str = "run", **settings):
    config = LoopConfig(**{**FAST, "iterations": 8, **settings})
    return start(store, load_settings(), problem, config, tmp_path / name, review_fn=review)


def test_the_first_batch_holds_the_seed_and_its_children(store, tmp_path):
    review = ScriptedReview(GEMM, tf32x3_wins)
    state = run(store, tmp_path, GEMM, review, iterations=6)
    first = sorted(state.attempts.values(), key=lambda a: a.n)[1:]
    assert first[0].kind == "seed" and all(a.parent is not None for a in first)
    seed_children = [a for a in first if a.parent == first[0].n]
    assert len(seed_children) >= 3, "the seed's children were planned before its review, for one batch"
    assert len(review.calls) == len(set(review.calls)) == state.reviewed


def test_the_wide_plan_and_the_beam_choose_3xtf32_where_the_tolerance_allows(store, tmp_path):
    state = run(store, tmp_path, GEMM, ScriptedReview(GEMM, tf32x3_wins))
    best = state.best()
    assert best.params.get("dot_precision") == "tf32x3", (best.n, best.techniques, best.params)
    tf32x3 = [a for a in state.attempts.values() if a.variant == "gemm_epilogue_fusion.triton_tf32x3"]
    assert tf32x3 and tf32x3[0].parent == 1
    generated = [r["variant"] for r in store.run(GENERATED, {"id": tf32x3[0].decision})]
    assert "gemm_epilogue_fusion.triton_tf32x3" in generated
    # The beam expanded the 3xTF32 child in the next round: the best parent, by measured speedup.
    assert any(a.parent == tf32x3[0].n for a in state.attempts.values())


def test_no_3xtf32_below_its_tolerance_and_the_decision_says_why(store, tmp_path):
    state = run(store, tmp_path, GEMM, ScriptedReview(GEMM, tf32x3_wins, tolerance=1e-6), atol=1e-6, rtol=1e-6)
    assert not any(TF32X3 in a.source for a in state.attempts.values())
    assert not any("tf32" in a.variant for a in state.attempts.values())
    decision = next(a.decision for a in state.attempts.values() if a.technique == "gemm_epilogue_fusion")
    ruled = {r["variant"]: r["reason"] for r in store.run(RULED_OUT, {"id": decision})}
    assert ruled["gemm_epilogue_fusion.triton_tf32x3"] in ("requires rtol >= 1e-05: not met",
                                                          "requires atol >= 1e-05: not met")


def test_the_same_run_twice_makes_the_same_decisions(store, tmp_path):
    runs = [run(store, tmp_path, GEMM, ScriptedReview(GEMM, tf32x3_wins), name=f"run{i}", iterations=5)
            for i in range(2)]
    shapes = []
    for state in runs:
        rows = Trajectory(store).attempts(state.run_id)
        shapes.append([(r["n"], r["parent"], r["applied"], r["attempt"]["code_hash"], r["attempt"].get("variant"),
                        r["case"]) for r in rows])
    assert shapes[0] == shapes[1]


def test_a_broadcast_multiply_gets_a_kernel_and_stops_only_when_nothing_is_admissible(store, tmp_path):
    state = run(store, tmp_path, BROADCAST, ScriptedReview(BROADCAST, lambda s: 1.2 if "triton.jit" in s else 1.0))
    applied = {a.technique for a in state.attempts.values() if a.kind == "optimize"}
    assert "pointwise_kernel" in applied
    assert state.best().technique is not None
    if "no technique left to try" in state.stop_reason:
        from kskill.loop import Ctx  # the run's own deps are gone; plan again as the run would
        from kskill.session import build_deps

        ctx = Ctx(state, build_deps(store, load_settings(), state.config, review_fn=lambda p, s: None))
        state.exhausted.clear()
        assert all(not plan_for(ctx, parent).chosen for parent in frontier(state))


def test_a_resumed_run_finishes_a_half_reviewed_batch_without_reviewing_twice(store, tmp_path):
    def stop_at_third(done: int) -> None:
        if done == 2:
            raise KeyboardInterrupt  # as a kill between two reviews of one batch would

    first = ScriptedReview(GEMM, tf32x3_wins, before=stop_at_third)
    with pytest.raises(KeyboardInterrupt):
        run(store, tmp_path, GEMM, first, iterations=6)
    (run_row,) = [r for r in Trajectory(store).runs(50) if r["status"] == "interrupted"]
    rows = Trajectory(store).attempts(run_row["id"])
    reviewed = {r["attempt"]["code_hash"] for r in rows if r["attempt"]["status"] not in ("pending",)
                and r["attempt"]["kind"] != "reference"}
    pending = {r["attempt"]["code_hash"] for r in rows if r["attempt"]["status"] == "pending"}
    assert len(first.calls) == 2 and reviewed == set(first.calls) and pending

    second = ScriptedReview(GEMM, tf32x3_wins)
    state = resume(store, load_settings(), run_row["id"], review_fn=second)
    assert not reviewed & set(second.calls), "a candidate reviewed before the stop is not reviewed again"
    assert pending <= set(second.calls) and len(second.calls) == len(set(second.calls))
    assert not state.pending() and Trajectory(store).run(state.run_id)["status"] == "finished"
    after = {r["attempt"]["code_hash"]: r["attempt"] for r in Trajectory(store).attempts(state.run_id)}
    for r in rows:
        if r["attempt"]["status"] != "pending":
            assert after[r["attempt"]["code_hash"]]["status"] == r["attempt"]["status"]


def test_the_roofline_stop_fires_when_the_best_is_near_its_roof(store, tmp_path):
    spec = gpus.BY_KEY["h200-sxm"]
    ref = FeatureExtractor(GEMM.read_text(), gpu=spec).observe()
    peak = spec.peak_flops("float32", False)
    roof_s = max(ref.get("flops") / peak, ref.get("bytes_moved") / spec.dram_bandwidth)
    review = ScriptedReview(GEMM, lambda s: 1.3, representative=True, runtime_ms=roof_s * 1e3 / 0.9)
    config = LoopConfig(**{**FAST, "device": "auto", "iterations": 12})
    state = start(store, load_settings(), GEMM, config, tmp_path / "run", review_fn=review, gpu=spec)
    assert state.stop_reason.endswith("reaches 90% of its roofline estimate"), state.stop_reason
    assert state.reviewed < 12


def first_round(state) -> list:
    """The children of the run's first decision: the seed's, written before any review."""
    first = min((a for a in state.attempts.values() if a.decision), key=lambda a: a.n).decision
    return [a for a in state.attempts.values() if a.decision == first]


def test_the_exhaustive_setting_writes_every_admissible_technique_and_variant(store, tmp_path):
    state = start(store, load_settings(), GEMM, LoopConfig.exhaustive(**FAST, iterations=60), tmp_path / "run",
                  review_fn=ScriptedReview(GEMM, tf32x3_wins))
    narrow = run(store, tmp_path, GEMM, ScriptedReview(GEMM, tf32x3_wins), name="narrow", width=1, beam=1)
    everything, one = first_round(state), first_round(narrow)
    assert {a.technique for a in everything} > {a.technique for a in one} and len(one) >= 1
    assert {"gemm_epilogue_fusion.library", "gemm_epilogue_fusion.triton_ieee", "gemm_epilogue_fusion.triton_tf32x3",
            "gemm_epilogue_fusion.triton_tf32x3_small_tiles"} <= {a.variant for a in everything}
    assert "no technique left to try" in state.stop_reason, "it ends only when nothing admissible is left"
    assert state.best().final_speedup >= narrow.best().final_speedup


def test_the_reference_is_captured_once_per_run(store, tmp_path, monkeypatch):
    calls: list[str] = []
    real = capture_module._capture

    def counted(source: str):
        calls.append(source)
        return real(source)

    capture_module._captured.cache_clear()
    monkeypatch.setattr(capture_module, "_capture", counted)
    run(store, tmp_path, GEMM, ScriptedReview(GEMM, tf32x3_wins), iterations=6)
    assert len(calls) == 1
    capture_module._captured.cache_clear()


def test_a_seed_whose_code_admits_nothing_is_planned_again_from_its_review(store, tmp_path, monkeypatch):
    """What only a review measures (launches, the profile) can admit a technique the code alone did
    not: the seed is not spent by its static plan. Here the static plans come back empty."""
    from dataclasses import replace

    from kskill.agents.planner import Planner

    real_plan = Planner.plan
    seen = []

    def plan(self, observations, **kwargs):
        found = real_plan(self, observations, **kwargs)
        seen.append("runtime_ms" in observations)
        return found if "runtime_ms" in observations else replace(found, chosen=[])

    monkeypatch.setattr(Planner, "plan", plan)
    state = run(store, tmp_path, GEMM, ScriptedReview(GEMM, tf32x3_wins, runtime_ms=1.0), iterations=6)
    seed = next(a for a in state.attempts.values() if a.kind == "seed")
    assert seen[:2] == [False, True], "the seed planned from its code, then again from its review"
    assert [a for a in state.attempts.values() if a.parent == seed.n], "its children came from the second plan"
