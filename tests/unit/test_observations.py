"""Observations: merging, Nsight Compute name mapping, derived metrics and the GPU peak table."""

from __future__ import annotations

import math

import pytest

from kskill.agents import gpus
from kskill.agents.features import Features
from kskill.agents.observations import ObservationError, Observations, ncu_name_map, roofline_seconds, vocabulary

H100 = gpus.BY_KEY["h100-sxm"]

# Features of a 1024^3 fp32 GEMM reference and of a 1M-element pointwise reference.
GEMM = Features({"flops": 2 * 1024**3, "bytes_moved": 3 * 1024 * 1024 * 4, "has_contraction": True,
                 "input_dtypes": "float32", "max_pointwise_chain": 0})
POINTWISE = Features({"flops": 6 * 2**20, "bytes_moved": 3 * 2**22, "has_contraction": False,
                      "input_dtypes": "float32", "max_pointwise_chain": 6}, {"gemm_k": "no GEMM"})


def test_merge_combines_sources_and_records_what_is_missing():
    obs = Observations.merge(profile={"kernel_launches_per_forward": 6, "runtime_ms": 0.05},
                             features=POINTWISE, problem={"dtype": "float32", "atol": 1e-4, "rtol": 1e-4},
                             gpu=None, unavailable={"sm_throughput_pct": "counters not readable"})
    params = obs.to_params()
    assert params["kernel_launches_per_forward"] == 6 and params["max_pointwise_chain"] == 6
    assert params["dtype"] == "float32" and params["rtol"] == 1e-4
    assert obs.unavailable["sm_throughput_pct"] == "counters not readable"
    assert obs.unavailable["gemm_k"] == "no GEMM"
    assert "no GPU given" in obs.unavailable["roofline_fraction"]
    assert set(obs.values) | set(obs.unavailable) == set(vocabulary())  # every name accounted for
    assert not set(obs.values) & set(obs.unavailable)


def test_values_must_fit_their_metric_type():
    with pytest.raises(ObservationError, match="sm_throughput_pct is a number"):
        Observations.merge(profile={"sm_throughput_pct": "high"}, gpu=None)
    with pytest.raises(ObservationError, match="memory_bound is a bool"):
        Observations.merge(profile={"memory_bound": 1}, gpu=None)


def test_names_outside_the_vocabulary_are_kept_apart():
    obs = Observations.merge(profile={"made_up_metric": 3.0, "runtime_ms": None}, gpu=None)
    assert obs.unknown == {"made_up_metric": 3.0} and "made_up_metric" not in obs.to_params()
    assert obs.unavailable["runtime_ms"] == "reported without a value"


def test_dtype_comes_from_the_inputs_when_the_problem_does_not_say():
    obs = Observations.merge(features=Features({"input_dtypes": "bool,float16"}), gpu=None)
    assert obs.values["dtype"] == "float16" and "floating dtype" in obs.derivations["dtype"]
    mixed = Observations.merge(features=Features({"input_dtypes": "float16,float32"}), gpu=None)
    assert "dtype" not in mixed.values


def test_arithmetic_intensity_and_boundness_on_a_known_gpu():
    obs = Observations.merge(features=POINTWISE, problem={"dtype": "float32"}, gpu=H100)
    assert obs.values["arithmetic_intensity"] == pytest.approx(6 * 2**20 / (3 * 2**22))
    assert obs.values["ridge_point"] == pytest.approx(67e12 / 3350e9)
    assert obs.values["memory_bound"] is True and obs.values["compute_bound"] is False
    assert obs.values["gpu_arch"] == "hopper" and obs.values["gpu_sm_count"] == 132
    gemm = Observations.merge(features=GEMM, problem={"dtype": "float32"}, gpu=H100)
    assert gemm.values["arithmetic_intensity"] == pytest.approx(2 * 1024**3 / (12 * 2**20))  # ~170.7
    assert gemm.values["compute_bound"] is True and gemm.values["memory_bound"] is False


