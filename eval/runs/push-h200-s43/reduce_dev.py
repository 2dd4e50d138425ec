"""Development timings (not product figures): the split reduction over a channels-last convolution product
(triton_reduction's (N, spatial, C) view) over its tile and split, on level2/44 and level2/42 (0.154 ms against
torch.compile's one reduction kernel, 0.128, in push-h200-s42 call 3), beside eager and torch.compile. Each
candidate is the default lineage with `_reduce_0`'s launch parameters set.
Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh:
python3 -P eval/runs/push-h200-s43/reduce_dev.py"""
import importlib.util, itertools, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate

PROBLEMS = ["level2/44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean.py",
            "level2/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py"]
TECHNIQUES = ["triton_reduction", "kernel_fusion", "channels_last"]
GRID = [{"BLOCK_R": r, "BLOCK_Q": q, "SPLIT": s, "num_warps": w}
        for r, q, s, w in itertools.product((32, 64, 128), (64, 128), (8, 17, 34, 66), (4,)) if r * q <= 8192]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


def bench(fn):
    with torch.no_grad():
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


for problem in PROBLEMS:
    src = open(f".kb/{problem}").read()
    ref_mod = load(f".kb/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
    x = [t.cuda() for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*x)
    print(f"{problem[:40]:40s} eager {bench(lambda: ref(*x)):.3f} ms", flush=True)
    results = []
    for launch in [None] + GRID:
        params = {} if launch is None else {"launch": {"_reduce_0": launch}}
        try:
            cand = build_candidate(src, TECHNIQUES, params)
            f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
            torch.manual_seed(0)
            new = load(f.name, f"c{abs(hash(str((problem, launch))))}").ModelNew(*ref_mod.get_init_inputs()).cuda()
            with torch.no_grad():
                ok = torch.allclose(new(*x), want, atol=1e-4, rtol=1e-4)
            ms = bench(lambda: new(*x))
            results.append((ms, cand.params["_reduce_0"], ok))
            if launch is None:
                print(f"{problem[:40]:40s} default {cand.params['_reduce_0']} ok={ok} {ms:.3f} ms", flush=True)
        except Exception as e:
            print(f"{problem[:40]:40s} {launch} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
    for ms, launch, ok in sorted(results, key=lambda r: r[0])[:8]:
        print(f"{problem[:40]:40s} {launch} ok={ok} {ms:.3f} ms", flush=True)
    comp = torch.compile(ref)
    with torch.no_grad():
        comp(*x)
    print(f"{problem[:40]:40s} torch.compile {bench(lambda: comp(*x)):.3f} ms", flush=True)
    del ref, x, want; torch.cuda.empty_cache(); torch._dynamo.reset()
