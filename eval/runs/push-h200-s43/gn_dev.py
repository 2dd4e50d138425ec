"""Development timings (not product figures): a group norm that reads its adopted convolution's product
channels-last (fused_normalization.channels_last_norm: each group walked position by position) against the NCHW
form, on the development set's convolution -> group norm chains, beside eager and torch.compile; the forms' rows a
program (the `group` parameter); the kernels of the NCHW and channels-last candidates by CUDA time (torch.profiler,
5 calls after warm-up). Then the short runs: groups of fewer than MIN_RUN_BYTES of channels read channels-last too
(the gate's threshold lowered for the measurement only), and the instance norm row as the NCHW control.
Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh:
python3 -P eval/runs/push-h200-s43/gn_dev.py [main|short] (both by default)"""
import importlib.util, sys, tempfile
import torch, triton
from torch.profiler import ProfilerActivity, profile
from kskill.agents.recipes import fused_normalization
from kskill.agents.recipes.builder import build_candidate

BASE = ["fused_normalization", "kernel_fusion"]
# problem, techniques beside BASE (what its other ops need)
MAIN = [("level2/19_ConvTranspose2d_GELU_GroupNorm.py", []),
        ("level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py", ["fused_pooling"]),
        ("level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py", ["triton_reduction"])]
SHORT = [("level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout.py", []), ("level2/17_Conv2d_InstanceNorm_Divide.py", [])]
GROUPS = [{"group": 1}, {"group": 4}]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


def bench(fn):
    with torch.no_grad():
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


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
    print(f"  {label}: {sum(e.device_time_total for e in rows) / 5 / 1000:.3f} ms of kernels a call", flush=True)
    for e in rows[:6]:
        print(f"    {e.device_time_total / 5 / 1000:7.3f} ms  x{e.count // 5:<3d} {e.key[:100]}", flush=True)


def run(problem, extra):
    src = open(f".kb/{problem}").read()
    ref_mod = load(f".kb/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()  # training mode, as the eval runs it (dropout: ok False)
    x = [t.cuda() for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*x)
    print(f"{problem[:40]:40s} eager {bench(lambda: ref(*x)):.3f} ms", flush=True)
    nchw, nhwc = BASE + extra, BASE + extra + ["channels_last"]
    forms = [(nchw, {}), (nhwc, {})] + [(nhwc, g) for g in GROUPS]
    for techniques, params in forms:
        try:
            cand = build_candidate(src, techniques, params)
            f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
            mod = load(f.name, f"c{abs(hash(str((problem, techniques, params))))}")
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
            with torch.no_grad():
                ok = torch.allclose(new(*x), want, atol=1e-4, rtol=1e-4)
            print(f"{problem[:40]:40s} {'+'.join(cand.applied):60s} offs_in={'offs_in' in cand.source} "
                  f"{cand.params} ok={ok} {bench(lambda: new(*x)):.3f} ms", flush=True)
            if not params:
                kernels("channels-last" if "channels_last" in techniques else "NCHW", lambda: new(*x))
        except Exception as e:
            print(f"{problem[:40]:40s} {techniques} {params} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    comp = torch.compile(ref)
    with torch.no_grad():
        comp(*x)
    print(f"{problem[:40]:40s} torch.compile {bench(lambda: comp(*x)):.3f} ms", flush=True)
    del ref, x, want; torch.cuda.empty_cache(); torch._dynamo.reset()


which = sys.argv[1:] or ["main", "short"]
for problem, extra in MAIN if "main" in which else []:
    run(problem, extra)
if "short" in which:
    fused_normalization.MIN_RUN_BYTES = 4
    for problem, extra in SHORT:
        run(problem, extra)