def test_without_a_gpu_boundness_must_hold_on_every_known_gpu():
    low, high = gpus.ridge_bounds("float32", tensor_cores=False)
    assert low == pytest.approx(19.5e12 / 2039e9) and high == pytest.approx(91.6e12 / 864e9)
    pointwise = Observations.merge(features=POINTWISE, problem={"dtype": "float32"}, gpu=None)
    assert pointwise.values["memory_bound"] is True and "every known GPU" in pointwise.derivations["memory_bound"]
    gemm = Observations.merge(features=GEMM, problem={"dtype": "float32"}, gpu=None)
    assert gemm.values["compute_bound"] is True
    between = Features({"flops": 40 * 1000, "bytes_moved": 1000, "input_dtypes": "float32"})
    middle = Observations.merge(features=between, gpu=None)  # 40 FLOP/byte: depends on the GPU
    assert middle.values["memory_bound"] is False and middle.values["compute_bound"] is False
    assert "ridge_point" in middle.unavailable and "gpu_name" in middle.unavailable


def test_roofline_fraction_and_headroom_from_runtime():
    obs = Observations.merge(profile={"runtime_ms": 0.02, "reference_runtime_ms": 0.05},
                             features=POINTWISE, problem={"dtype": "float32"}, gpu=H100)
    roof_s = max(6 * 2**20 / 67e12, 3 * 2**22 / 3350e9)
    assert obs.values["roofline_fraction"] == pytest.approx(roof_s / 0.02e-3)
    assert obs.values["headroom"] == pytest.approx(1 - roof_s / 0.02e-3)
    assert obs.values["speedup"] == pytest.approx(2.5)


def test_a_runtime_faster_than_the_roof_leaves_the_fraction_unavailable():
    """A kernel cannot beat the roofline: a fraction far above 1 means the estimate assumed the wrong
    unit (cuBLAS/cuDNN on TF32 tensor cores for fp32), so it must not stop a run or feed a rule."""
    roof_s = roofline_seconds(Observations.merge(features=POINTWISE, problem={"dtype": "float32"}, gpu=H100), H100)
    assert roof_s == pytest.approx(max(6 * 2**20 / 67e12, 3 * 2**22 / 3350e9))
    fast = Observations.merge(profile={"runtime_ms": roof_s * 1e3 / 2}, features=POINTWISE,
                              problem={"dtype": "float32"}, gpu=H100)
    assert "roofline_fraction" not in fast.values and "headroom" not in fast.values
    assert "200% of the roof" in fast.unavailable["roofline_fraction"]


def test_tensor_core_roof_for_half_precision_contractions():
    half = Features({**GEMM.values, "input_dtypes": "float16", "bytes_moved": 3 * 1024 * 1024 * 2})
    obs = Observations.merge(features=half, gpu=H100)
    assert obs.values["ridge_point"] == pytest.approx(989.4e12 / 3350e9)
    assert "tensor-core" in obs.derivations["ridge_point"]


def test_fp32_convolutions_get_the_tf32_roof_and_fp32_matmuls_do_not():
    """cuDNN runs fp32 convolutions in TF32 by default; cuBLAS runs fp32 matmuls on CUDA cores."""
    conv = Features({**GEMM.values, "has_convolution": True, "input_dtypes": "float32"})
    matmul = Features({**GEMM.values, "has_convolution": False, "input_dtypes": "float32"})
    conv_obs, matmul_obs = (Observations.merge(features=f, gpu=H100) for f in (conv, matmul))
    assert "tensor-core" in conv_obs.derivations["ridge_point"]
    assert "CUDA-core" in matmul_obs.derivations["ridge_point"]
    assert conv_obs.values["ridge_point"] > matmul_obs.values["ridge_point"]


