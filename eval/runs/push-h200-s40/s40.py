"""Session 40 development timings (not product figures): candidates under .gpu/c40 built on the CPU from 0f22f41
(old: per-channel operands indexed from an offset tensor, as 963f3d3; new: from the row; pipeN: the pipelined
exchange in chunks of N; _w8: the grouped form over 8 warps), checked against the reference on the first call
(every row a lane) and again after timing (lanes reckoned), timed with triton.testing.do_bench (L2 cleared),
alternating twice."""
import glob, importlib.util, os, sys
import torch, triton

KB = os.environ.get("KB", ".kb")
PROBLEMS = {"34_1": "level1/34_InstanceNorm.py", "23_1": "level1/23_Softmax.py", "35_1": "level1/35_GroupNorm_.py",
            "38_2": "level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py",
            "85_2": "level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py",
            "83_2": "level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout.py",
            "92_2": "level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py",
            "17_2": "level2/17_Conv2d_InstanceNorm_Divide.py",
            "19_2": "level2/19_ConvTranspose2d_GELU_GroupNorm.py"}
ONLY = sys.argv[1:] or list(PROBLEMS)

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod

def lanes_of(mod):
    return {k: dict(v) for k, v in vars(mod).items() if k.endswith("_lanes") and isinstance(v, dict)}

for key in ONLY:
    problem = PROBLEMS[key]
    ref_mod = load(f"{KB}/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*inputs)
    built = []
    for path in sorted(glob.glob(f".gpu/{os.environ.get('C', 'c40')}/{key}__*.py")):
        label = os.path.basename(path)[len(key) + 2:-3]
        fixed = [None] + ([8, 10, 14] if key == "34_1" and label == "pipe2048" else [])
        for lanes in fixed:
            try:
                mod = load(path, f"c{abs(hash((path, lanes)))}")
                torch.manual_seed(0)
                new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
                with torch.no_grad():
                    got = new(*inputs)
                ok = torch.allclose(got, want, atol=1e-4, rtol=1e-4)
                if lanes:
                    for v in lanes_of(mod).values():
                        v[inputs[0].device] = lanes
                built.append((label + (f"@{lanes}" if lanes else ""), mod, new, ok))
            except Exception as e:
                print(f"{problem} {label}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    times = {label: [] for label, *_ in built}
    for _ in range(2):
        for label, mod, new, ok in built:
            with torch.no_grad():
                times[label].append(triton.testing.do_bench(lambda: new(*inputs), warmup=25, rep=200, return_mode="median"))
    with torch.no_grad():
        eager = triton.testing.do_bench(lambda: ref(*inputs), warmup=25, rep=200, return_mode="median")
    print(f"== {problem} eager {eager:.3f} ms", flush=True)
    for label, mod, new, ok in built:
        with torch.no_grad():
            again = torch.allclose(new(*inputs), want, atol=1e-4, rtol=1e-4)
        lanes = {k: list(v.values()) for k, v in lanes_of(mod).items()}
        print(f"{problem[:40]:40s} {label:14s} ok={ok}/{again} {lanes if lanes else ''} "
              + " / ".join(f"{t:.3f}" for t in times[label]), flush=True)
    del built, want, inputs, ref; torch.cuda.empty_cache()
