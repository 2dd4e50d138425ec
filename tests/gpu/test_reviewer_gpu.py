"""The Reviewer on a real GPU: CUDA-event timing, ncu, CUDA C++ candidates, GPU failures, batches.

Run on a CUDA machine with `pytest -m gpu tests/gpu/test_reviewer_gpu.py`.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kskill.agents.reviewer import ReviewOptions, close_warm, review, review_batch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer"
GPU = FIXTURES / "gpu"
RELU = GPU / "relu_large.py"
TRITON_RELU = FIXTURES / "candidates" / "honest" / "relu_triton.py"
ADVERSARIAL = FIXTURES / "candidates" / "adversarial"


def options(**kw) -> ReviewOptions:
    return ReviewOptions(**{"device": "cuda", "timeout_s": 300, **kw})


def test_triton_candidate_is_timed_with_cuda_events_and_profiled():
    result = review(RELU, TRITON_RELU, options())
    assert result.passed, f"{result.failure_class}: {result.failure_message}\n{result.log[-3000:]}"
    timing = result.timing
    assert timing.method == "cuda_events" and timing.representative and timing.l2_flush_bytes > 0
    assert timing.candidate.n >= 20 and timing.reference.median_ms > 0
    assert result.observations["runtime_ms"] == timing.candidate.median_ms
    assert result.observations["kernel_launches_per_forward"] >= 1
    assert result.device == torch.cuda.get_device_name()
    # ncu either measured or said why not; never both, never silent.
    for name in ("sm_throughput_pct", "dram_throughput_pct", "registers_per_thread"):
        assert (name in result.observations) != (name in result.unavailable)


def test_cuda_cpp_candidate_builds_in_its_own_directory_and_passes():
    result = review(RELU, GPU / "relu_cuda.py", options(keep_workdir=True))
    assert result.passed, f"{result.failure_class}: {result.failure_message}\n{result.log[-3000:]}"
    build = Path(result.profile["workdir"]) / "build"
    assert any(build.rglob("*.so")), "load_inline did not build under the candidate's build directory"


def test_cuda_compile_error_is_a_compile_failure():
    result = review(RELU, GPU / "compile_error_cuda.py", options())
    assert result.failure_class == "compile" and "this_function_does_not_exist" in result.log


def test_illegal_address_is_a_runtime_failure():
    result = review(RELU, GPU / "illegal_address_cuda.py", options())
    assert result.failure_class == "runtime", result.failure_message
    assert "illegal" in (result.failure_message + result.log).lower()


def test_hanging_kernel_times_out_and_the_next_review_still_works():
    result = review(RELU, GPU / "hang_cuda.py", options(timeout_s=240))
    assert result.failure_class == "timeout", result.failure_message
    after = review(RELU, TRITON_RELU, options(ncu=False))
    assert after.passed


def test_stale_memory_is_rejected_on_the_caching_allocator():
    result = review(RELU, FIXTURES / "candidates" / "adversarial" / "stale_memory.py", options(ncu=False))
    assert not result.passed and result.failure_class in ("cheating", "numeric")


@pytest.mark.parametrize("name", ["zero_inputs", "cached_result", "call_counter", "hidden_patch", "alias_input"])
def test_dynamic_cheats_are_rejected_on_gpu(name):
    result = review(RELU, FIXTURES / "candidates" / "adversarial" / f"{name}.py", options(ncu=False))
    assert result.failure_class == "cheating", result.failure_message


def test_speedup_is_stable_across_repeats():
    speedups = [review(RELU, TRITON_RELU, options(ncu=False, profile=False)).timing.speedup for _ in range(3)]
    spread = (max(speedups) - min(speedups)) / (sum(speedups) / 3)
    assert spread <= 0.03, speedups


def test_compiled_reference_is_timed_when_asked():
    result = review(RELU, TRITON_RELU, options(ncu=False, compile_reference=True))
    assert result.passed and result.timing.compiled_reference is not None
    assert result.timing.speedup_vs_compiled > 0


def test_a_candidate_that_poisons_cuda_leaves_the_rest_of_its_batch_reviewed():
    poison, good = review_batch(RELU, [GPU / "illegal_address_cuda.py", TRITON_RELU], options(ncu=False))
    assert poison.failure_class == "runtime", poison.failure_message
    assert "illegal" in (poison.failure_message + poison.log).lower()
    assert good.passed and good.timing.representative, good.failure_message


def test_a_hanging_kernel_times_out_alone_in_its_batch():
    hang, good = review_batch(RELU, [GPU / "hang_cuda.py", TRITON_RELU], options(timeout_s=120, ncu=False))
    assert hang.failure_class == "timeout", hang.failure_message
    assert good.passed and good.timing is not None


def test_ncu_runs_once_on_the_fastest_and_the_reference_profile_is_cached(tmp_path):
    seed = RELU.read_text() + "\n\nclass ModelNew(Model):\n    pass\n"
    batch = [TRITON_RELU, GPU / "relu_cuda.py", seed]
    reviews = review_batch(RELU, batch, options(profile_cache_dir=str(tmp_path)))
    assert all(r.passed for r in reviews), [r.failure_message for r in reviews]
    assert all(r.timing.functions_timed == 4 for r in reviews)  # the reference and three candidates together
    profiled = [r for r in reviews if "ncu" in r.profile]
    assert len(profiled) == 1 and profiled[0].timing.speedup == max(r.timing.speedup for r in reviews)
    for r in reviews:
        if r is not profiled[0]:
            assert r.unavailable["sm_throughput_pct"].startswith("Nsight Compute ran once for this batch")
        assert r.reference_observations or r.reference_unavailable
    again = review_batch(RELU, [TRITON_RELU], options(profile_cache_dir=str(tmp_path)))[0]
    assert again.reference_observations == reviews[0].reference_observations
    assert list(tmp_path.glob("reference-*.json"))


def test_work_hidden_on_a_side_stream_is_not_a_speedup():
    result = review(RELU, ADVERSARIAL / "side_stream.py", options(static_checks=False, ncu=False))
    assert result.failure_class == "cheating", result.failure_message
    assert "timing_unconfirmed" in {f.code for f in result.rejecting_flags()}


def test_the_timing_is_cross_checked_by_the_profiler_and_the_judge():
    result = review(RELU, TRITON_RELU, options(ncu=False))
    t = result.timing
    assert t.candidate_device_ms > 0 and t.reference_device_ms > 0 and t.judge_reference_ms > 0
    assert abs(t.reference.median_ms - t.judge_reference_ms) / t.judge_reference_ms < 0.2


def test_outputs_reach_the_judge_through_shared_gpu_memory():
    result = review(RELU, TRITON_RELU, options(ncu=False, timing=False, profile=False))
    assert result.passed
    assert not any("outputs go through files" in note for note in result.profile["notes"])
    assert result.isolation.namespaces  # and this inside the sandbox, whose PID namespace breaks legacy CUDA IPC


def test_a_shared_block_maps_in_another_process_and_is_freed_with_its_last_view(tmp_path):
    from kskill.agents.reviewer import cuda_share
    block = cuda_share.allocate(3 * 2**20 + 5, torch.device("cuda"))
    assert block.size % (2 * 2**20) == 0 and block.size >= 3 * 2**20 + 5
    data = block.tensor(torch.float32, [1000, 7])
    data.copy_(torch.arange(7000.0, device="cuda").view(1000, 7))
    torch.cuda.synchronize()
    fd = block.export_fd()
    child = subprocess.run(
        [sys.executable, "-c", IMPORT_IN_CHILD], pass_fds=(fd,), env={**os.environ, "FD": str(fd)},
        capture_output=True, text=True, timeout=120, cwd=tmp_path)  # not a checkout's kskill/ folder
    os.close(fd)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.split() == ["24496500.0", "too-small-refused"]
    finalizer = block._finalizer
    del block
    assert finalizer.alive  # the view still holds it
    del data
    assert not finalizer.alive


IMPORT_IN_CHILD = """
import os, torch
from kskill.agents.reviewer import cuda_share
fd = int(os.environ["FD"])
got = cuda_share.import_fd(os.dup(fd), 3 * 2**20 + 5, torch.device("cuda")).tensor(torch.float32, [1000, 7])
print(float(got.sum()))
try:
    cuda_share.import_fd(fd, 64 * 2**20, torch.device("cuda"))  # more than the allocation holds
