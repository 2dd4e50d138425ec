"""The GPU a run plans for: one named with --gpu is the target even where the reviews run on the
CPU (a plan for the H200 made on a laptop); without one, a CPU run plans for no GPU."""

from pathlib import Path
from types import SimpleNamespace

import kskill
from kskill.agents.gpus import resolve
from kskill.agents.problem import load_problem
from kskill.loop import Ctx
from kskill.run_state import LoopConfig, RunState

PROBLEM = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"


def observed_gpu(gpu, device: str, tmp_path: Path):
    state = RunState("run-target", load_problem(PROBLEM), LoopConfig(device=device), tmp_path)
    observations = Ctx(state, SimpleNamespace(gpu=gpu)).extractor.observe()
    return observations.get("gpu_name"), observations.get("ridge_point")


def test_a_named_gpu_is_the_target_of_a_cpu_run_and_detection_is_not(tmp_path):
    h200 = resolve("h200")
    name, ridge = observed_gpu(h200, "cpu", tmp_path)
    assert name == h200.name and ridge is not None
    assert observed_gpu("detect", "cpu", tmp_path) == (None, None)
