"""Profiling outputs mapped to the Metric vocabulary; timing statistics."""

import time
from pathlib import Path

import pytest
import torch

from kskill.agents.reviewer import profiling
from kskill.agents.reviewer.timing import summarize, time_cpu

NCU_SAMPLE = Path(__file__).parents[1] / "fixtures" / "reviewer" / "ncu_raw_two_kernels.csv"


def test_vocabulary_comes_from_metrics_yaml():
    vocabulary = profiling.ncu_vocabulary()
    assert vocabulary["sm_throughput_pct"] == ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)
    assert "occupancy_limiter" in vocabulary and "kernel_launches_per_forward" not in vocabulary


def test_ncu_rows_are_parsed_past_log_lines_and_units():
    rows = profiling.parse_ncu_csv(NCU_SAMPLE.read_text())
    assert [r["Kernel Name"] for r in rows] == ["void at::native::elementwise_kernel<128, 2>(int, float)",
                                                "relu_kernel"]


def test_ncu_observations_describe_the_dominant_kernel():
    obs, unavailable, detail = profiling.ncu_observations(profiling.parse_ncu_csv(NCU_SAMPLE.read_text()))
    assert detail["profiled_kernel"] == "relu_kernel" and len(detail["kernels"]) == 2
    assert obs["sm_throughput_pct"] == 12.5 and obs["dram_throughput_pct"] == 71.2
    assert obs["registers_per_thread"] == 40 and obs["grid_size"] == 528
    assert obs["shared_mem_per_block_bytes"] == 3072          # static + dynamic
    assert obs["shared_bank_conflicts"] == 16                 # load + store when no total
    assert obs["occupancy_limiter"] == "shared_memory"        # fewest blocks per SM
    # shares of all stall reasons, "selected" (1 of the 20 warps per issue) not being a stall
    assert obs["warp_stall_long_scoreboard_pct"] == pytest.approx(100 * 12 / 19)
    assert obs["warp_stall_lg_throttle_pct"] == pytest.approx(100 * 1 / 19)
    assert obs["memory_stall_share"] == pytest.approx(13 / 19)
    assert obs["memory_bound"] is True and obs["compute_bound"] is False
    assert obs["wave_efficiency"] == pytest.approx(2.5 / 3)
    assert obs["dram_bytes"] == 1572864 and obs["l2_hit_rate_pct"] == 33.3
    assert "memory_bound" not in unavailable
    assert set(obs) | set(unavailable) == set(profiling.ncu_metric_names())


def test_full_occupancy_has_no_limiter():
    rows = profiling.parse_ncu_csv(NCU_SAMPLE.read_text())[:1]
    obs, _, _ = profiling.ncu_observations(rows)
    assert obs["occupancy_limiter"] == "none"


def test_no_rows_leaves_everything_unavailable_with_reason():
    obs, unavailable, _ = profiling.ncu_observations([])
    assert obs == {} and set(unavailable) == set(profiling.ncu_metric_names())


@pytest.mark.parametrize("log, words", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "not readable"),
    ("==WARNING== No kernels were profiled.", "no kernels"),
    ("==ERROR== Failed to connect", "ncu failed: ==ERROR== Failed to connect"),
])
def test_ncu_failures_are_explained(log, words):
    assert words in profiling.ncu_failure_reason(log)


def test_ncu_command_keeps_clocks_and_profiles_one_range():
    args = profiling.ncu_arguments("/tmp/r.csv")
    assert args[args.index("--clock-control") + 1] == "none"
    assert args[args.index("--profile-from-start") + 1] == "off"


def test_ncu_profiles_the_first_kernels_only_and_says_so_when_it_reaches_the_cap():
    args = profiling.ncu_arguments("/tmp/r.csv")
    assert args[args.index("--launch-count") + 1] == str(profiling.NCU_KERNEL_CAP)
    rows = profiling.parse_ncu_csv(NCU_SAMPLE.read_text())
    assert "note" not in profiling.ncu_observations(rows)[2]  # two kernels: the whole forward
    many = [dict(rows[i % 2], **{"gpu__time_duration.sum": str(1000 + i)}) for i in range(profiling.NCU_KERNEL_CAP)]
    _, _, detail = profiling.ncu_observations(many)
    assert f"first {profiling.NCU_KERNEL_CAP} kernels" in detail["note"]
    assert detail["profiled_kernel"] == many[-1]["Kernel Name"]  # the longest of them


