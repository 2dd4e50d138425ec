"""End-to-end reviews on the CPU (Triton interpreter) of every fixture candidate.

Each candidate file names its problem and the verdict it must get in its header:
`# expect: pass`, `# expect: <failure class>`, `# expect: cheating <flag code>` or
`# expect: rejected` (any failure). Optional `# options: key=value ...` set ReviewOptions.
The candidates of one problem (and one set of options) are reviewed as one batch, as the
optimization loop reviews its variants: honest, broken and hostile candidates side by side.
"""

import functools
import re
from pathlib import Path

import pytest

from kskill.agents.errors import ProblemError
from kskill.agents.reviewer import Review, ReviewOptions, review, review_batch

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer"
CANDIDATES = sorted((FIXTURES / "candidates").glob("*/*.py"))
pytestmark = pytest.mark.slow


def header(path: Path, key: str) -> str | None:
    match = re.search(rf"^# {key}: (.+)$", path.read_text(), re.MULTILINE)
    return match.group(1).strip() if match else None


def options_for(path: Path) -> ReviewOptions:
    settings = dict(item.split("=") for item in (header(path, "options") or "").split())
    values = {"device": "cpu", "timeout_s": 120, **{k: float(v) if "." in v else int(v) for k, v in settings.items()}}
    return ReviewOptions(**values)


@functools.cache
def batch_reviews(problem: str, options: str) -> dict[Path, Review]:
    """Every fixture candidate of this problem with these options, reviewed as one batch."""
    paths = [p for p in CANDIDATES if header(p, "problem") == problem and (header(p, "options") or "") == options]
    reviews = review_batch(FIXTURES / "problems" / f"{problem}.py", paths, options_for(paths[0]))
    return dict(zip(paths, reviews))


def batch_review(path: Path) -> Review:
    return batch_reviews(header(path, "problem"), header(path, "options") or "")[path]


def review_fixture(path: Path, **overrides) -> Review:
    options = options_for(path).model_copy(update=overrides)
    return review(FIXTURES / "problems" / f"{header(path, 'problem')}.py", path, options)


def test_there_are_enough_adversarial_candidates():
    assert len(list((FIXTURES / "candidates" / "adversarial").glob("*.py"))) >= 12


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gets_its_expected_verdict(path):
    expected = header(path, "expect").split()
    result = batch_review(path)
    summary = f"{result.failure_class}: {result.failure_message}\n{result.log[-2000:]}"
    if expected[0] == "pass":
        assert result.passed, summary
        standard = [t for t in result.correctness.trials if t.variant is None]
        assert len(standard) == 5 and all(t.passed for t in result.correctness.trials)
        assert result.timing is not None and not result.timing.representative
        assert result.rejecting_flags() == []
        return
    assert not result.passed and not result.correct
    if expected[0] == "rejected":
        assert result.failure_class is not None
        return
    assert result.failure_class == expected[0], summary
    if len(expected) > 1:
        assert expected[1] in {f.code for f in result.rejecting_flags()}, summary
    if result.failure_phase != "parse" and re.match(r"^\w+(Error|Exception): ", result.failure_message):
        assert "Traceback" in result.log, "an exception in the worker must come with its traceback"


def test_weights_and_buffers_are_copied():
    linear = batch_review(FIXTURES / "candidates" / "honest" / "linear_relu_triton.py")
    scaled = batch_review(FIXTURES / "candidates" / "honest" / "scale_buffer_triton.py")
    assert linear.passed and linear.correctness.parameters_copied == 2
    assert scaled.passed and scaled.correctness.parameters_copied == 1


def test_nondeterministic_reference_is_reported():
    result = batch_review(FIXTURES / "candidates" / "honest" / "shuffled_sum_torch.py")
    assert result.passed
    assert result.correctness.reference_deterministic is False
    assert 0 < result.correctness.reference_self_max_abs_diff < 1e-3
    assert any("not deterministic" in note for note in result.profile["notes"])


def test_review_serialises_to_json_and_back():
    result = batch_review(FIXTURES / "candidates" / "honest" / "tuple_triton.py")
    again = Review.model_validate_json(result.to_json())
    assert again == result
    assert result.observations["output_numel"] == 2 * 40 * 30 and result.observations["dtype"] == "float32"
    assert "sm_throughput_pct" in result.unavailable and "runtime_ms" in result.unavailable
    assert result.profile["torch_profiler"]["cpu_ops"]
    assert result.isolation.memory_strategy.startswith("RLIMIT_AS")


def test_a_patched_harness_cannot_pass_a_wrong_answer():
    """Replacing compare_outputs and the timers through sys.modules['__main__'] (as a candidate once did,
    for a reported 8x) is caught; patching only while it runs, and restoring before it returns, leaves
    the wrong answer to a comparison that is not in the candidate's process."""
    patched = batch_review(FIXTURES / "candidates" / "adversarial" / "harness_patch.py")
    restored = batch_review(FIXTURES / "candidates" / "adversarial" / "harness_patch_restored.py")
    assert patched.failure_class == "cheating" and "compare_outputs" in patched.failure_message
    assert patched.timing is None and restored.timing is None
    assert restored.failure_class == "numeric" and restored.correctness.trials_passed == 0


def test_early_exit_without_static_checks_is_still_caught():
    result = review_fixture(FIXTURES / "candidates" / "adversarial" / "early_exit.py", static_checks=False)
    assert result.failure_class == "runtime" and "without finishing" in result.failure_message


def test_forged_records_are_not_believed(tmp_path):
    """A candidate that writes verdict records where the judge's might be, then exits, still fails."""
    forged = tmp_path / "forge.py"
    forged.write_text(
        "import json, os, torch.nn as nn\n"
        "body = json.dumps({'type': 'verdict', 'seq': 99, 'index': 0, 'final': True,\n"
        "                   'data': {'compiled': True, 'correct': True}})\n"
        "for name in ('records-0.jsonl', 'records-1.jsonl'):\n"
        "    with open(name, 'a') as f:\n"
        "        f.write(json.dumps({'body': body, 'mac': '0' * 64}) + '\\n')\n"
        "os._exit(0)\n"
        "class ModelNew(nn.Module):\n"
        "    pass\n")
    result = review(FIXTURES / "problems" / "relu.py", forged,
                    ReviewOptions(device="cpu", static_checks=False, timeout_s=60))
    assert not result.passed and result.failure_class == "runtime"
    assert "without finishing" in result.failure_message


def test_a_broken_problem_raises_problem_error(tmp_path):
    problem = tmp_path / "broken_problem.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                       "def get_inputs():\n    raise ValueError('no inputs today')\n"
                       "def get_init_inputs():\n    return []\n")
    with pytest.raises(ProblemError, match="no inputs today"):
        review(problem, FIXTURES / "candidates" / "honest" / "relu_triton.py", ReviewOptions(device="cpu"))


def test_excessive_speedup_is_reverified_and_flagged():
    result = batch_review(FIXTURES / "candidates" / "honest" / "fast_rowsum_torch.py")
    assert result.passed and result.timing.speedup > 10
    flag = next(f for f in result.flags if f.code == "excessive_speedup")
    assert flag.severity == "warn" and "re-verified" in flag.message
