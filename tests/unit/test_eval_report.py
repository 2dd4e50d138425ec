"""Rows composed from worker results as a GPU run leaves them, the report written from them, and
`kskill eval compare` (no problem is run here: the worker and optimize answers are given)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from kskill.cli import cli
from kskill.eval.baselines import BaselineSettings
from kskill.eval.problem_run import EvalSettings, compose_row
from kskill.eval.results import ResultsDir
from kskill.eval.runner import finalize
from kskill.eval.suite import SuiteProblem

MODES = ("default",)
SETTINGS = EvalSettings(device="cuda", iterations=3, compile_modes=MODES,
                        baselines=BaselineSettings(device="cuda", compile_modes=MODES))
TRITON_MODULE = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X):\n    tl.store(X, 1)\n"


def stats(ms: float) -> dict:
    return {"median_ms": ms, "p20_ms": ms, "p80_ms": ms, "mean_ms": ms, "std_ms": 0.0, "min_ms": ms, "max_ms": ms, "n": 30}


def worker_result(eager: float, kskill: float | None, compiled: float, compile_strict: bool = True,
                  kskill_strict: bool = True) -> dict:
    contenders = {"eager": {"built": True},
                  "compile_default": {"built": True, "correct": {"strict": compile_strict, "compatible": True}}}
    timing = {"eager": stats(eager), "compile_default": stats(compiled)}
    if kskill is not None:
        contenders["kskill"] = {"built": True, "correct": {"strict": kskill_strict, "compatible": True}}
        timing["kskill"] = stats(kskill)
    return {"finished": True, "contenders": contenders, "versions": {"device_name": "NVIDIA H200", "torch": "2.11.0",
            "triton": "3.6.0"}, "timing": {"stats": timing, "representative": True, "l2_flush_bytes": 256_000_000}}


def optimize_summary(beats: bool, speedup: float) -> dict:
    return {"beats_reference": beats, "best_speedup": speedup, "best_attempt": 2 if beats else 0, "reviewed": 3,
            "best_techniques": ["kernel_fusion"] if beats else [], "stop_reason": "iteration budget spent",
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}, "run": "run-x",
            "trajectory": [{"n": 0, "speedup": 1.0, "status": "verified"},
                           {"n": 1, "speedup": speedup / 2, "status": "verified"},
                           {"n": 2, "speedup": speedup, "status": "verified"},
                           {"n": 3, "speedup": None, "status": "numeric", "parent": 2, "technique": "kernel_fusion",
                            "variant": "kernel_fusion.wide", "failure": "output 0: 4 of 64 elements outside",
                            "code_hash": "not kept"}]}


def rows(scale: float = 1.0) -> list[dict]:
    a = SuiteProblem("level1/1_a", 1, Path("/x/level1/1_a.py"))
    b = SuiteProblem("level1/2_b", 1, Path("/x/level1/2_b.py"))
    c = SuiteProblem("level2/1_c", 2, Path("/x/level2/1_c.py"))
    return [
        compose_row(a, SETTINGS, optimize_summary(True, 4.0), "", worker_result(1.0, 0.25 / scale, 0.5), TRITON_MODULE,
                    0.1, {"flops": 10, "bytes_moved": 20, "dtype": "float32"}),
        compose_row(b, SETTINGS, optimize_summary(False, 1.0), "", worker_result(2.0, None, 4.0, compile_strict=False),
                    "class ModelNew: ...\n", None, {}),
        compose_row(c, SETTINGS, optimize_summary(True, 3.0), "", worker_result(3.0, 1.0 / scale, 1.5,
                    kskill_strict=False), TRITON_MODULE, None, {}),
    ]


def test_rows_compose_speedups_correctness_and_the_backend_verdict():
    a, b, c = rows()
    assert a["speedup_eager"] == 4.0 and a["speedup_compile_default"] == 2.0 and a["compile_default_vs_eager"] == 2.0
    assert a["correct_strict"] and a["kb_triton_rules"] and a["roofline_fraction"] == pytest.approx(0.4)
    assert b["returned_reference"] and b["kskill_ms"] == 2.0 and b["speedup_eager"] == 1.0
    assert not b["compile_default_correct_strict"] and b["kb_triton_rules"] is False
    assert not c["correct_strict"] and c["correct_compatible"] and c["status"] == "done"
    assert a["iterations_to_best"] == 2 and a["tokens"] == 0 and a["l2_flush_bytes"] == 256_000_000
    assert a["trajectory"][3] == {"n": 3, "speedup": None, "status": "numeric", "parent": 2,
                                  "technique": "kernel_fusion", "variant": "kernel_fusion.wide",
                                  "failure": "output 0: 4 of 64 elements outside"}
    assert a["trajectory"][0]["technique"] is None  # a key optimize did not write stays None


def results_folder(root: Path, scale: float, composed: list[dict] | None = None) -> Path:
    """An evaluation folder holding `composed` (by default rows(scale)), finalized: its report written."""
    folder = ResultsDir(root)
    composed = rows(scale) if composed is None else composed
    folder.begin({"suite": "/x", "selection": [r["problem"] for r in composed], "settings": asdict(SETTINGS),
                  "sample": {}}, resume=False)
    for r in composed:
        folder.write_row(r["problem"].replace("/", "__"), r)
    finalize(root)
    return root


def test_the_report_of_a_gpu_run_has_all_four_figures_and_both_scores(tmp_path):
    out = results_folder(tmp_path / "a", 1.0)
    markdown = (out / "report.md").read_text()
    assert sorted(p.name for p in (out / "plots").glob("*.png")) == ["iterations.png", "levels.png", "scatter.png",
                                                                    "speedups.png"]
    assert "No GPU" not in markdown and "a 256 MB buffer zeroed before every timed call" in markdown
    assert "| all | 3 | 2 | 2.00x | 2.50x | 33% | 50% | 1 | 3 | 2.67x | - |" in markdown
    assert "| level 1 | 2 | 2 | 2.00x | 2.50x | 50% | 100% | 1 | 2 | 2.50x | 5.44x |" in markdown
    assert "2.00x (fails 1e-4)" in markdown  # b's compile failed the strict tolerance: shown, not counted
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<h2>Scores</h2>" in html


def test_compare_sets_two_evaluations_side_by_side(tmp_path):
    first, second = results_folder(tmp_path / "a", 1.0), results_folder(tmp_path / "b", 2.0)
    result = CliRunner().invoke(cli, ["eval", "compare", str(first), str(second)])
    assert result.exit_code == 0, result.output
    assert "| level1/1_a | yes | yes | 4.00x | 8.00x | 2.00x |" in result.output
    assert "| all | strict: geomean vs eager | 2.00x | 2.83x | 1.41x |" in result.output
    # level1/1_a: 4x against 8x is not within 3 %; level1/2_b is; level2/1_c is wrong at 1e-4 and not counted
    assert "within 3% of B's speedup over eager, or faster, on 1 of the 2 problems" in result.output
    reverse = CliRunner().invoke(cli, ["eval", "compare", str(second), str(first)]).output
    assert "on 2 of the 2 problems" in reverse
    data = json.loads(CliRunner().invoke(cli, ["eval", "compare", str(first), str(second), "--json"]).output)
    assert [s["title"] for s in data["sections"]] == ["Protocols", "Scores", "Problems in both"]
    (tmp_path / "empty").mkdir()
    missing = CliRunner().invoke(cli, ["eval", "compare", str(first), str(tmp_path / "empty")])
    assert missing.exit_code != 0 and "no readable results.json" in str(missing.exception or missing.output)


def test_the_summary_says_no_run_overran_instead_of_a_negative_overrun():
    from kskill.eval.suite_report import _overrun

    assert _overrun(-17.1) == "no run went past its time limit (the longest ended 17.1 s before it)"
    assert _overrun(13.2) == "largest overrun of the time limit 13.2 s"
    assert _overrun(None) == "no time limit"


def test_the_report_names_a_reason_for_each_problem_below_torch_compile(tmp_path):
    slow = SuiteProblem("level3/9_slow", 3, Path("/x/level3/9_slow.py"))
    summary = {**optimize_summary(False, 1.0), "not_written": {"flash_attention": "no attention layer it can read"}}
    kernels = {"kskill": {"launches": 5, "gpu_ms": 2.3, "top": [
                   {"name": "relu_kernel", "calls": 4, "ms": 2.0},
                   {"name": "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float>", "calls": 2, "ms": 0.3}]},
               "compile_default": {"launches": 1, "gpu_ms": 0.5, "top": [{"name": "triton_poi_fused_relu_0",
                                                                          "calls": 1, "ms": 0.5}]}}
    row = compose_row(slow, SETTINGS, summary, "", {**worker_result(2.0, None, 1.0), "kernels": kernels},
                      "class ModelNew: ...\n", None, {})
    results_folder(tmp_path, 1.0, [*rows(), row])
    report = (tmp_path / "report.md").read_text().split("## Below 0.9x of torch.compile, and why")
    assert len(report) == 2  # level1/1_a is 2x torch.compile; b's and c's results are not both correct
    assert report[1].split("\n## ")[0].strip().splitlines() == [
        "- `level3/9_slow`: 0.50x of torch.compile (default); returned the reference (stopped: iteration budget "
        "spent); attempts failed: 1 numeric (kernel_fusion); planned, no code written: flash_attention (no "
        "attention layer it can read); kskill's call: 5 kernels, 2.300 ms on the GPU (relu_kernel 2.000 ms x4, "
        "void cudnn::engines_precompiled::nchwToNhwcKernel<float, flo 0.300 ms x2); compile default's "
        "call: 1 kernel, 0.500 ms on the GPU (triton_poi_fused_relu_0 0.500 ms); layout conversions take 0.300 ms "
        "of kskill's call and none of torch.compile's slowest kernels"]


def test_a_folder_of_evaluation_folders_compares_as_one_evaluation(tmp_path):
    """Runs split across sessions leave one folder per problem (eval/runs/kb20-h200-s29/def/...):
    compare reads a folder of them as one evaluation, scored again from their rows."""
    composed = rows()
    for i, r in enumerate(composed):
        part = ResultsDir(tmp_path / "split" / f"part-{i}")
        part.begin({"suite": "/x", "selection": [r["problem"]], "settings": asdict(SETTINGS), "sample": {}},
                   resume=False)
        part.write_row(r["problem"].replace("/", "__"), r)
        finalize(part.root)
    whole = results_folder(tmp_path / "whole", 1.0)
    result = CliRunner().invoke(cli, ["eval", "compare", str(tmp_path / "split"), str(whole)])
    assert result.exit_code == 0, result.output
    assert "| all | strict: geomean vs eager | 2.00x | 2.00x | 1.00x |" in result.output
    assert "on 2 of the 2 problems both got correct" in result.output
    # a: 2x torch.compile on both sides; b's torch.compile failed 1e-4, so only a counts
    assert "On the 1 of them where torch.compile (default) is correct too, the geometric mean against it is " \
           "2.000x for A and 2.000x for B." in result.output
    other = ResultsDir(tmp_path / "split" / "part-9")  # made with other settings: not one evaluation
    other.begin({"suite": "/x", "selection": [composed[0]["problem"]],
                 "settings": {**asdict(SETTINGS), "iterations": 9}, "sample": {}}, resume=False)
    other.write_row(composed[0]["problem"].replace("/", "__"), composed[0])
    finalize(other.root)
    mixed = CliRunner().invoke(cli, ["eval", "compare", str(tmp_path / "split"), str(whole)])
    assert mixed.exit_code != 0 and "different settings" in str(mixed.exception or mixed.output)


def test_the_report_counts_memory_bound_problems_within_reach_of_their_roofline(tmp_path):
    """On an H200 (fp32 ridge 67 TFLOP/s over 4.8 TB/s, about 14 FLOP/byte): a problem of 0.5 FLOP/byte is
    memory-bound, one of 100 is not; of the two memory-bound ones, the one at 90 % of its roofline is within 1.25x,
    the one at 40 % is listed with its fraction. A network of ten kernels whose work at the roofline is 0.02 us each
    is launch-bound by the skill base's static signature: named apart, not counted against its bytes' roofline."""
    def problem(name: str, kskill_ms: float, roof_ms: float, flops: int, moved: int, launches: int = 1) -> dict:
        p = SuiteProblem(f"level1/{name}", 1, Path(f"/x/level1/{name}.py"))
        facts = {"flops": flops, "bytes_moved": moved, "dtype": "float32", "est_kernel_launches": launches,
                 "est_launch_work_us": roof_ms * 1e3 / launches}
        return compose_row(p, SETTINGS, optimize_summary(True, 2.0), "", worker_result(2.0, kskill_ms, 1.5),
                           TRITON_MODULE, roof_ms, facts)

    results_folder(tmp_path, 1.0, [problem("1_near", 1.0, 0.9, 10, 20), problem("2_far", 1.0, 0.4, 10, 20),
                                   problem("3_compute", 1.0, 0.4, 2000, 20),
                                   problem("4_launches", 1.0, 0.0002, 10, 20, launches=10)])
    section = (tmp_path / "report.md").read_text().split("## Memory-bound problems against their roofline")[1]
    assert section.strip().splitlines()[0].startswith("2 problems solved correctly are memory-bound")
    assert "1 of them run within 1.25x of their roofline (at least 80% of it)" in section
    assert "| `level1/2_far` | 0.50 | 0.400 | 1.000 | 40% | kernel_fusion |" in section
    assert "1_near" not in section and "3_compute" not in section
    assert section.count("4_launches") == 1
    assert ("1 more is launch-bound by the static estimate (launch_bound_estimate: `level1/4_launches` 10 kernels of "
            "0.02 us each, 0% of its roofline)") in section