def test_measured_values_win_over_derivations():
    obs = Observations.merge(profile={"memory_bound": False, "compute_bound": False, "roofline_fraction": 0.4,
                                      "sm_throughput_pct": 90.0, "memory_throughput_pct": 20.0},
                             features=POINTWISE, problem={"dtype": "float32"}, gpu=H100)
    assert obs.values["memory_bound"] is False and obs.derivations["memory_bound"] == "measured"
    assert obs.values["roofline_fraction"] == 0.4 and obs.values["headroom"] == pytest.approx(0.6)


def test_boundness_from_throughput_when_the_profile_does_not_derive_it():
    obs = Observations.merge(profile={"sm_throughput_pct": 20.0, "memory_throughput_pct": 85.0}, gpu=None)
    assert obs.values["memory_bound"] is True and obs.values["compute_bound"] is False
    obs = Observations.merge(profile={"sm_throughput_pct": 45.0, "memory_throughput_pct": 40.0}, gpu=None)
    assert obs.values["memory_bound"] is False and obs.values["compute_bound"] is False  # latency bound


def test_ratio_metrics():
    obs = Observations.merge(profile={"waves_per_sm": 1.25, "dram_bytes": 3 * 2**23,
                                      "warp_stall_long_scoreboard_pct": 40.0, "warp_stall_lg_throttle_pct": 10.0},
                             features=POINTWISE, gpu=None)
    assert obs.values["wave_efficiency"] == pytest.approx(1.25 / 2)
    assert obs.values["dram_traffic_excess"] == pytest.approx(2.0)
    assert obs.values["memory_stall_share"] == pytest.approx(0.5)


RAW_NCU = {
    "Kernel Name": "matmul_kernel",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "71.5",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "38.2",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "30.1",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "24.9",
    "sm__maximum_warps_per_active_cycle_pct": "25",
    "launch__registers_per_thread": "168",
    "launch__shared_mem_per_block_static": "0",
    "launch__shared_mem_per_block_dynamic": "49,152",
    "launch__occupancy_limit_registers": "1",
    "launch__occupancy_limit_shared_mem": "4",
    "launch__occupancy_limit_warps": "8",
    "launch__occupancy_limit_blocks": "32",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "1,200",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "300",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "0.5",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "62.0",
    "launch__waves_per_multiprocessor": "0.97",
    "launch__grid_size": "128",
    "launch__block_size": "256",
    "smsp__average_warps_active_per_issue_active.ratio": "10",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "4",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "1",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": "2",
    "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": "0.5",
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": "0.5",
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": "1",
    "lts__t_sector_hit_rate.pct": "n/a",
}


def test_from_raw_ncu_maps_names_through_metrics_yaml():
    obs = Observations.from_raw_ncu(RAW_NCU)
    v = obs.values
    assert v["sm_throughput_pct"] == 71.5 and v["memory_throughput_pct"] == 38.2
    assert v["registers_per_thread"] == 168 and isinstance(v["registers_per_thread"], int)
    assert v["shared_mem_per_block_bytes"] == 49152  # static + dynamic
    assert v["shared_bank_conflicts"] == 1500  # loads + stores
    assert v["tensor_pipe_utilization_pct"] == 62.0  # the Hopper GMMA pipe, not the idle HMMA one
    assert v["occupancy_limiter"] == "registers"
    assert v["warp_stall_long_scoreboard_pct"] == pytest.approx(40.0)  # 4 of 10 cycles between issues
    assert v["warp_stall_barrier_pct"] == pytest.approx(10.0)
    assert v["waves_per_sm"] == 0.97 and v["grid_size"] == 128
    assert "l2_hit_rate_pct" in obs.unavailable  # "n/a" is not a number
    merged = Observations.merge(profile=obs, features=GEMM, problem={"dtype": "float32"}, gpu=H100)
    assert merged.values["compute_bound"] is True  # from the measured throughput, not the static ridge
    assert merged.values["memory_stall_share"] == pytest.approx(0.45)  # (4 + 0.5) of 10 cycles between issues
    assert merged.values["wave_efficiency"] == pytest.approx(0.97)


