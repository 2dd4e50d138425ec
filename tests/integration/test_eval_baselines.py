"""The sandboxed baseline worker on the CPU: eager and a returned module checked at both tolerances
and timed together; a module that kills the worker is left out and the rest stand. (torch.compile's
path is tested on a GPU, tests/gpu/test_eval_gpu.py: on the CPU inductor compiles C++ for minutes.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kskill.eval import baselines
from kskill.eval.baselines import BaselineSettings, run_baselines, start_worker

FIXTURES = Path(__file__).parents[1] / "fixtures"
RELU = FIXTURES / "reviewer" / "problems" / "relu.py"
CANDIDATES = FIXTURES / "reviewer" / "candidates"


def test_a_module_that_segfaults_is_left_out_and_eager_still_gets_its_timing(tmp_path):
    result = run_baselines(RELU, CANDIDATES / "broken" / "segfault.py", BaselineSettings(device="cpu", compile_modes=()),
                           tmp_path / "work")
    assert result["finished"]
    assert "SIGSEGV" in result["crashed"]["kskill"]
    assert not result["contenders"]["kskill"]["built"] and "crashed the worker" in result["contenders"]["kskill"]["error"]
    assert set(result["timing"]["stats"]) == {"eager"} and not result["timing"]["representative"]
    left = sorted(p.name for p in (tmp_path / "work").iterdir())
    assert "worker.log" in left and not {"tmp", "triton_cache", "inductor_cache"} & set(left), left


def test_a_wrong_module_fails_both_tolerances_with_the_reason(tmp_path):
    result = run_baselines(RELU, CANDIDATES / "broken" / "wrong_values.py", BaselineSettings(device="cpu", compile_modes=()),
                           tmp_path / "work")
    kskill = result["contenders"]["kskill"]
    assert kskill["built"] and kskill["correct"] == {"strict": False, "compatible": False}
    assert "at strict tolerance 0.0001, input set 0" in kskill["message"]
    assert set(result["timing"]["stats"]) == {"eager", "kskill"}, "a wrong module is still timed, then not counted"


def test_a_problem_whose_reference_crashes_is_reported_as_such(tmp_path):
    result = run_baselines(FIXTURES / "eval" / "crash_forward.py", None, BaselineSettings(device="cpu", compile_modes=()),
                           tmp_path / "work")
    assert not result["finished"] and result["error"].startswith("the reference could not be run")
    assert "SIGSEGV" in result["error"]


def test_the_worker_imports_only_what_the_gpu_image_has():
    """torch, triton and the standard library: the packages below are absent where kernels are timed."""
    absent = ["pydantic", "yaml", "falkordb", "redis", "hiredis", "neo4j", "faiss", "pypdf", "sentence_transformers",
              "click", "rich", "networkx", "openai"]
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in absent)
            + "import kskill.eval.baseline_worker as w\nprint(sorted(m for m in sys.modules if m.startswith('kskill')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "kskill.agents.reviewer.timing" in done.stdout and "kskill.agents.reviewer.models" not in done.stdout


def test_a_worker_started_before_its_job_takes_it_and_one_that_died_is_replaced(tmp_path, monkeypatch):
    """eval starts the worker while optimize runs: the job reaches the waiting worker; a worker
    that ended before its job leaves it to a fresh one, and the result is the same."""
    fresh: list[Path] = []
    real = baselines.run_sandboxed
    monkeypatch.setattr(baselines, "run_sandboxed", lambda *a, **k: fresh.append(k["workdir"]) or real(*a, **k))
    settings = BaselineSettings(device="cpu", compile_modes=())
    candidate = CANDIDATES / "honest" / "relu_triton.py"

    warm = start_worker(settings, tmp_path / "warm", None, wait_s=120)
    result = run_baselines(RELU, candidate, settings, tmp_path / "warm", warm=warm)
    assert result["finished"] and result["contenders"]["kskill"]["correct"] == {"strict": True, "compatible": True}
    assert fresh == [], "the waiting worker ran the job"
    assert not warm.thread.is_alive()

    ended = start_worker(settings, tmp_path / "ended", None, wait_s=120)
    ended.end()
    result = run_baselines(RELU, candidate, settings, tmp_path / "ended", warm=ended)
    assert result["finished"] and result["contenders"]["kskill"]["correct"]["strict"]
    assert fresh == [tmp_path / "ended"], "a fresh worker took the job the ended one never read"


def test_the_worker_prepares_for_a_gpu_before_its_job():
    """What the waiting worker does on a GPU, run here with CUDA's initialisation stubbed (no GPU):
    torch.compile's modules imported, compile workers kept to one."""
    code = ("import sys, torch\ntorch.cuda.init = lambda: None\n"
            "import kskill.eval.baseline_worker as w\nw.prepare('cuda')\n"
            "import torch._inductor.config as c\n"
            "print('torch._dynamo' in sys.modules, 'torch._inductor.compile_fx' in sys.modules, c.compile_threads)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "1"]
