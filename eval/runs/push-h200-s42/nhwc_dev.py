"""Development timings (not product figures): pooling that reads its adopted convolution's product in
channels-last (fused_pooling's nhwc form) against the NCHW form, on the development set's convolution -> pooling
chains, beside eager and torch.compile; the emitted NCHW -> NHWC transpose against PyTorch's strided copy, over four shapes; the
form's tile over BLOCK_S / BLOCK_C / warps on level2/10. Run from the checkout's root on the GPU machine after
eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s42/nhwc_dev.py [more]"""
import importlib.util, sys, tempfile
import torch, triton
from kskill.agents.recipes.builder import build_candidate

BASE = ["fused_pooling", "kernel_fusion", "triton_reduction"]
PROBLEMS = ["level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py", "level2/35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py",
            "level2/46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py", "level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py",
            "level2/50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling.py", "level2/89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py"]
# `more` (after call 3): a softmax over the channels, and an epilogue with operands of its own, read channels-last
MORE = ["level2/49_ConvTranspose3d_Softmax_Sigmoid.py", "level2/6_Conv3d_Softmax_MaxPool_MaxPool.py",
        "level2/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py",
        "level2/8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum.py", "level2/50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling.py",
        "level2/96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp.py"]
if sys.argv[1:] == ["more"]:
    BASE, PROBLEMS = BASE + ["online_softmax"], MORE
TILES = [{"BLOCK_S": 32}, {"BLOCK_S": 128}, {"BLOCK_S": 64, "num_warps": 8}, {"BLOCK_S": 128, "num_warps": 8},
         {"BLOCK_C": 32, "BLOCK_S": 128}]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


def bench(fn):
    with torch.no_grad():
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def candidate(src, techniques, params):
    while techniques:
        try:
            return build_candidate(src, techniques, params)
        except Exception as e:  # a technique with nothing to do here: drop it
            if "triton_reduction" not in techniques:
                raise
            techniques = [t for t in techniques if t != "triton_reduction"]
    raise RuntimeError("nothing built")


for problem in PROBLEMS:
    src = open(f".kb/{problem}").read()
    ref_mod = load(f".kb/{problem}", "ref")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda().eval()
    x = [t.cuda() for t in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*x)
    print(f"{problem[:40]:40s} eager {bench(lambda: ref(*x)):.3f} ms", flush=True)
    forms = [(BASE, {}), (BASE + ["channels_last"], {})]
    if problem.startswith("level2/10_"):
        forms += [(BASE + ["channels_last"], {"launch": {"_pool_0": t}}) for t in TILES]
    for techniques, params in forms:
        try:
            cand = candidate(src, techniques, params)
            f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
            mod = load(f.name, f"c{abs(hash(str((techniques, params))))}")
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda().eval()
            with torch.no_grad():
                ok = torch.allclose(new(*x), want, atol=1e-4, rtol=1e-4)
            nhwc = "BLOCK_C=" in cand.source
            print(f"{problem[:40]:40s} {'+'.join(cand.applied):60s} nhwc={nhwc} {cand.params} ok={ok} "
                  f"{bench(lambda: new(*x)):.3f} ms", flush=True)
        except Exception as e:
            print(f"{problem[:40]:40s} {techniques} {params} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    comp = torch.compile(ref)
    with torch.no_grad():
        comp(*x)
    print(f"{problem[:40]:40s} torch.compile {bench(lambda: comp(*x)):.3f} ms", flush=True)
    del ref, x, want; torch.cuda.empty_cache(); torch._dynamo.reset()

if sys.argv[1:] == ["more"]:
    sys.exit(0)
# the emitted transpose (written to a file: Triton reads a kernel's source from it) against PyTorch's copy
from kskill.agents.recipes.templates.common import TO_CHANNELS_LAST
f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
f.write("import torch, triton\nimport triton.language as tl\n" + TO_CHANNELS_LAST); f.close()
helpers = load(f.name, "transpose")
for shape in [(128, 64, 256, 256), (128, 3, 256, 256), (32, 64, 16, 64, 64), (16, 32, 128, 128)]:
    x = torch.randn(shape, device="cuda")
    cl = torch.channels_last_3d if x.dim() == 5 else torch.channels_last
    assert torch.equal(helpers._to_channels_last(x), x.contiguous(memory_format=cl))
    print(f"input {shape} to channels-last: emitted transpose {bench(lambda: helpers._to_channels_last(x)):.3f} ms, "
          f"PyTorch {bench(lambda: x.contiguous(memory_format=cl)):.3f} ms", flush=True)
