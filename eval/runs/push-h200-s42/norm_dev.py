"""Development timings (not product figures): group norm over rows of 2M elements (level1/35) in the pipelined
form's smaller chunks, which split a row past MAX_GROUP_SPLIT (lifted here for the measurement only), against the
default (chunks of 8192 over 4 warps, one lane) and the two-read form. Run from the checkout's root on the GPU
machine after eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s42/norm_dev.py"""
import importlib.util, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate
from kskill.agents.recipes.templates import exchange

SHIPPED = exchange.MAX_GROUP_SPLIT
FORMS = {"level1/35_GroupNorm_.py": [({}, SHIPPED), ({"row_exchange": False}, SHIPPED), ({"pipe_chunk": 4096}, 512),
                                     ({"pipe_chunk": 2048}, 1024)],
         "level1/40_LayerNorm.py": [({}, SHIPPED), ({"pipe_chunk": 8192}, 512), ({"pipe_chunk": 4096}, 1024)]}


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


for problem, forms in FORMS.items():
    src = open(f".kb/{problem}").read()
    ref_mod = load(f".kb/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda().eval()
    x = [t.cuda() for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*x)
        t_ref = triton.testing.do_bench(lambda: ref(*x), warmup=25, rep=100, return_mode="median")
    print(f"{problem[:36]:36s} eager {t_ref:.3f} ms", flush=True)
    for params, most in forms:
        exchange.MAX_GROUP_SPLIT = most
        try:
            cand = build_candidate(src, ["fused_normalization"], params)
            f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
            mod = load(f.name, f"c{abs(hash(str(params)))}")
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
            with torch.no_grad():
                ok = torch.allclose(new(*x), want, atol=1e-4, rtol=1e-4)
                t = triton.testing.do_bench(lambda: new(*x), warmup=25, rep=100, return_mode="median")
            split = next((l.split("](")[1][-110:] for l in cand.source.splitlines() if "SPLIT=" in l), "two reads")
            print(f"{problem[:36]:36s} {str(params):24s} {split}", flush=True)
            print(f"{problem[:36]:36s} {str(params):24s} ok={ok} {t:.3f} ms", flush=True)
        except Exception as e:
            print(f"{problem[:36]:36s} {params} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    del ref, x, want; torch.cuda.empty_cache()
