"""Development timings (not product figures): a sum, mean or average pooling over a linear map's features computed
as a product with the weight's reduced rows (algebraic_simplification's reduced_product) on the development set's
four such problems, beside eager and torch.compile, with the largest difference from eager over five input sets and whether
it passes atol = rtol = 1e-4 and 1e-2 (on CPU, level2/14's randn weight left a few near-zero sums outside 1e-4:
the reference's own fp32 rounding there is larger than the tolerance).
Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh:
python3 -P eval/runs/push-h200-s43/reduced_dev.py"""
import importlib.util, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate

PROBLEMS = ["level2/14_Gemm_Divide_Sum_Scaling.py", "level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py",
            "level2/51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py",
            "level2/98_Matmul_AvgPool_GELU_Scale_Max.py"]


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
    cand = build_candidate(src, ["algebraic_simplification"], {})
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
    torch.manual_seed(0)
    new = load(f.name, f"c{abs(hash(problem))}").ModelNew(*ref_mod.get_init_inputs()).cuda()
    worst, strict, loose = 0.0, True, True
    for seed in range(5):
        torch.manual_seed(100 + seed)
        x = [t.cuda() for t in ref_mod.get_inputs()]
        with torch.no_grad():
            want, got = ref(*x), new(*x)
        worst = max(worst, (got - want).abs().max().item())
        strict &= torch.allclose(got, want, atol=1e-4, rtol=1e-4)
        loose &= torch.allclose(got, want, atol=1e-2, rtol=1e-2)
    print(f"{problem[:40]:40s} {cand.notes} max |diff| {worst:.3g} 1e-4 {strict} 1e-2 {loose}", flush=True)
    print(f"{problem[:40]:40s} eager {bench(lambda: ref(*x)):.3f} ms, rewritten {bench(lambda: new(*x)):.3f} ms",
          flush=True)
    comp = torch.compile(ref)
    with torch.no_grad():
        comp(*x)
    print(f"{problem[:40]:40s} torch.compile {bench(lambda: comp(*x)):.3f} ms", flush=True)
    del ref, new, x; torch.cuda.empty_cache(); torch._dynamo.reset()
