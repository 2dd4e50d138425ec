"""kskill eval on a real GPU: the baseline worker with every torch.compile mode, and the command end to end.

Run on a CUDA machine with `pytest -m gpu tests/gpu/test_eval_gpu.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kskill.eval.baselines import BaselineSettings, run_baselines
from kskill.agents.reviewer.timing import L2_FLUSH_BYTES

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
              pytest.mark.timeout(1900)]  # its kskill eval may take up to 1800 s

FIXTURES = Path(__file__).parents[1] / "fixtures"
RELU_LARGE = FIXTURES / "reviewer" / "gpu" / "relu_large.py"
TRITON_RELU = FIXTURES / "reviewer" / "candidates" / "honest" / "relu_triton.py"
MODES = ("default", "max-autotune", "reduce-overhead")


def test_eager_every_compile_mode_and_a_triton_module_timed_together_with_cuda_events(tmp_path):
    result = run_baselines(RELU_LARGE, TRITON_RELU, BaselineSettings(device="cuda", compile_modes=MODES),
                           tmp_path / "work")
    assert result["finished"], json.dumps(result)[-3000:]
    names = {"eager", "kskill", *(f"compile_{m}" for m in MODES)}
    for name in names - {"eager"}:
        entry = result["contenders"][name]
        assert entry["built"] and entry["trials"] == 5, entry
        assert entry["correct"] == {"strict": True, "compatible": True}, entry
    timing = result["timing"]
    assert timing["representative"] and timing["method"] == "cuda_events"
    assert timing["l2_flush_bytes"] == L2_FLUSH_BYTES
    assert set(timing["allocator"]) == {"num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams"}
    assert set(timing["stats"]) == names and all(s["n"] >= 30 for s in timing["stats"].values())
    # ReLU over 64 MB is memory-bound: every contender within a factor of 3 of eager
    eager = timing["stats"]["eager"]["median_ms"]
    assert all(eager / 3 < s["median_ms"] < eager * 3 for s in timing["stats"].values())
    assert result["versions"]["device_name"] == torch.cuda.get_device_name()


def test_a_module_slower_than_torch_compile_gets_the_kernels_of_one_call_of_each(tmp_path):
    slow = FIXTURES / "eval" / "relu_four_passes.py"
    result = run_baselines(RELU_LARGE, slow, BaselineSettings(device="cuda", compile_modes=("default",)),
                           tmp_path / "work")
    assert result["finished"] and not result.get("kernels_error"), json.dumps(result)[-3000:]
    kernels = result["kernels"]
    assert set(kernels) == {"kskill", "compile_default"}
    assert kernels["kskill"]["launches"] >= 4 > kernels["compile_default"]["launches"] >= 1
    assert kernels["kskill"]["gpu_ms"] > kernels["compile_default"]["gpu_ms"] > 0
    assert kernels["kskill"]["top"][0]["calls"] == 4


def test_kskill_eval_end_to_end_on_two_problems(tmp_path):
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for number, name in enumerate(("relu_large", "softmax_medium"), start=1):
        (suite / f"{number}_{name}.py").write_text((FIXTURES / "reviewer" / "gpu" / f"{name}.py").read_text())
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "kskill", "eval", str(suite), "--out", str(out), "--iterations", "3",
                           "--time-limit", "120", "--workers", "1", "--json"], capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "KSKILL_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["done", "done"], rows
    for r in rows:
        assert r["timings_representative"] and r["eager_ms"] > 0 and r["compile_default_ms"] > 0
        assert r["correct_strict"] and r["speedup_eager"] > 0 and r["roofline_fraction"] > 0
        assert r["gpu"] == torch.cuda.get_device_name() and r["driver"] != "none"
    html = (out / "report.html").read_text()
    assert html.count("<img") == 4, "all four figures, the kskill-vs-compile scatter included"