def test_full_occupancy_has_no_limiter():
    raw = {k: v for k, v in RAW_NCU.items() if k.startswith("launch__occupancy_limit")}
    raw["sm__maximum_warps_per_active_cycle_pct"] = "100"
    assert Observations.from_raw_ncu(raw).values["occupancy_limiter"] == "none"


def test_every_shared_ncu_metric_has_a_raw_name():
    mapping = ncu_name_map()
    ncu_metrics = {m.id for m in vocabulary().values() if m.source == "ncu"}
    assert ncu_metrics == set(mapping.values())
    assert mapping["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == "dram_throughput_pct"


@pytest.mark.parametrize(("device_name", "key"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"), ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA H100 NVL", None), ("NVIDIA H200 NVL", None), ("Tesla T4", None), ("NVIDIA GeForce RTX 4090 D", None),
])
def test_gpu_lookup_by_device_name(device_name, key):
    spec = gpus.lookup(device_name)
    assert (spec.key if spec else None) == key


def test_gpu_table_is_consistent():
    for spec in gpus.GPUS:
        assert spec.fp16_tensor_flops >= spec.tf32_tensor_flops >= spec.fp32_flops * 0.99
        assert spec.dram_bandwidth > 5e11 and spec.l2_bytes >= 40 * 2**20 and spec.sm_count >= 100
        assert spec.peak_flops("float64", False) is None
    h200, h100 = gpus.BY_KEY["h200-sxm"], gpus.BY_KEY["h100-sxm"]
    assert h200.fp32_flops == h100.fp32_flops and h200.dram_bandwidth > h100.dram_bandwidth


def test_detect_never_guesses_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present; tests/gpu covers detection there")
    spec, reason = gpus.detect()
    assert spec is None and "no CUDA device" in reason
    obs = Observations.merge(features=POINTWISE)
    assert obs.unavailable["gpu_name"] == reason and not math.isnan(obs.values["arithmetic_intensity"])


# --- the skill base decides from these observations ------------------------------------------------

def _holds(params: dict, metric: str, op: str, value=None) -> bool:
    """A condition as the Planner reads it; a metric that was not observed makes it false."""
    if metric not in params:
        return False
    x = params[metric]
    return {"is_true": lambda: x is True, "in": lambda: x in value, "==": lambda: x == value,
            "!=": lambda: x != value, "<": lambda: x < value, "<=": lambda: x <= value,
            ">": lambda: x > value, ">=": lambda: x >= value}[op]()


def _plan(params: dict) -> tuple[set[str], set[str]]:
    """Matched bottlenecks and the techniques they offer whose preconditions hold."""
    import yaml
    from importlib import resources

    folder = resources.files("kskill.graph_schema") / "skills"
    bottlenecks = yaml.safe_load((folder / "bottlenecks.yaml").read_text())
    techniques = {t["id"]: t for t in yaml.safe_load((folder / "techniques.yaml").read_text())}
    matched = {b["id"] for b in bottlenecks if all(_holds(params, *c) for c in b["signature"])}
    offered = {e["technique"] for b in bottlenecks if b["id"] in matched for e in b["techniques"]}
    allowed = {t for t in offered if all(_holds(params, *c) for c in techniques[t]["requires"])
               and not any(_holds(params, *c) for c in techniques[t]["forbidden_when"])}
    return matched, allowed


def _cpu_observations(problem: str, atol: float = 1e-4, rtol: float = 1e-4, gpu=None) -> dict:
    from pathlib import Path

    from kskill.agents.candidate_features import candidate_features
    from kskill.agents.features import reference_features

    source = (Path(__file__).resolve().parents[1] / "fixtures" / "problems" / f"{problem}.py").read_text()
    seed = candidate_features(source.replace("class Model(", "class ModelNew("))  # the reference as the seed
    features = reference_features(source).merged(seed)
    return Observations.merge(features=features, problem={"atol": atol, "rtol": rtol}, gpu=gpu).to_params()


