"""Wide plans on the built-in skill base: several techniques per parent, each with the variants
its graph allows, recorded in the Decision subgraph, and byte for byte the same for the same
graph and observations. Observations come from the real Feature Extractor."""

from __future__ import annotations

from pathlib import Path

from search_support import BROADCAST, GEMM

from kskill.agents.observe import FeatureExtractor
from kskill.agents.planner import Planner
from kskill.graph_schema.store import GraphStore, open_store

TF32X3_FORMS = {"gemm_epilogue_fusion.triton_tf32x3", "gemm_epilogue_fusion.triton_tf32x3_small_tiles"}
DECISION_EDGES = (
    "MATCH (d:Decision {id: $id})-[r]->(x) "
    "RETURN type(r) AS rel, x.id AS target, r.rank AS rank, r.reason AS reason, r.attempt AS attempt, "
    "r.technique AS technique, r.outcome AS outcome ORDER BY rel, target"
)


def observations(problem: Path, tolerance: float | None = None) -> FeatureExtractor:
    return FeatureExtractor(problem.read_text(), atol=tolerance, rtol=tolerance, gpu=None)


def plan_of(store: GraphStore, problem: Path, tolerance: float | None = None, width: int = 4):
    obs = observations(problem, tolerance).observe()
    return Planner(store).plan(obs.to_params(), width=width, derivations=obs.derivations, reasons=obs.unavailable)


def gemm_choice(plan):
    return next(c for c in plan.chosen if c.technique == "gemm_epilogue_fusion")


def test_the_wide_plan_offers_3xtf32_forms_at_fp32_tolerance(store: GraphStore):
    plan = plan_of(store, GEMM)
    assert len(plan.chosen) >= 2  # kernel fusion (GELU then the scale) and the GEMM's epilogue, at least
    gemm = gemm_choice(plan)
    forms = [v.id for v in gemm.variants]
    assert forms[0] == "gemm_epilogue_fusion.triton_tf32x3", "the highest-priority form the tolerance admits"
    assert TF32X3_FORMS <= set(forms) and "gemm_epilogue_fusion.library" in forms
    assert gemm.variants[0].params == {"dot_precision": "tf32x3", "gemm_backend": "triton"}
    # 1xTF32 needs 5e-3: at fp32's 1e-4 it is ruled out, and the plan says which guard did it.
    ruled = {v.variant: v.reason for v in plan.ruled_out}
    assert ruled["gemm_epilogue_fusion.triton_tf32"] in ("requires rtol >= 0.005: not met",
                                                         "requires atol >= 0.005: not met")


def test_a_tolerance_below_3xtf32_rules_its_forms_out_with_the_reason(store: GraphStore):
    plan = plan_of(store, GEMM, tolerance=1e-6)
    forms = {v.id for v in gemm_choice(plan).variants}
    assert forms == {"gemm_epilogue_fusion.library", "gemm_epilogue_fusion.triton_ieee"}
    ruled = {v.variant: v.reason for v in plan.ruled_out}
    for form in TF32X3_FORMS:
        assert ruled[form] in ("requires rtol >= 1e-05: not met", "requires atol >= 1e-05: not met"), ruled[form]


def test_loose_tolerance_admits_one_pass_tf32(store: GraphStore):
    forms = [v.id for v in gemm_choice(plan_of(store, GEMM, tolerance=1e-2)).variants]
    assert forms[0] == "gemm_epilogue_fusion.triton_tf32"


def test_width_bounds_the_techniques_and_zero_admits_all(store: GraphStore):
    narrow, every = (plan_of(store, GEMM, width=w) for w in (1, 0))
    order = [c.technique for c in every.chosen]
    assert order == [r.technique for r in every.ranked] and len(order) >= 2
    assert [c.technique for c in narrow.chosen] == order[:1]
    assert {r.technique: r.reason for r in narrow.rejected}[order[1]] == f"outranked by {order[0]}"


