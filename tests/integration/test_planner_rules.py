"""The Planner's rules on a real embedded graph: determinism, tabu, guards, missing metrics,
the brain's veto, the fallback tier, the Decision subgraph, learning from outcomes, and graphs
whose skill data is broken on purpose."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from test_planner_decisions import (
    HOPPER, TIGHT_FP32, TORCH, Child, Lineage, compute_bound, delete_trajectory, obs, write_trajectory,
)

from kskill.agents.planner import Planner
from kskill.graph_schema import queries
from kskill.graph_schema.model import Condition
from kskill.graph_schema.store import GraphStore, open_store

NOW = "2025-01-01T00:00:00+00:00"

# A pointwise chain on a Triton candidate: memory bound, with a long fusible chain.
CHAIN = {"memory_bound": True, "compute_bound": False, "memory_throughput_pct": 88.0, "sm_throughput_pct": 20.0,
         "max_pointwise_chain": 3, "max_fused_ops": 3, "code_launches_per_forward": 3, "kernel_launches_per_forward": 3,
         "cpu_overhead_pct": 5.0, "code_custom_kernels": 0, "static_shapes": True, "simplifiable_patterns": 0}
# Softmax and LayerNorm both split over kernels: online_softmax and fused_normalization tie at 90 / 1.5x.
TIE = {"has_softmax": True, "has_normalization": True, "reduction_like_op_count": 2,
       "code_launches_per_forward": 2, "max_pointwise_chain": 0}
# Attention written out: flash_attention first, online_softmax (which conflicts with it) second.
ATTENTION = {"has_attention": True, "has_softmax": True, "code_launches_per_forward": 4,
             "reduction_like_op_count": 1, "max_pointwise_chain": 1}

COUNT_DECISION_EDGES = "MATCH (d:Decision {id: $id})-[r]->(x) RETURN type(r) AS rel, count(x) AS n ORDER BY rel"
DECISION_OBSERVATIONS = (
    "MATCH (d:Decision {id: $id})-[:OBSERVED]->(o:Observation) "
    "RETURN o.metric AS metric, o.value AS value, o.available AS available ORDER BY metric"
)
DECISION_MATCHES = (
    "MATCH (d:Decision {id: $id})-[:MATCHED]->(x) RETURN labels(x)[0] AS label, x.id AS id ORDER BY label, id"
)
DECISION_SELECTED = (
    "MATCH (d:Decision {id: $id})-[s:SELECTED]->(t:Technique) "
    "RETURN t.id AS technique, s.bottleneck AS bottleneck, s.rank AS rank, d.tier AS tier, d.case AS case"
)
DECISION_REJECTED = (
    "MATCH (d:Decision {id: $id})-[r:REJECTED]->(t:Technique) RETURN t.id AS technique, r.reason AS reason "
    "ORDER BY technique"
)
EDGE_STATS = (
    "MATCH (:Bottleneck {id: $b})-[a:ADDRESSED_BY]->(:Technique {id: $t}) "
    "RETURN a.trials AS trials, a.successes AS successes, a.mean_gain AS mean_gain, a.priority AS priority"
)


def reasons(plan) -> dict[str, str]:
    return {r.technique: r.reason for r in plan.rejected}


# --- determinism ------------------------------------------------------------------------------


def test_same_graph_and_observations_give_the_same_plan_bytes(store: GraphStore, graph_home: Path):
    parent = write_trajectory(store, "run-det", Lineage(applied=(("kernel_fusion", 1.5),),
                                                        children=(Child("autotune_launch", speedup=1.4),)))
    obs = {**CHAIN, "code_custom_kernels": 1, "has_softmax": True, "reduction_like_op_count": 1}
    first = Planner(store).plan(obs, parent=parent).to_json()
    second = Planner(store).plan(dict(reversed(list(obs.items()))), parent=parent).to_json()
    assert first == second, "insertion order of the observations does not matter"
    assert Planner(store).plan(obs, parent=parent).id == Planner(store).plan(obs, parent=parent).id
    # Re-open the same graph through a new connection: the plan is byte for byte the same.
    again = open_store("embedded", graph_home, graph_name=store.graph_name)
    try:
        assert Planner(again).plan(obs, parent=parent).to_json() == first
    finally:
        again.close()
    assert '"selected": "online_softmax"' in first  # kernel_fusion applied, autotune flat: the next in line


def test_repeated_plans_do_not_depend_on_what_was_recorded_before(store: GraphStore):
    planner = Planner(store)
    before = planner.plan(CHAIN).to_json()
    planner.record(planner.plan(CHAIN))
    planner.record(planner.plan(TIE))
    assert planner.plan(CHAIN).to_json() == before


# --- short-term memory: tabu, lineage, conflicts ----------------------------------------------------


def test_failed_child_and_no_gain_child_are_tabu_with_reasons(store: GraphStore):
    obs = {**ATTENTION}
    fresh = Planner(store).plan(obs)
    assert fresh.selected == "flash_attention"
    parent = write_trajectory(store, "run-tabu", Lineage(seed_speedup=1.0, children=(
        Child("flash_attention", status="numeric", correct=False),
        Child("online_softmax", speedup=1.005),
    )))
    plan = Planner(store).plan(obs, parent=parent)
    why = reasons(plan)
    assert why["flash_attention"] == "tabu: tried from this parent at attempt 1: numeric"
    assert why["online_softmax"].startswith("tabu: tried from this parent at attempt 2: no gain (1.005x vs parent 1.000x)")
    assert plan.selected is None and plan.tier == "none"
    assert plan.case.startswith("matched materialized_attention_scores, unfused_reduction but every technique "
                                "was rejected (")


# An fp32 GEMM with a GELU epilogue on CUDA cores: gemm_epilogue_fusion first, with its dot precisions.
FP32_GEMM = obs(TORCH, TIGHT_FP32, HOPPER, compute_bound(78.0, 30.0, 12.0), has_gemm=True, has_contraction=True,
                gemm_flop_share=0.99, has_attention=False, epilogue_chain_after_contraction=1, max_pointwise_chain=1,
                code_launches_per_forward=2, data_reuse=2730.0)


def test_a_variant_that_failed_the_tolerance_is_ruled_out_from_every_parent_of_its_run(store: GraphStore):
    fresh = Planner(store).plan(FP32_GEMM)
    assert fresh.selected == "gemm_epilogue_fusion"
    first, *others = [v.key for v in fresh.chosen[0].variants]
    assert others, "the test needs a technique with more than one variant"
    write_trajectory(store, "run-variant", Lineage(children=(
        Child("gemm_epilogue_fusion", status="numeric", correct=False, variant=first),
        Child("kernel_fusion", speedup=1.5),
    )))
    sibling = "run-variant:a2"  # the kernel_fusion child: another parent of the same run
    plan = Planner(store).plan({**FP32_GEMM, "max_pointwise_chain": 0}, parent=sibling)
    gemm = next(c for c in plan.chosen if c.technique == "gemm_epilogue_fusion")
    assert [v.key for v in gemm.variants] == others
    assert {(v.variant, v.reason) for v in plan.ruled_out if v.technique == "gemm_epilogue_fusion"} >= {
        (first, "tabu: failed the tolerance at attempt 1 of this run")}
    elsewhere = write_trajectory(store, "run-elsewhere", Lineage())
    assert first in [v.key for v in Planner(store).plan(FP32_GEMM, parent=elsewhere).chosen[0].variants], (
        "another run's failures rule nothing out")


def add_child(store: GraphStore, run: str, n: int, parent: int, technique: str, speedup: float | None) -> str:
    """One more attempt of `run`, derived from its attempt `parent`: verified at `speedup`, or (None) out of
    the tolerance."""
    props = {"run_id": run, "n": n, "kind": "optimize", "code_hash": f"{run}:h{n}",
             "status": "verified" if speedup else "numeric", "correct": bool(speedup)}
    if speedup:
        props["speedup"] = speedup
    with store.transaction() as tx:
        tx.write(queries.merge_nodes("Attempt"), {"rows": [{"id": f"{run}:a{n}", "props": props}], "now": NOW})
        tx.write(queries.merge_edges("HAS_ATTEMPT", "Run", "Attempt"),
                 {"rows": [{"start": run, "end": f"{run}:a{n}", "props": {}}]})
        tx.write(queries.merge_edges("DERIVED_FROM", "Attempt", "Attempt"),
                 {"rows": [{"start": f"{run}:a{n}", "end": f"{run}:a{parent}", "props": {}}]})
        tx.write(queries.merge_edges("APPLIED", "Attempt", "Technique"),
                 {"rows": [{"start": f"{run}:a{n}", "end": technique, "props": {}}]})
    return f"{run}:a{n}"


def test_a_technique_that_failed_the_tolerance_from_two_parents_and_passed_from_none_is_not_tried_again(
        store: GraphStore):
    run = "run-twice"
    write_trajectory(store, run, Lineage(children=(
        Child("online_softmax", status="numeric", correct=False), Child("fused_normalization", speedup=1.5))))
    once = Planner(store).plan(TIE, parent=f"{run}:a2")
    assert once.selected == "online_softmax", "one failure, from another parent, rules nothing out"
    add_child(store, run, 3, 2, "online_softmax", None)  # the second failure, from the fused_normalization child
    later = add_child(store, run, 4, 2, "kernel_fusion", 1.6)
    assert reasons(Planner(store).plan(TIE, parent=later))["online_softmax"] == (
        "tabu: failed the tolerance at attempts 1, 3 of this run and passed it at none")
    add_child(store, run, 5, 0, "kernel_fusion", 1.2)
    add_child(store, run, 6, 5, "online_softmax", 1.3)  # a pass anywhere in the run lifts it
    assert Planner(store).plan(TIE, parent=later).selected == "online_softmax"


def test_the_case_counts_each_rejected_technique_once(store: GraphStore):
    parent = write_trajectory(store, "run-count", Lineage(children=(
        Child("flash_attention", status="numeric", correct=False), Child("online_softmax", speedup=1.005))))
    plan = Planner(store).plan(ATTENTION, parent=parent)
    assert plan.case.endswith(f"({len({r.technique for r in plan.rejected})})")


def test_a_child_that_gained_is_not_tried_again_from_its_parent_and_other_parents_are_unaffected(
        store: GraphStore):
    parent = write_trajectory(store, "run-gain", Lineage(children=(Child("flash_attention", speedup=1.9),)))
    plan = Planner(store).plan(ATTENTION, parent=parent)
    assert reasons(plan)["flash_attention"] == "already tried from this parent at attempt 1 (1.900x)"
    assert plan.selected == "online_softmax"  # the search goes on from the child, which is a parent of its own
    other = write_trajectory(store, "run-other", Lineage(children=(Child("flash_attention", speedup=0.9),)))
    assert reasons(Planner(store).plan(ATTENTION, parent=other))["flash_attention"].startswith("tabu: ")
    fresh = write_trajectory(store, "run-fresh", Lineage())
    assert Planner(store).plan(ATTENTION, parent=fresh).selected == "flash_attention"


def test_lineage_already_applied_and_its_conflicts_are_excluded(store: GraphStore):
    parent = write_trajectory(store, "run-lineage", Lineage(applied=(("flash_attention", 2.0), ("autotune_launch", 2.1))))
    plan = Planner(store).plan({**ATTENTION, "memory_bound": True, "code_custom_kernels": 1}, parent=parent)
    why = reasons(plan)
    assert why["flash_attention"] == "already applied in this lineage (attempt 1)"
    assert why["online_softmax"] == "conflicts with flash_attention, applied in this lineage (attempt 1)"
    assert why["autotune_launch"] == "already applied in this lineage (attempt 2)"
    assert plan.selected not in {"flash_attention", "online_softmax", "autotune_launch"}
    delete_trajectory(store, "run-lineage")
    assert Planner(store).plan({**ATTENTION, "memory_bound": True}, parent=parent).selected == "flash_attention", (
        "once the trajectory is gone nothing is tabu")


def test_a_cycle_in_the_trajectory_still_terminates_and_is_read(store: GraphStore):
    parent = write_trajectory(store, "run-cycle", Lineage(applied=(("flash_attention", 2.0), ("kernel_fusion", 2.2))))
    store.write(queries.merge_edges("DERIVED_FROM", "Attempt", "Attempt"),
                {"rows": [{"start": "run-cycle:a0", "end": parent, "props": {}}]})
    first = Planner(store).plan(ATTENTION, parent=parent)
    assert reasons(first)["flash_attention"] == "already applied in this lineage (attempt 1)"
    assert Planner(store).plan(ATTENTION, parent=parent).to_json() == first.to_json()


# --- guards -----------------------------------------------------------------------------------


def test_forbidden_when_rules_out_and_says_which_condition(store: GraphStore):
    launch_bound = {"kernel_launches_per_forward": 9, "launches_per_forward": 9, "cpu_overhead_pct": 70.0,
                    "static_shapes": True, "max_pointwise_chain": 1}
    assert Planner(store).plan(launch_bound).selected == "cuda_graph"
    plan = Planner(store).plan({**launch_bound, "code_uses_cuda_graph": True})
    assert reasons(plan)["cuda_graph"] == "forbidden when code_uses_cuda_graph is true: it holds"
    assert plan.selected is None


def test_a_forbidden_condition_over_a_missing_metric_does_not_forbid(store: GraphStore):
    plan = Planner(store).plan({"kernel_launches_per_forward": 9, "launches_per_forward": 9, "cpu_overhead_pct": 70.0,
                                "static_shapes": True})
    assert plan.selected == "cuda_graph", "code_uses_cuda_graph was not observed: nothing forbids"


def test_missing_metrics_are_unavailable_and_never_held(store: GraphStore):
    # launch_overhead needs both kernel_launches_per_forward and cpu_overhead_pct; one is missing.
    plan = Planner(store).plan({"kernel_launches_per_forward": 9, "static_shapes": True, "cpu_overhead_pct": None})
    launch = next(b for b in plan.bottlenecks if b.id == "launch_overhead")
    assert not launch.matched
    assert {c.metric: c.held for c in launch.checks} == {"kernel_launches_per_forward": True, "cpu_overhead_pct": None}
    assert "cpu_overhead_pct" in plan.unavailable and "cpu_overhead_pct" not in plan.observations
    assert "kernel_launches_per_forward" not in plan.unavailable
    assert plan.selected is None and plan.case == "no bottleneck signature holds for these observations"
    # A technique whose precondition metric is missing is rejected, saying the metric was not observed.
    chain_unknown = Planner(store).plan({"memory_bound": True, "has_softmax": True})
    assert reasons(chain_unknown)["kernel_fusion"] == "requires max_fused_ops >= 2: max_fused_ops was not observed"
    assert chain_unknown.selected == "online_softmax"


def test_not_equal_and_is_true_conditions_are_never_held_by_absence(store: GraphStore):
    # nchw_convolution_layout's signature: has_convolution is true AND code_uses_channels_last == false.
    conv = {"has_convolution": True, "has_contraction": True}
    plan = Planner(store).plan(conv)
    nchw = next(b for b in plan.bottlenecks if b.id == "nchw_convolution_layout")
    assert not nchw.matched and [c.held for c in nchw.checks if c.metric == "code_uses_channels_last"] == [None]
    assert Planner(store).plan({**conv, "code_uses_channels_last": False}).selected == "channels_last"


# --- the brain's veto and the fallback tier ----------------------------------------------------------


def test_capability_rejections_pass_the_choice_down_with_the_brains_reason(store: GraphStore):
    asked: list[str] = []

    def capability(technique: str) -> tuple[bool, str]:
        asked.append(technique)
        return (technique != "kernel_fusion", "no fx region with two pointwise ops")

    assert Planner(store).plan({**CHAIN, "has_softmax": True, "reduction_like_op_count": 1}).selected == "kernel_fusion"
    plan = Planner(store).plan({**CHAIN, "has_softmax": True, "reduction_like_op_count": 1}, capability=capability)
    assert reasons(plan)["kernel_fusion"] == "the brain cannot apply it here: no fx region with two pointwise ops"
    assert (plan.selected, plan.bottleneck) == ("online_softmax", "unfused_reduction")
    # Only techniques that passed the guards reach the brain (once per bottleneck edge that offers them).
    assert set(asked) == {"kernel_fusion", "online_softmax"}


def test_fallback_tier_proposes_guarded_techniques_in_the_retrievers_order(store: GraphStore):
    calls: list[tuple[str, int]] = []

    def fallback(description: str, k: int) -> list[str]:
        calls.append((description, k))
        return ["cuda_graph", "no_such_technique", "kernel_fusion", "fused_loss", "online_softmax"]

    obs = {"max_pointwise_chain": 3, "max_fused_ops": 3, "has_loss": True, "static_shapes": True, "kernel_launches_per_forward": 1,
           "launches_per_forward": 1}
    plan = Planner(store, fallback=fallback).plan(obs)
    assert calls == [("has loss static shapes", 5)], "without a description the true flags describe the kernel"
    assert plan.tier == "fallback" and plan.bottleneck is None
    assert [r.technique for r in plan.ranked] == ["kernel_fusion", "fused_loss"], "retrieval order is kept"
    assert plan.selected == "kernel_fusion"
    assert reasons(plan)["cuda_graph"] == "requires launches_per_forward >= 3: not met"
    assert reasons(plan)["online_softmax"] == "requires has_softmax is true: has_softmax was not observed"
    assert plan.case == "no rule applied; nearest technique by retrieval: kernel_fusion"
    assert Planner(store, fallback=fallback).plan(obs, description="fuse my ops").to_json() == plan.to_json()
    assert calls[-1] == ("fuse my ops", 5)


def test_fallback_respects_the_lineage_and_is_not_asked_when_a_rule_applies(store: GraphStore):
    asked: list[str] = []

    def fallback(description: str, k: int) -> list[str]:
        asked.append(description)
        return ["kernel_fusion"]

    parent = write_trajectory(store, "run-fb", Lineage(applied=(("kernel_fusion", 1.7),)))
    plan = Planner(store, fallback=fallback).plan({"max_pointwise_chain": 3, "max_fused_ops": 3}, parent=parent)
    assert plan.tier == "none" and plan.selected is None
    assert reasons(plan)["kernel_fusion"] == "already applied in this lineage (attempt 1)"
    asked.clear()
    assert Planner(store, fallback=fallback).plan(CHAIN).tier == "rule"
    assert asked == []


# --- the Decision subgraph ----------------------------------------------------------------------


def test_record_writes_the_decision_subgraph(store: GraphStore):
    planner = Planner(store)
    obs = {**CHAIN, "code_custom_kernels": 1, "cpu_overhead_pct": None}
    plan = planner.plan(obs)
    assert planner.record(plan) == plan.id
    assert planner.record(plan) == plan.id  # idempotent
    selected = store.run(DECISION_SELECTED, {"id": plan.id})
    assert selected == [{"technique": plan.selected, "bottleneck": plan.bottleneck, "rank": 1,
                         "tier": "rule", "case": plan.case}]
    observed = {r["metric"]: r for r in store.run(DECISION_OBSERVATIONS, {"id": plan.id})}
    assert observed["max_pointwise_chain"] == {"metric": "max_pointwise_chain", "value": 3, "available": True}
    assert observed["memory_bound"]["value"] is True
    assert observed["cpu_overhead_pct"] == {"metric": "cpu_overhead_pct", "value": None, "available": False}
    assert set(observed) == set(plan.observations) | set(plan.unavailable)
    matched = store.run(DECISION_MATCHES, {"id": plan.id})
    assert sorted(r["id"] for r in matched if r["label"] == "Bottleneck") == sorted(b.id for b in plan.matched)
    assert sorted(r["id"] for r in matched if r["label"] == "Condition") == sorted(
        c.id for b in plan.matched for c in b.checks)
    rejected = store.run(DECISION_REJECTED, {"id": plan.id})
    assert {r["technique"] for r in rejected} == {r.technique for r in plan.rejected}
    assert {r["technique"]: r["reason"] for r in rejected}["fused_loss"] == (
        "requires has_loss is true: has_loss was not observed")
    outranked = [r for r in rejected if r["reason"].startswith("outranked by ")]
    assert outranked and all(r["reason"] == f"outranked by {plan.selected}" for r in outranked)
    counts = {r["rel"]: r["n"] for r in store.run(COUNT_DECISION_EDGES, {"id": plan.id})}
    assert counts["SELECTED"] == 1 and counts["REJECTED"] == len(rejected)


def test_record_of_a_plan_that_selected_nothing(store: GraphStore):
    planner = Planner(store)
    plan = planner.plan({"dtype": "float32"})
    planner.record(plan)
    assert store.run(DECISION_SELECTED, {"id": plan.id}) == []
    counts = {r["rel"]: r["n"] for r in store.run(COUNT_DECISION_EDGES, {"id": plan.id})}
    assert counts.get("MATCHED", 0) == 0 and counts["OBSERVED"] >= 2


def test_a_new_decision_from_the_same_parent_is_a_new_decision_node(store: GraphStore):
    planner = Planner(store)
    parent = write_trajectory(store, "run-redecide", Lineage())
    first = planner.plan(ATTENTION, parent=parent)
    planner.record(first)
    write_trajectory(store, "run-redecide", Lineage(children=(Child("flash_attention", status="numeric", correct=False),)))
    second = planner.plan(ATTENTION, parent=parent)
    assert second.selected != first.selected
    planner.record(second)
    for plan in (first, second):
        assert [r["technique"] for r in store.run(DECISION_SELECTED, {"id": plan.id})] == [plan.selected]
        assert store.run(DECISION_SELECTED, {"id": plan.id})[0]["case"] == plan.case


# --- learning from outcomes ----------------------------------------------------------------------


def test_record_outcome_counts_trials_and_folds_the_gain(store: GraphStore):
    planner = Planner(store)
    planner.record_outcome("unfused_reduction", "online_softmax", 1.6)
    planner.record_outcome("unfused_reduction", "online_softmax", 0.9)
    stats = store.run(EDGE_STATS, {"b": "unfused_reduction", "t": "online_softmax"})
    assert stats[0]["trials"] == 2 and stats[0]["successes"] == 1 and stats[0]["priority"] == 90
    assert math.isclose(stats[0]["mean_gain"], 1.25)
    planner.record_outcome("no_such_bottleneck", "online_softmax", 2.0)  # touches nothing
    assert store.run(EDGE_STATS, {"b": "unfused_reduction", "t": "online_softmax"}) == stats


def test_the_learned_prior_breaks_a_tie_but_not_priority(store: GraphStore):
    planner = Planner(store)
    tie = planner.plan(TIE)
    top = [(r.technique, r.priority, r.expected_gain, r.prior) for r in tie.ranked[:2]]
    assert top == [("fused_normalization", 90, 1.5, 0.5), ("online_softmax", 90, 1.5, 0.5)], "a tie goes to the id"
    planner.record_outcome("unfused_reduction", "online_softmax", 1.6)
    learned = planner.plan(TIE)
    assert learned.selected == "online_softmax"
    assert learned.ranked[0].prior == round(1.6 * 2 / 3, 6)
    # A strong prior on a lower-priority edge does not overturn priority.
    for _ in range(5):
        planner.record_outcome("unfused_reduction", "fused_loss", 3.0)
    assert planner.plan({**TIE, "has_loss": True}).selected == "online_softmax"
    # Failures push a technique below its tie partner.
    for _ in range(3):
        planner.record_outcome("unfused_reduction", "online_softmax", 0.8)
    assert planner.plan(TIE).selected == "fused_normalization"


# --- deliberately broken graphs --------------------------------------------------------------------


def _condition(metric: str, op: str, value: Any = None) -> dict[str, Any]:
    c = Condition.of(metric, op, value)
    return {"id": c.id, "props": {k: v for k, v in c.properties().items() if k != "id"}}


def _skills(store: GraphStore, bottlenecks: dict[str, list], techniques: dict[str, dict[str, Any]],
            addressed: list[tuple[str, str, dict[str, Any]]]) -> None:
    """A hand-made skill base: bottleneck -> signature conditions; technique -> requires/forbidden/status."""
    conditions: dict[str, dict[str, Any]] = {}
    detected, requires, forbidden = [], [], []
    for bid, signature in bottlenecks.items():
        for spec in signature:
            c = _condition(*spec)
            conditions[c["id"]] = c
            detected.append({"start": bid, "end": c["id"], "props": {}})
    for tid, spec in techniques.items():
        for rel, rows in (("requires", requires), ("forbidden", forbidden)):
            for cspec in spec.get(rel, []):
                c = _condition(*cspec)
                conditions[c["id"]] = c
                rows.append({"start": tid, "end": c["id"], "props": {}})
    with store.transaction() as tx:
        tx.write(queries.merge_nodes("Bottleneck"), {"now": NOW, "rows": [
            {"id": b, "props": {"name": b, "description": b, "status": "accepted"}} for b in bottlenecks]})
        tx.write(queries.merge_nodes("Technique"), {"now": NOW, "rows": [
            {"id": t, "props": {"name": t, "description": t, "status": s.get("status", "accepted")}}
            for t, s in techniques.items()]})
        tx.write(queries.merge_nodes("Condition"), {"now": NOW, "rows": list(conditions.values())})
        tx.write(queries.merge_edges("DETECTED_BY", "Bottleneck", "Condition"), {"rows": detected})
        tx.write(queries.merge_edges("REQUIRES", "Technique", "Condition"), {"rows": requires})
        tx.write(queries.merge_edges("FORBIDDEN_WHEN", "Technique", "Condition"), {"rows": forbidden})
        tx.write(queries.merge_edges("ADDRESSED_BY", "Bottleneck", "Technique"), {"rows": [
            {"start": b, "end": t, "props": props} for b, t, props in addressed]})


def test_requires_and_forbidden_holding_together_rejects_deterministically(empty_store: GraphStore):
    _skills(empty_store, {"slow": [("x", ">", 1)]},
            {"both": {"requires": [("y", ">=", 2)], "forbidden": [("y", ">", 1)]},
             "plain": {"requires": [("y", ">=", 0)]}},
            [("slow", "both", {"priority": 90, "expected_gain": 2.0}),
             ("slow", "plain", {"priority": 10, "expected_gain": 1.1})])
    planner = Planner(empty_store)
    plan = planner.plan({"x": 5, "y": 3})
    assert reasons(plan)["both"] == "forbidden when y > 1: it holds"
    assert plan.selected == "plain" and plan.bottleneck == "slow"
    assert all(planner.plan({"y": 3, "x": 5}).to_json() == plan.to_json() for _ in range(3))


def test_an_impossible_signature_never_matches_and_shows_its_failing_check(empty_store: GraphStore):
    _skills(empty_store, {"never": [("x", ">", 10), ("x", "<", 5)], "sometimes": [("x", ">", 10)]},
            {"t": {}}, [("never", "t", {"priority": 99, "expected_gain": 3.0}),
                        ("sometimes", "t", {"priority": 1, "expected_gain": 1.01})])
    planner = Planner(empty_store)
    for x in (0, 7, 12):
        plan = planner.plan({"x": x})
        never = next(b for b in plan.bottlenecks if b.id == "never")
        assert not never.matched and False in [c.held for c in never.checks]
    high = planner.plan({"x": 12})
    assert (high.selected, high.bottleneck, high.ranked[0].priority) == ("t", "sometimes", 1)
    assert planner.plan({"x": 12}).to_json() == high.to_json()


def test_missing_priority_and_proposed_status_are_handled_in_the_open(empty_store: GraphStore):
    _skills(empty_store, {"slow": [("x", ">", 1)]},
            {"unranked": {}, "ranked": {}, "draft": {"status": "proposed"}},
            [("slow", "unranked", {}), ("slow", "ranked", {"priority": 5, "expected_gain": 1.1}),
             ("slow", "draft", {"priority": 100, "expected_gain": 5.0})])
    plan = Planner(empty_store).plan({"x": 3})
    assert [(r.technique, r.priority, r.expected_gain) for r in plan.ranked] == [
        ("ranked", 5, 1.1), ("unranked", 0, 1.0)]
    widened = Planner(empty_store, statuses=("accepted", "proposed")).plan({"x": 3})
    assert widened.selected == "draft" and widened.id != plan.id


def test_a_technique_reached_from_two_bottlenecks_keeps_its_best_edge(empty_store: GraphStore):
    _skills(empty_store, {"a": [("x", ">", 1)], "b": [("x", ">", 2)]},
            {"t": {}, "u": {}},
            [("a", "t", {"priority": 40, "expected_gain": 1.2}), ("b", "t", {"priority": 70, "expected_gain": 1.1}),
             ("a", "u", {"priority": 60, "expected_gain": 1.5})])
    plan = Planner(empty_store).plan({"x": 3})
    assert [(r.technique, r.bottleneck, r.priority) for r in plan.ranked] == [("t", "b", 70), ("u", "a", 60)]
    assert reasons(plan) == {"u": "outranked by t"}, "the weaker edge of t is not listed as a rejection"


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_observations_count_as_unavailable(store: GraphStore, bad: float):
    plan = Planner(store).plan({"branch_efficiency_pct": bad, "code_custom_kernels": 1})
    assert "branch_efficiency_pct" in plan.unavailable and plan.selected is None


def test_an_observed_metric_that_cannot_be_compared_is_not_called_unobserved(store: GraphStore):
    plan = Planner(store).plan({"waves_per_sm": "n/a", "wave_efficiency": 0.5, "code_custom_kernels": "1",
                                "memory_bound": True})
    assert "waves_per_sm" not in plan.unavailable
    assert "was not observed" not in reasons(plan)["autotune_launch"]


def test_the_first_blocking_guard_is_an_unmet_requirement_then_the_lowest_condition(empty_store: GraphStore):
    unmet = [("y", ">", 10), ("y", ">", 20), ("z", "is_true")]
    _skills(empty_store, {"slow": [("x", ">", 1)]},
            {"t": {"requires": unmet, "forbidden": [("x", ">", 2)]}, "u": {"forbidden": [("x", ">", 2)]}},
            [("slow", "t", {"priority": 9}), ("slow", "u", {"priority": 1})])
    first = min((Condition.of(*c) for c in unmet), key=lambda c: c.id)
    plan = Planner(empty_store).plan({"x": 3, "y": 5})
    why = "z was not observed" if first.metric == "z" else "not met"
    assert reasons(plan)["t"] == f"requires {first.text}: {why}", "never the forbidden one, though it holds too"
    assert reasons(plan)["u"] == "forbidden when x > 2: it holds" and plan.selected is None


def test_a_guard_on_a_proposed_edge_blocks_only_when_proposed_claims_are_admitted(empty_store: GraphStore):
    _skills(empty_store, {"slow": [("x", ">", 1)]}, {"t": {"forbidden": [("x", ">", 2)]}},
            [("slow", "t", {"priority": 5})])
    empty_store.write("MATCH (:Technique {id: 't'})-[f:FORBIDDEN_WHEN]->() SET f.status = 'proposed'")
    assert Planner(empty_store).plan({"x": 3}).selected == "t"
    widened = Planner(empty_store, statuses=("accepted", "proposed")).plan({"x": 3})
    assert widened.selected is None and reasons(widened) == {"t": "forbidden when x > 2: it holds"}


def test_a_condition_holds_in_python_as_the_planners_query_finds_it(empty_store: GraphStore):
    """Condition.holds (the eval report's launch-bound check) agrees with the Cypher that the Planner runs."""
    specs = [("a", "<", 3), ("a", "<=", 5), ("a", ">", 5), ("a", ">=", 5), ("a", "==", 5), ("a", "!=", 5),
             ("a", "in", [1, 5]), ("b", "is_true"), ("c", "is_true"), ("d", ">", 1), ("e", "==", True)]
    _skills(empty_store, {f"b{i}": [spec] for i, spec in enumerate(specs)}, {"t": {}},
            [(f"b{i}", "t", {"priority": 1, "expected_gain": 1.1}) for i in range(len(specs))])
    seen = {"a": 5, "b": True, "c": False, "e": True}  # d is not observed
    plan = Planner(empty_store).plan(seen)
    by_id = {b.id: b.checks[0].held for b in plan.bottlenecks}
    python = {f"b{i}": Condition.of(*spec).holds(seen.get(spec[0])) for i, spec in enumerate(specs)}
    assert python == by_id
    assert [python[f"b{i}"] for i in range(len(specs))] == [False, True, False, True, True, False, True, True,
                                                           False, None, True]
