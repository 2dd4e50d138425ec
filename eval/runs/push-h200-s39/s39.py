"""Session 39 development timings (not product figures): generated candidates under .gpu/c39 (the product's
sources, built on the CPU: call 1 from 9334871 ('old') and the flag-and-repair exchange ('new') under
several settings; call 2 from d34fbe7 under grouped forms gROWS_CHUNK-WARPS, g1_default the one-row form; call 4 from the long-row
exchange (up to 512 chunks a row): default, one_row, two_reads), checked against the reference and timed with triton.testing.do_bench (L2 cleared), alternating
twice."""
import glob, importlib.util, os, time
import torch, triton

KB = os.environ.get("KB", ".kb")
PROBLEMS = {"34_1": "level1/34_InstanceNorm.py", "23_1": "level1/23_Softmax.py",
            "38_2": "level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py",
            "83_2": "level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout.py",
            "85_2": "level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py",
            "35_1": "level1/35_GroupNorm_.py", "40_1": "level1/40_LayerNorm.py"}

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod

for key, problem in PROBLEMS.items():
    ref_mod = load(f"{KB}/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*inputs)
    built = []
    for path in sorted(glob.glob(f".gpu/c39/{key}__*.py")):
        label = os.path.basename(path)[len(key) + 2:-3]
        try:
            mod = load(path, f"c{abs(hash(path))}")
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
            with torch.no_grad():
                got = new(*inputs)
            ok = torch.allclose(got, want, atol=1e-4, rtol=1e-4)
            built.append((label, new, ok))
        except Exception as e:
            print(f"{problem} {label}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    times = {label: [] for label, *_ in built}
    for _ in range(2):
        for label, new, ok in built:
            with torch.no_grad():
                times[label].append(triton.testing.do_bench(lambda: new(*inputs), warmup=25, rep=200, return_mode="median"))
    with torch.no_grad():
        eager = triton.testing.do_bench(lambda: ref(*inputs), warmup=25, rep=200, return_mode="median")
    print(f"== {problem} eager {eager:.3f} ms", flush=True)
    for label, new, ok in built:
        print(f"{problem:40s} {label:24s} ok={ok} " + " / ".join(f"{t:.3f}" for t in times[label]), flush=True)
    del built, want, inputs, ref; torch.cuda.empty_cache()
