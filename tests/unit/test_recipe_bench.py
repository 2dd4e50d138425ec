"""The recipe benchmark's run control: a crashing or hanging problem costs that problem only.

Workers are stand-in scripts here (the real worker needs a GPU); they follow the worker's
protocol: `current.txt` names the problem in progress, one JSON row per finished problem.
"""

import argparse
import json
import sys

from kskill.eval import recipes_bench

SCRIPT = '''
import json, sys, time
from pathlib import Path
out, names = Path(sys.argv[1]), sys.argv[2].split(",")
for name in names:
    (out / "current.txt").write_text(f"{name} {time.time()}")
    if name == "crash":
        sys.exit(3)
    if name == "hang":
        time.sleep(60)
    with open(out / "rows.jsonl", "a") as f:
        f.write(json.dumps({"problem": name, "correct": True, "speedup": 1.5, "techniques": ["x"]}) + "\\n")
'''


def run(tmp_path, monkeypatch, names, timeout=3.0, budget=60.0):
    args = argparse.Namespace(out=str(tmp_path), budget_s=budget, problem_timeout_s=timeout)
    monkeypatch.setattr(recipes_bench, "worker_command",
                        lambda a, remaining, deadline: [sys.executable, "-c", SCRIPT, str(tmp_path), ",".join(remaining)])
    rows, _ = recipes_bench.run_all(args, names)
    return {r["problem"]: r for r in rows}


def test_a_crashing_problem_is_recorded_and_the_rest_still_run(tmp_path, monkeypatch):
    rows = run(tmp_path, monkeypatch, ["a", "crash", "b"])
    assert rows["a"]["correct"] and rows["b"]["correct"]
    assert not rows["crash"]["correct"] and "code 3" in rows["crash"]["error"]


def test_a_hanging_problem_times_out(tmp_path, monkeypatch):
    rows = run(tmp_path, monkeypatch, ["hang", "a"], timeout=1.0)
    assert rows["hang"]["error"].startswith("timeout") and rows["a"]["correct"]


def test_problems_after_the_budget_are_skipped(tmp_path, monkeypatch):
    rows = run(tmp_path, monkeypatch, ["a", "b"], budget=0.0)
    assert all(r["error"].startswith("skipped") for r in rows.values())


def test_summary_counts_reference_results_and_failures():
    rows = [{"problem": "p", "correct": True, "speedup": 2.0, "techniques": ["fused_loss"], "compile_default_speedup": 1.0},
            {"problem": "q", "correct": True, "speedup": 1.0, "techniques": ["reference"]},
            {"problem": "r", "correct": False, "error": "x"}]
    s = recipes_bench.summarize_rows(rows)
    assert s["wins"] == 1 and s["returned_reference"] == ["q"] and s["failed"] == ["r"]
    assert abs(s["geomean_speedup_kskill"] - 2 ** 0.5) < 1e-9 and s["slower_than_eager"] == []
    json.dumps(s)


def test_variants_cover_graph_and_precision_forms():
    source = (recipes_bench.PROBLEMS / "32_attention.py").read_text()
    built = recipes_bench.variants(source, sweep=False)
    assert (["cuda_graph"], {}) in built
    assert any(p == {"dot_precision": "tf32x3"} and "flash_attention" in t for t, p in built)


def test_a_worker_that_cannot_start_fails_the_problems_once(tmp_path, monkeypatch):
    args = argparse.Namespace(out=str(tmp_path), budget_s=60.0, problem_timeout_s=5.0)
    monkeypatch.setattr(recipes_bench, "worker_command", lambda a, r, d: [sys.executable, "-c", "raise SystemExit(1)"])
    rows, _ = recipes_bench.run_all(args, ["a", "b"])
    assert [r["error"] for r in rows] == ["worker made no progress (code 1)"] * 2


def test_the_benchmark_needs_torch_only_on_the_gpu_machine():
    """The GPU image carries torch and triton; the reviewer package's other dependencies stay out."""
    import subprocess
    code = ("import sys; from kskill.eval import recipes_bench as rb; rb.reviewer_timing().time_cuda; "
            "print(sorted({'pydantic', 'yaml', 'click'} & {m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