except cuda_share.CudaShareError:
    print("too-small-refused")
"""


def test_a_warm_judge_and_a_waiting_ncu_serve_the_next_batch(tmp_path):
    """keep_warm starts the next batch's judge beside this one; ncu's target waits for the fastest."""
    try:
        first = review_batch(RELU, [TRITON_RELU], options(), keep_warm=True)[0]
        second = review_batch(RELU, [TRITON_RELU], options())[0]
    finally:
        close_warm()
    assert first.passed and second.passed, (first.failure_message, second.failure_message)
    for r in (first, second):
        assert "ncu" in r.profile and (r.observations.get("sm_throughput_pct") is not None
                                       or "not on PATH" in r.unavailable.get("sm_throughput_pct", "")), r.unavailable
    cold, warm = first.profile["batch"]["phases"]["start"], second.profile["batch"]["phases"]["start"]
    assert warm < 0.5 * cold, (warm, cold)


def test_profiled_kernel_time_counts_kernels_side_by_side_once():
    """Two ~1 ms sleeps on two streams overlap: the Planner's gpu_kernel_time_ms is their union (about
    1 ms), as the timing cross-check counts it, not their sum (about 2 ms)."""
    from kskill.agents.reviewer.profiling import torch_profile

    streams = (torch.cuda.Stream(), torch.cuda.Stream())

    def forward():
        for stream in streams:
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                torch.cuda._sleep(2_000_000)
        for stream in streams:
            torch.cuda.current_stream().wait_stream(stream)

    obs, unavailable, detail = torch_profile(forward, cuda=True, calls=3)
    assert not unavailable
    summed = sum(k["ms_per_forward"] for k in detail["kernels"])
    assert obs["gpu_kernel_time_ms"] < 0.75 * summed, (obs, detail["kernels"])
    assert obs["gpu_kernel_time_ms"] <= detail["wall_ms_per_forward"] * 1.05
