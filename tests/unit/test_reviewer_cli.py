"""`kskill review` end to end through click."""

import json
from pathlib import Path

from click.testing import CliRunner

from kskill.cli import cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer"


def test_review_json_for_an_honest_candidate():
    result = CliRunner().invoke(cli, ["review", str(FIXTURES / "problems" / "add.py"),
                                      str(FIXTURES / "candidates" / "honest" / "add_triton.py"),
                                      "--trials", "2", "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["correct"] and data["failure_class"] is None
    assert [t["variant"] for t in data["correctness"]["trials"]] == [None, None, "mixed_signs", "scaled"]


def test_rejected_candidate_exits_1_with_a_readable_summary():
    result = CliRunner().invoke(cli, ["review", str(FIXTURES / "problems" / "relu.py"),
                                      str(FIXTURES / "candidates" / "adversarial" / "thread_offload.py")])
    assert result.exit_code == 1
    assert result.output.startswith("FAIL (cheating)") and "threads_or_processes (line 3)" in result.output


def test_tolerance_options_reach_the_comparison():
    args = ["review", str(FIXTURES / "problems" / "relu.py"),
            str(FIXTURES / "candidates" / "broken" / "wrong_values.py"), "--device", "cpu", "--no-timing",
            "--trials", "1", "--no-input-variants", "--json"]
    strict = CliRunner().invoke(cli, args)
    loose = CliRunner().invoke(cli, [*args, "--atol", "0.1", "--rtol", "0"])
    assert strict.exit_code == 1 and json.loads(strict.output)["failure_class"] == "numeric"
    assert loose.exit_code == 0, loose.output
    assert json.loads(loose.output)["correctness"]["trials"][0]["outputs"][0]["atol"] == 0.1
