"""Development timings (not product figures): the vector form of the stencil templates (each lane's 4 output
columns from aligned 4-column loads, taken apart in registers) against the column form (one load per window
offset): `pool`, the development set's rolled pools over block widths, warps, rows and unrolling; `dw`, its
depthwise convolutions over tile shapes. Run from the checkout's root on the GPU machine after
eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s41/pool_dev.py [pool|dw|dw2|dw3]"""
import importlib.util, sys, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate

POOL = {
    "level1/42_Max_Pooling_2D.py": [{"vector": False}, {}, {"BLOCK_W": 1024, "num_warps": 8}, {"BLOCK_W": 256, "num_warps": 2},
                                    {"num_warps": 8}, {"ROWS": 16}, {"ROWS": 64}, {"UNROLL": 2}, {"UNROLL": 1},
                                    {"BLOCK_W": 1024, "num_warps": 8, "ROWS": 16}],
    "level1/46_Average_Pooling_3D.py": [{"vector": False}, {}, {"num_warps": 2}, {"BLOCK_W": 64}],
    "level3/6_GoogleNetInceptionModule.py": [{"vector": False}, {}],
}
DW = {
    "level1/84_conv_depthwise_2D_asymmetric_input_square_kernel.py": [
        {"vector": False}, {}, {"BLOCK_H": 4}, {"BLOCK_H": 16}, {"BLOCK_H": 16, "num_warps": 8},
        {"BLOCK_W": 128, "BLOCK_H": 4}, {"BLOCK_W": 128, "BLOCK_H": 8, "num_warps": 8}, {"BLOCK_H": 32, "num_warps": 8}],
    "level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py": [
        {"vector": False}, {}, {"BLOCK_H": 4}, {"BLOCK_H": 16}, {"BLOCK_H": 16, "num_warps": 8},
        {"BLOCK_W": 128, "BLOCK_H": 4}, {"BLOCK_W": 128, "BLOCK_H": 8, "num_warps": 8}],
}
DW2 = {  # around the tile chosen after DW (4 x 128, 4 warps, the vector form: the default for rows of 128 or more)
    problem: [{"vector": False, "BLOCK_H": 8, "BLOCK_W": 64}, {}, {"BLOCK_H": 2, "num_warps": 2}, {"num_warps": 2},
              {"BLOCK_H": 8}, {"BLOCK_H": 2, "BLOCK_W": 256}, {"BLOCK_H": 1, "BLOCK_W": 512},
              {"BLOCK_H": 4, "BLOCK_W": 256, "num_warps": 8}, {"vector": False}]
    for problem in DW}
DW3 = {  # for the next session: the grid with a plane's tiles consecutive (tile_major) against planes on axis 0
    problem: [dict(form, tile_major=major) for form in ({"vector": False, "BLOCK_H": 8, "BLOCK_W": 64}, {},
                                                        {"BLOCK_H": 8, "BLOCK_W": 64}, {"BLOCK_H": 4, "BLOCK_W": 128},
                                                        {"BLOCK_H": 8, "BLOCK_W": 256, "num_warps": 8})
              for major in (False, True)]
    for problem in DW}
WHICH = sys.argv[1] if len(sys.argv) > 1 else "pool"
RECIPE, FORMS = {"pool": ("fused_pooling", POOL), "dw": ("depthwise_convolution", DW),
                 "dw2": ("depthwise_convolution", DW2), "dw3": ("depthwise_convolution", DW3)}[WHICH]


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
            cand = build_candidate(src, [RECIPE], params)
            f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
            mod = load(f.name, f"c{abs(hash(str(params)))}")
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
            with torch.no_grad():
                ok = torch.allclose(new(*x), want, atol=1e-4, rtol=1e-4)
                t = triton.testing.do_bench(lambda: new(*x), warmup=25, rep=100, return_mode="median")
            used = {k: v for p in cand.params.values() for k, v in p.items()}
            print(f"{problem[:36]:36s} {str(used):80s} ok={ok} {t:.3f} ms", flush=True)
        except Exception as e:
            print(f"{problem[:36]:36s} {params} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    del ref, x, want; torch.cuda.empty_cache()
