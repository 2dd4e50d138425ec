"""Development timings (not product figures): the depthwise convolution's rolled form (a program walks a strip of
ROLL output rows, each input row loaded once and added into the KH output rows it belongs to) against the direct
form (the default: tiles of 2 x 256 in the vector form). Run from the checkout's root on the GPU machine after
eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s46/dw_dev.py [roll|unroll]"""
import importlib.util, sys, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate

WHICH = sys.argv[1] if len(sys.argv) > 1 else "roll"
if WHICH == "roll":  # call 1: strips, tile widths, warps, the vector form or not
    ROLLED = [{"ROLL": r, "BLOCK_W": w, "num_warps": nw, "vector": v}
              for r in (8, 32) for w, nw in ((128, 1), (256, 2), (256, 4), (512, 4)) for v in (True, False)]
    ROLLED += [{"ROLL": r, "BLOCK_W": 256, "num_warps": 2} for r in (4, 16, 64, 128)]
    FORMS = {p: [{}] + ROLLED for p in ("level1/84_conv_depthwise_2D_asymmetric_input_square_kernel.py",
                                         "level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py")}
    FORMS.update({p: [{}, {"ROLL": 8}, {"ROLL": 32}, {"ROLL": 32, "BLOCK_W": 256, "num_warps": 2},
                      {"ROLL": 16, "vector": False}]
                  for p in ("level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py",
                            "level1/86_conv_depthwise_separable_2D.py")})
else:  # call 2 ("unroll"): input rows a step, over strips, 256 columns over 2 warps; the direct form beside
    FORMS = {p: [{}, {"BLOCK_H": 2}] + [{"ROLL": r, "UNROLL": u} for r in (4, 8, 16, 32) for u in (1, 2, 4)]
             + [{"ROLL": 16, "UNROLL": 2, "BLOCK_W": 128, "num_warps": 1}]
             for p in ("level1/84_conv_depthwise_2D_asymmetric_input_square_kernel.py",
                       "level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py",
                       "level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py",
                       "level1/86_conv_depthwise_separable_2D.py")}


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
    for params in forms:
        try:
            cand = build_candidate(src, ["depthwise_convolution"], params)
            f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
            mod = load(f.name, f"c{abs(hash(str(params)))}")
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
            with torch.no_grad():
                err = (new(*x) - want).abs().max().item()
                t = triton.testing.do_bench(lambda: new(*x), warmup=25, rep=100, return_mode="median")
            used = {k: v for p in cand.params.values() for k, v in p.items()}
            print(f"{problem[:36]:36s} {str(used):100s} err={err:.1e} {t:.3f} ms", flush=True)
        except Exception as e:
            print(f"{problem[:36]:36s} {params} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    del ref, x, want; torch.cuda.empty_cache()