def test_ncu_is_asked_for_every_counter_the_vocabulary_reads_and_no_section():
    asked = set(profiling.ncu_arguments("/tmp/r.csv")[-1].split(","))
    assert "--section" not in profiling.ncu_arguments("/tmp/r.csv")
    for metric, raw in profiling.ncu_vocabulary().items():
        counters = [n for n in raw if "__pcsamp_" not in n]
        assert counters and set(counters) <= asked, metric
    assert {"gpu__time_duration.sum", "smsp__sass_branch_targets.sum"} <= asked  # duration check, branch guard


def test_torch_profiler_on_cpu_reports_ops_and_marks_gpu_metrics_unavailable():
    x = torch.randn(32, 32)
    obs, unavailable, detail = profiling.torch_profile(lambda: torch.relu(x @ x), cuda=False, calls=2)
    assert obs == {} and set(unavailable) == set(profiling.TORCH_PROFILER_METRICS)
    assert any("mm" in op["name"] for op in detail["cpu_ops"])


def test_a_slow_forward_is_profiled_fewer_times_and_a_fast_one_as_often_as_asked():
    assert profiling.calls_within(0.5) == 5 and profiling.calls_within(0.5, calls=2) == 2
    assert profiling.calls_within(20.0) == 2  # two 20 ms forwards fit the 50 ms window
    assert profiling.calls_within(84.0) == 1  # a recurrent network's forward: once, never zero times
    assert profiling.calls_within(None) == 5 and profiling.calls_within(0.0) == 5  # no estimate: as asked
    slow = {"calls": 0}

    def forward():
        slow["calls"] += 1
        time.sleep(0.06)

    detail = profiling.torch_profile(forward, cuda=False)[2]
    assert detail["calls"] == 1 and slow["calls"] == 4  # warm-up, estimate, wall time, profiled


def test_timing_observations_only_when_representative():
    timing = {"candidate": {"median_ms": 1.0}, "reference": {"median_ms": 2.0}, "speedup": 2.0}
    assert profiling.timing_observations(timing, True)[0] == {"runtime_ms": 1.0, "reference_runtime_ms": 2.0,
                                                               "speedup": 2.0}
    obs, missing = profiling.timing_observations(timing, False)
    assert obs == {} and "not representative" in missing["speedup"]


def test_summary_statistics():
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats["median_ms"] == 3.0 and stats["min_ms"] == 1.0 and stats["max_ms"] == 100.0 and stats["n"] == 5
    assert stats["p20_ms"] <= stats["median_ms"] <= stats["p80_ms"]


def test_cpu_timing_interleaves_and_drops_the_first_round():
    calls = []
    result = time_cpu({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, reps=3)
    assert calls[:2] == ["a", "b"]            # warm-up
    assert calls[2:] == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert result["stats"]["a"]["n"] == 3


def test_ncu_is_skipped_on_a_forward_of_many_more_kernels_than_it_profiles():
    from kskill.agents.reviewer import nsight

    cap = profiling.NCU_KERNEL_CAP
    assert nsight.skip_reason({"kernel_launches_per_forward": 4 * cap}) is None
    assert nsight.skip_reason({}) is None and nsight.skip_reason(None) is None  # no profile: ncu decides
    reason = nsight.skip_reason({"kernel_launches_per_forward": 156.0})
    assert reason is not None and "156 kernels" in reason and f"first {cap}" in reason


def test_busy_time_counts_overlapping_kernels_once():
    # two streams side by side (0-10 and 2-8 and 5-12), a gap, then one kernel (20-21): busy 12 + 1
    assert profiling.busy_ms([(5.0, 12.0), (0.0, 10.0), (2.0, 8.0), (20.0, 21.0)]) == pytest.approx(13.0)
    assert profiling.busy_ms([(0.0, 1.0), (1.0, 2.0)]) == pytest.approx(2.0), "back to back: summed"
    assert profiling.busy_ms([]) == 0.0
