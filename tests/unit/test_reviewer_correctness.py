"""Output comparison and the in-process dynamic checks, on small tensors."""

import math
import time

import pytest
import torch

from kskill.agents.reviewer import dynamic_checks as dyn
from kskill.agents.reviewer.correctness import compare_outputs, compare_tensor, max_abs_difference, tolerance_for


def test_default_tolerances_follow_the_dtype():
    assert tolerance_for(torch.float32, None, None) == (1e-4, 1e-4)
    assert tolerance_for(torch.float16, None, None) == (1e-2, 1e-2)
    assert tolerance_for(torch.bfloat16, None, None) == (1e-2, 1e-2)
    assert tolerance_for(torch.int64, 1.0, 1.0) == (0.0, 0.0)
    assert tolerance_for(torch.float32, 1e-3, None) == (1e-3, 1e-4)


def test_largest_errors_are_located():
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[2, 1] = 0.5
    out[0, 3] = 1e-3
    result = compare_tensor(out, ref, 0, None, None)
    assert not result["passed"] and result["mismatched"] == 2
    assert result["max_abs_error"] == pytest.approx(0.5) and result["max_abs_index"] == [2, 1]
    assert result["max_rel_error"] == pytest.approx(0.5 / 1e-4)


def test_within_tolerance_passes_and_reports_the_error():
    ref = torch.linspace(1, 2, 10)
    result = compare_tensor(ref * (1 + 5e-5), ref, 0, None, None)
    assert result["passed"] and 0 < result["max_rel_error"] <= 1e-4


def test_nan_must_match_nan():
    ref = torch.tensor([1.0, float("nan")])
    assert compare_tensor(ref.clone(), ref, 0, None, None)["passed"]
    assert not compare_tensor(torch.tensor([float("nan"), 1.0]), ref, 0, None, None)["passed"]


def test_integer_outputs_compare_exactly():
    ref = torch.tensor([1, 2, 3])
    assert not compare_tensor(torch.tensor([1, 2, 4]), ref, 0, 10.0, 10.0)["passed"]


def test_shape_and_count_mismatches_fail_with_a_message():
    ok, _, message = compare_outputs((torch.ones(2),), (torch.ones(2), torch.ones(2)), None, None)
    assert not ok and "1 outputs" in message
    ok, comps, message = compare_outputs(torch.ones(2, 3), torch.ones(3, 2), None, None)
    assert not ok and "shape mismatch" in message and comps[0]["reference_shape"] == [3, 2]


def test_tuple_outputs_are_all_compared():
    ok, comps, message = compare_outputs((torch.ones(2), torch.zeros(2)), (torch.ones(2), torch.ones(2)), None, None)
    assert not ok and [c["passed"] for c in comps] == [True, False] and message.startswith("output 1")


def test_self_difference_of_a_function():
    assert max_abs_difference(torch.ones(3), torch.ones(3)) == 0.0
    assert max_abs_difference((torch.ones(3),), (torch.ones(3) * 2,)) == 1.0
    assert math.isinf(max_abs_difference(torch.ones(3), torch.ones(4)))


def test_mutated_inputs_and_aliases_are_found():
    x, y = torch.ones(4), torch.ones(4)
    before = [x.clone(), y.clone()]
    y.add_(1)
    assert dyn.mutated_inputs(before, [x, y]) == [1]
    assert dyn.aliased_outputs((x[1:], torch.ones(2)), [x]) == [0]
    assert dyn.aliased_outputs(torch.ones(4), [x]) == []


def test_patched_runtime_is_detected_and_restored(monkeypatch):
    snapshot = dyn.runtime_snapshot()
    assert dyn.patched_runtime(snapshot) == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, other: 0.0)
    assert set(dyn.patched_runtime(snapshot)) == {"time.perf_counter", "torch.cuda.Event.elapsed_time"}


def test_backend_settings_restore_the_problems_own():
    settings = dyn.BackendSettings()
    original = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = not original
        assert settings.changed_by_candidate() == {"cudnn_benchmark": not original}
        with settings:
            assert torch.backends.cudnn.benchmark == original
        assert torch.backends.cudnn.benchmark == (not original)
    finally:
        torch.backends.cudnn.benchmark = original


def test_outputs_equal_is_bitwise():
    a = torch.randn(5)
    assert dyn.outputs_equal((a, 1), (a.clone(), 1))
    assert not dyn.outputs_equal(a, a + 1e-7)
