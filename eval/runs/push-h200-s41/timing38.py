"""Why L2/38's kept module (pipelined softmax) times 2.01 ms in the eval's baseline worker, in or out of its
sandbox (sand41.py), and 1.83 ms under do_bench: the worker's timing (timing.time_cuda, interleaved with the
other contenders) on the kept module alone, beside eager, beside torch.compile, beside both; and do_bench.
Development timings. Run from the checkout's root after eval/runs/setup_gpu.sh."""
import importlib.util
import torch, triton
from kskill.agents.reviewer.timing import time_cuda


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


ref_mod = load(".kb/level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py", "ref")
new_mod = load("eval/runs/push-h200-s41/sand41_module.py", "new")
torch.manual_seed(0)
ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda().eval()
new = new_mod.ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
new.load_state_dict(ref.state_dict(), strict=False)
comp = torch.compile(ref)
x = [t.cuda() for t in ref_mod.get_inputs()]
with torch.no_grad():
    print("max error", (new(*x) - ref(*x)).abs().max().item(), "lanes", {k: list(v.values()) for k, v in vars(new_mod).items() if isinstance(v, dict) and k.endswith("_lanes")}, flush=True)
    comp(*x)
    fns = {"kskill": lambda: new(*x), "eager": lambda: ref(*x), "compile": lambda: comp(*x)}
    print("do_bench kskill", round(triton.testing.do_bench(fns["kskill"], warmup=25, rep=100, return_mode="median"), 3), flush=True)
    for names in (["kskill"], ["kskill", "eager"], ["kskill", "compile"], ["eager", "kskill", "compile"], ["kskill"]):
        out = time_cuda({n: fns[n] for n in names}, warmup_ms=25, rep_ms=150, min_reps=30, max_reps=400)
        print(names, {n: round(s["median_ms"], 3) for n, s in out["stats"].items()}, flush=True)
    print("do_bench kskill", round(triton.testing.do_bench(fns["kskill"], warmup=25, rep=100, return_mode="median"), 3), flush=True)