def test_pointwise_chain_on_cpu_selects_fusion():
    matched, allowed = _plan(_cpu_observations("pointwise_chain"))
    assert {"memory_bandwidth", "materialized_intermediates"} <= matched
    assert "kernel_fusion" in allowed and "tf32_tensor_cores" not in allowed
    assert "cuda_graph" not in allowed  # needs launches measured by torch.profiler on a GPU


def test_gemm_sum_on_cpu_selects_algebra_and_never_tf32_at_fp32_tolerance():
    matched, allowed = _plan(_cpu_observations("gemm_sum_scale"))
    assert {"redundant_work", "skinny_gemm", "unfused_epilogue"} <= matched
    assert {"algebraic_simplification", "split_k", "gemm_epilogue_fusion"} <= allowed
    assert "tf32_tensor_cores" not in allowed


def test_tf32_needs_a_loose_tolerance():
    # 36.6 FLOP/byte: compute bound on an H100 (ridge 20), undecided without a GPU
    undecided, _ = _plan(_cpu_observations("matmul_bias_relu", atol=1e-2, rtol=1e-2))
    assert "compute_limited" not in undecided
    matched, strict = _plan(_cpu_observations("matmul_bias_relu", gpu=H100))
    _, loose = _plan(_cpu_observations("matmul_bias_relu", atol=1e-2, rtol=1e-2, gpu=H100))
    assert "compute_limited" in matched
    assert "tf32_tensor_cores" not in strict and "tf32_tensor_cores" in loose


def test_softmax_and_conv_bn_select_their_recipes():
    _, softmax = _plan(_cpu_observations("softmax"))
    assert "online_softmax" in softmax
    matched, conv = _plan(_cpu_observations("conv_bn_relu"))
    assert "nchw_convolution_layout" in matched and "channels_last" in conv
    assert "fused_normalization" in conv and "batchnorm_folding" not in conv  # training-mode BatchNorm


def test_zero_branch_efficiency_without_branches_is_not_divergence():
    raw = {"smsp__sass_average_branch_targets_threads_uniform.pct": "0", "smsp__sass_branch_targets.sum": "0"}
    obs = Observations.from_raw_ncu(raw)
    assert "branch_efficiency_pct" not in obs.values
    assert obs.unavailable["branch_efficiency_pct"] == "the kernel executed no branch instructions"
    raw["smsp__sass_branch_targets.sum"] = "4096"
    assert Observations.from_raw_ncu(raw).values["branch_efficiency_pct"] == 0


def test_sampled_stall_counters_do_not_count_the_same_stalls_twice():
    # ncu's WarpStateStats and SourceCounters sections report the same stalls twice: as
    # per-issue averages and as PC samples. The memory stall share is a fraction of one of them.
    sampled = {"smsp__pcsamp_warps_issue_stalled_long_scoreboard": "700",
               "smsp__pcsamp_warps_issue_stalled_lg_throttle": "100",
               "smsp__pcsamp_warps_issue_stalled_barrier": "200"}
    obs = Observations.from_raw_ncu({**RAW_NCU, **sampled})
    assert obs.values["warp_stall_long_scoreboard_pct"] == pytest.approx(40.0)  # the per-issue family first
    merged = Observations.merge(profile=obs, features=GEMM, problem={"dtype": "float32"}, gpu=H100)
    assert merged.values["memory_stall_share"] == pytest.approx(0.45)
    only_sampled = Observations.from_raw_ncu(
        {k: v for k, v in {**RAW_NCU, **sampled}.items() if "average_warps" not in k})
    assert only_sampled.values["warp_stall_long_scoreboard_pct"] == pytest.approx(70.0)  # 700 of 1000 samples