def test_a_lone_broadcast_multiply_has_an_admissible_technique(store: GraphStore):
    plan = plan_of(store, BROADCAST)
    assert plan.selected == "pointwise_kernel" and plan.bottleneck == "memory_bandwidth"
    assert dict((r.technique, r.reason) for r in plan.rejected)["kernel_fusion"] == (
        "requires max_fused_ops >= 2: not met")


def test_variant_decisions_are_recorded_and_byte_for_byte_deterministic(store: GraphStore, graph_home: Path):
    first = plan_of(store, GEMM)
    extractor = observations(GEMM)
    obs = extractor.observe()
    shuffled = dict(reversed(list(obs.to_params().items())))
    again = open_store("embedded", graph_home, graph_name=store.graph_name)
    try:
        second = Planner(again).plan(shuffled, width=4, derivations=obs.derivations, reasons=obs.unavailable)
    finally:
        again.close()
    assert second.to_json() == first.to_json()

    gemm = gemm_choice(first)
    written = {gemm.variants[0].key: 7, gemm.variants[1].key: 8}
    not_written = {gemm.variants[2].key: "gives the same code as attempt 7"}
    planner = Planner(store)
    planner.record(first, written=written, not_written=not_written)
    recorded = store.run(DECISION_EDGES, {"id": first.id})
    planner.record(second, written=written, not_written=not_written)  # the same decision, written again
    assert store.run(DECISION_EDGES, {"id": first.id}) == recorded

    generated = {r["target"]: r["attempt"] for r in recorded if r["rel"] == "GENERATED"}
    assert generated == written
    ruled = {r["target"]: r["reason"] for r in recorded if r["rel"] == "RULED_OUT"}
    assert ruled[gemm.variants[2].key] == "not written: gives the same code as attempt 7"
    assert ruled["gemm_epilogue_fusion.triton_tf32"].startswith("requires ")
    selected = sorted((r["rank"], r["target"], r["outcome"]) for r in recorded if r["rel"] == "SELECTED")
    assert (gemm.rank, "gemm_epilogue_fusion", "written as attempt 7, 8") in selected
    assert [t for _, t, _ in selected] == [c.technique for c in first.chosen]
    # Derivations and the reasons metrics are missing reach the Decision's observations.
    rows = {r["metric"]: r for r in store.run(
        "MATCH (:Decision {id: $id})-[:OBSERVED]->(o:Observation) RETURN o.metric AS metric, "
        "o.derivation AS derivation, o.reason AS reason", {"id": first.id})}
    assert rows["memory_bound"]["derivation"].startswith("arithmetic_intensity against every known GPU")
    assert first.unavailable and all(rows[m]["reason"] == obs.unavailable[m] for m in first.unavailable)


GRU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(16, 32, 2, bidirectional=True)

    def forward(self, x, h0):
        output, h_n = self.gru(x, h0)
        return h_n


def get_inputs():
    return [torch.randn(40, 3, 16), torch.randn(4, 3, 32)]


def get_init_inputs():
    return []
'''


def test_a_candidate_that_keeps_a_recurrent_layer_is_planned_as_launching_its_time_steps(store: GraphStore):
    """The faithful seed calls `self.gru` once in its code, yet runs its 40 steps x 2 layers x 2
    directions: its plan, like the reference's, offers a CUDA graph over the time loop."""
    from kskill.agents.brains.base import SeedTask
    from kskill.agents.brains.recipes import RecipeBrain

    extractor = FeatureExtractor(GRU, gpu=None)
    seed = RecipeBrain().seed(SeedTask(GRU, "gru")).source
    reference, candidate = extractor.observe(), extractor.observe(seed)
    assert candidate.values["code_recurrent_calls"] == 1
    steps = 2 * 40 * 2 * 2  # two launches per step, layer and direction
    assert candidate.values["launches_per_forward"] == reference.values["launches_per_forward"] == steps
    plan = Planner(store).plan(candidate.to_params(), width=4, derivations=candidate.derivations,
                               reasons=candidate.unavailable)
    assert "cuda_graph" in [c.technique for c in plan.chosen]
