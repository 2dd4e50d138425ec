"""Development profile (not product figures): where the GPU time of kskill's candidate and of torch.compile goes
on the level-2 rows of kb60 within 10 % of torch.compile: the candidate rebuilt from the row's techniques with
default parameters, each call's kernels by CUDA time (torch.profiler, 5 calls after warm-up).
Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s42/profile_dev.py"""
import importlib.util, json, tempfile
from pathlib import Path
import torch
from torch.profiler import ProfilerActivity, profile
from kskill.agents.recipes.builder import build_candidate

ROWS = Path("eval/runs/kb60-h200/eval/rows")
PICK = ["level2__44_", "level2__19_", "level2__77_", "level2__83_", "level2__49_", "level2__2_", "level2__4_",
        "level2__36_", "level2__54_", "level2__5_", "level2__85_", "level2__17_", "level2__52_"]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


def kernels(label, fn):
    with torch.no_grad():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
    rows = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in rows) / 5 / 1000
    print(f"  {label}: {total:.3f} ms a call", flush=True)
    for e in rows[:7]:
        print(f"    {e.device_time_total / 5 / 1000:7.3f} ms  x{e.count // 5:<3d} {e.key[:110]}", flush=True)


for row_file in sorted(ROWS.glob("level2__*.json")):
    if not any(row_file.name.startswith(p) for p in PICK):
        continue
    row = json.loads(row_file.read_text())
    problem = f".kb/{row['problem']}.py"
    src = open(problem).read()
    ref_mod = load(problem, "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda().eval()
    x = [t.cuda() for t in ref_mod.get_inputs()]
    techniques = [t for t in row["techniques"].split("+") if t and t != "reference"]
    print(f"{row['name']}: kb60 {row['kskill_ms']:.3f} ms against compile {row['compile_default_ms']:.3f}; {techniques}", flush=True)
    try:
        cand = build_candidate(src, techniques, {})
        f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
        torch.manual_seed(0)
        new = load(f.name, f"c{row_file.stem}").ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
        kernels("kskill (defaults)", lambda: new(*x))
    except Exception as e:
        print(f"  kskill FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
    comp = torch.compile(ref)
    kernels("torch.compile", lambda: comp(*x))
    del ref, x; torch.cuda.empty_cache(); torch._dynamo.reset()
