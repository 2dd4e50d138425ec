"""Output comparison and the in-process dynamic checks, on small tensors."""

import math
import time
from types import SimpleNamespace

import pytest
import torch

from kskill.agents.reviewer import dynamic_checks as dyn
from kskill.agents.reviewer.correctness import (
    apply_variant, changed_leaves, compare_outputs, compare_tensor, fingerprint, max_abs_difference, needed_atol,
    same_fingerprint, tolerance_for, weak_reference)
from kskill.agents.reviewer.reference import Reference


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
    before = fingerprint([x, y])
    y.add_(1)
    assert changed_leaves(before, fingerprint([x, y])) == [1]
    assert dyn.aliased_outputs((x[1:], torch.ones(2)), [x]) == [0]
    assert dyn.aliased_outputs(torch.ones(4), [x]) == []


def test_fingerprints_see_one_changed_element_and_ignore_nan_identity():
    x = torch.randn(1000)
    x[3] = float("nan")
    assert same_fingerprint(fingerprint(x)[0], fingerprint(x.clone())[0])
    y = x.clone()
    y[500] += 1.0
    assert not same_fingerprint(fingerprint(x)[0], fingerprint(y)[0])


def test_patched_runtime_is_detected(monkeypatch):
    integrity = dyn.Integrity(harness=[], watched=[])
    assert integrity.changed() == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, other: 0.0)
    assert set(integrity.changed()) == {"time.perf_counter", "torch.cuda.Event.elapsed_time"}


def test_harness_namespaces_and_code_are_watched(monkeypatch):
    from kskill.agents.reviewer import correctness, timing

    integrity = dyn.Integrity(harness=[timing, correctness], watched=[torch.nn.functional])
    monkeypatch.setattr(timing, "time_cpu", lambda fns, reps: {})
    monkeypatch.setattr(correctness, "shadowing_builtin", len, raising=False)  # a new global can shadow a builtin
    monkeypatch.setattr(correctness.compare_tensor, "__code__", (lambda *a: {}).__code__)
    monkeypatch.setattr(torch.nn.functional, "relu", lambda x, inplace=False: x)
    assert set(integrity.changed()) >= {"kskill.agents.reviewer.timing.time_cpu",
                                        "kskill.agents.reviewer.correctness.shadowing_builtin",
                                        "kskill.agents.reviewer.correctness.compare_tensor (code)",
                                        "torch.nn.functional.relu"}
    monkeypatch.undo()
    assert integrity.changed() == []


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


def test_weak_reference_outputs_are_judged_by_relative_error():
    """All zeros pass a 65536-column softmax at atol 1e-4 unless the check notices the outputs' scale."""
    ref = torch.softmax(torch.rand(4, 65536), dim=1)
    zeros = compare_tensor(torch.zeros_like(ref), ref, 0, None, None)
    assert not zeros["passed"] and zeros["mismatched"] == ref.numel()
    assert "judged by relative error" in zeros["note"] and zeros["reference_scale"] < 1e-4
    close = compare_tensor(ref * (1 + 1e-6), ref, 0, None, None)
    assert close["passed"]
    assert weak_reference(torch.full((3,), 2.0), 1e-4) == ("constant", 2.0)
    assert weak_reference(torch.zeros(3), 1e-4) == ("all zeros", 0.0)
    assert weak_reference(torch.randn(100), 1e-4) is None


def test_comparison_in_chunks_finds_the_worst_element(monkeypatch):
    from kskill.agents.reviewer import correctness

    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 7)
    ref = torch.randn(5, 11)
    out = ref.clone()
    out[4, 9] += 3.0
    result = compare_tensor(out, ref, 0, None, None)
    assert result["mismatched"] == 1 and result["max_abs_index"] == [4, 9]


def test_input_variants_touch_floating_inputs_only():
    x, idx = torch.rand(8), torch.arange(8)
    out = apply_variant([x.clone(), idx.clone()], "mixed_signs")
    assert torch.allclose(out[0], 2 * x - 1) and torch.equal(out[1], idx)
    assert torch.allclose(apply_variant([x.clone()], "scaled")[0], 100 * x)


def test_needed_atol_is_the_excess_over_rtol_and_zero_when_rtol_covers_it():
    exact = torch.tensor([0.0, 1000.0, -2.0], dtype=torch.float64)
    ref = torch.tensor([3e-4, 1000.05, -2.0])  # 1000.05: within rtol 1e-4 of 1000
    assert needed_atol(ref, exact, 1e-4) == pytest.approx(3e-4, rel=1e-3)
    assert needed_atol(ref[1:], exact[1:], 1e-4) == 0.0


def test_an_error_floor_widens_atol_by_twice_the_floor_and_says_so():
    ref, out = torch.zeros(4), torch.full((4,), 5e-4)
    assert not compare_tensor(out, ref, 0, 1e-4, 1e-4)["passed"]
    widened = compare_tensor(out, ref, 0, 1e-4, 1e-4, floor=2.5e-4)
    assert widened["passed"] and widened["atol"] == pytest.approx(6e-4)
    assert "float64" in widened["note"] and widened["reference_error_floor"] == 2.5e-4
    assert not compare_tensor(torch.full((4,), 7e-4), ref, 0, 1e-4, 1e-4, floor=2.5e-4)["passed"]


def test_a_float64_form_that_differs_beyond_rounding_gives_no_floor():
    judge = SimpleNamespace(atol=None, rtol=None)
    ref = torch.linspace(-1, 1, 100)
    close = ref.double() + 1e-4  # the float32 result off by a rounding-sized 1e-4 everywhere
    floors, why = Reference._floors_of(judge, (ref, ref), (close, close))
    assert floors == [pytest.approx(1e-4, rel=0.02)] * 2 and why == ""  # less rtol * |x| at the x nearest 0
    other = torch.rand(100, dtype=torch.float64)  # other random numbers: not the same computation
    floors, why = Reference._floors_of(judge, (ref, ref), (close, other))
    assert floors == [0.0, 0.0] and "output 1" in why


def test_buffers_made_during_the_ablation_probe_hold_nan_not_what_freed_memory_held():
    """The ablation probe skips every Triton launch. A buffer a skipped kernel should have filled must
    not hold the right answer by accident (CUDA's allocator reuses a block just freed, which can hold the
    same values), or an honest kernel reads as a decoy."""
    x, original = torch.randn(4, 6), torch.empty
    with dyn.empty_memory_poisoned():
        made = [torch.empty(4, 6), torch.empty_like(x), x.new_empty((2, 3)), torch.empty_strided((2, 2), (1, 2))]
        counts = torch.empty(3, dtype=torch.int64)
    assert all(torch.isnan(t).all() for t in made) and bool((counts == -12345).all())
    assert torch.empty is original  # put back
