"""#15, session 52: L3/26 ShuffleNet's eager reference and the kernel-fusion candidate its first run kept
(attempt 5 of call 1, shufflenet_kernel_fusion.py), timed together by timing.time_cuda, three times over in
alternating order: events' median, min and max, the host's issue time, and the time per call; then the GPU
test of a host-bound function. Run from the checkout's root on the GPU machine (push_run.sh's DEV), at bcec698
(call 2), b041b6a (call 3) and a7c69fe (call 4): it reads time_cuda's host_ms and per_call_ms, which 5ff0a4e took
back (NOTES.md says why), so it runs only at those commits."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

from kskill.agents.reviewer.timing import time_cuda

HERE = Path(__file__).parent


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


problem = load(Path(".kb/level3/26_ShuffleNet.py"), "problem26")
candidate = load(HERE / "shufflenet_kernel_fusion.py", "candidate26")
torch.manual_seed(0)
with torch.device("cuda"):
    eager = problem.Model(*problem.get_init_inputs())
    mine = candidate.ModelNew(*problem.get_init_inputs())
    inputs = problem.get_inputs()
mine.load_state_dict(eager.state_dict())
fns = {"eager": lambda: eager(*inputs), "kernel_fusion": lambda: mine(*inputs)}
with torch.no_grad():
    for order in (["eager", "kernel_fusion"], ["kernel_fusion", "eager"], ["eager", "kernel_fusion"]):
        raw = time_cuda({n: fns[n] for n in order}, warmup_ms=25, rep_ms=300, min_reps=30, max_reps=400)
        for name, s in raw["stats"].items():
            print(f"{name:14s} events median {s['median_ms']:.3f} min {s['min_ms']:.3f} max {s['max_ms']:.3f} "
                  f"host {s['host_ms']:.3f} per call {s['per_call_ms']:.3f} ms (n={s['n']})", flush=True)
        print(flush=True)
sys.exit(subprocess.call([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                          "tests/gpu/test_reviewer_gpu.py", "-k", "host_bound or timed_with_cuda_events or stable"]))
