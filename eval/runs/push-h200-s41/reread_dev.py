"""For the next GPU session (development timings, not product figures): the row norms' streamed pipelined form
(`reread`) against the kept forms on the two norm rows furthest under the roofline, layer norm 16 x 4M (two
reads now, 54 %) and group norm 896 x 2M (the held pipelined form, 63 %), over chunks, tiles and lanes. Run
from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s40/reread_dev.py"""
import importlib.util, itertools, sys, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate

KB = sys.argv[1] if len(sys.argv) > 1 else ".kb"
PROBLEMS = {"level1/40_LayerNorm.py": ({"row_exchange": False}, None), "level1/35_GroupNorm_.py": ({}, None)}

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod

def module_of(src, params, label):
    cand = build_candidate(src, ["fused_normalization"], params)
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
    return load(f.name, f"c_{abs(hash(label))}"), cand.params

for problem, (kept, _) in PROBLEMS.items():
    src = open(f"{KB}/{problem}").read()
    ref_mod = load(f"{KB}/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
    x = [t.cuda() for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*x)
    forms = [("kept", kept, None)]
    for chunk, tile in itertools.product((8192, 16384, 32768), (2048, 4096)):
        for lanes in (None, 1, 2, 4):
            forms.append((f"reread {chunk}/{tile} lanes {lanes or 'reckoned'}",
                          {"reread": True, "pipe_chunk": chunk, "reread_tile": tile}, lanes))
    for label, params, lanes in forms:
        try:
            mod, used = module_of(src, params, label)
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
            with torch.no_grad():
                new(*x)
                if lanes:
                    for v in [v for k, v in vars(mod).items() if k.endswith("_lanes") and isinstance(v, dict)]:
                        v[x[0].device] = lanes
                ok = torch.allclose(new(*x), want, atol=1e-4, rtol=1e-4)
                t = triton.testing.do_bench(lambda: new(*x), warmup=25, rep=100, return_mode="median")
            reckoned = {k: list(v.values()) for k, v in vars(mod).items() if k.endswith("_lanes") and isinstance(v, dict)}
            print(f"{problem:28s} {label:34s} ok={ok} {t:.3f} ms {reckoned}", flush=True)
        except Exception as e:
            print(f"{problem:28s} {label:34s} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
    del ref, x, want; torch.cuda.empty_cache()
