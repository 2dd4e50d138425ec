"""Development timings (not product figures): where the time of a transposed convolution followed by pooling
(level2/10) goes in NCHW and in channels-last, by pieces: the input's conversion, the convolution in each layout,
PyTorch's own max pooling on a channels-last tensor, and the whole chain both ways beside torch.compile.
Run from the checkout's root on the GPU machine: python3 -P eval/runs/push-h200-s42/layout_dev.py"""
import importlib.util
import torch, triton
import torch.nn.functional as F

CL = torch.channels_last


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod


def bench(label, fn):
    with torch.no_grad():
        t = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    print(f"{label:52s} {t:.3f} ms", flush=True)


m = load(".kb/level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py", "p10")
torch.manual_seed(0)
ref = m.Model(*m.get_init_inputs()).cuda().eval()
x = m.get_inputs()[0].cuda()
conv = ref.conv_transpose
w_cl = conv.weight.contiguous(memory_format=CL)
x_cl = x.contiguous(memory_format=CL)
y = conv(x); y_cl = F.conv_transpose2d(x_cl, w_cl, conv.bias, 1, 1)
print("conv output strides: NCHW", y.stride(), "channels-last", y_cl.stride(), flush=True)


def chain_cl(xin):
    z = F.conv_transpose2d(xin.contiguous(memory_format=CL), w_cl, conv.bias, 1, 1)
    z = F.hardtanh(F.max_pool2d(z, 2, 2), -1, 1)
    return torch.tanh(z.mean(dim=(2, 3), keepdim=True))


with torch.no_grad():
    print("chain_cl matches:", torch.allclose(chain_cl(x), ref(x), atol=1e-4, rtol=1e-4), flush=True)
bench("eager (reference)", lambda: ref(x))
bench("input to channels-last (x.contiguous(CL))", lambda: x.contiguous(memory_format=CL))
bench("conv NCHW in, NCHW weight", lambda: conv(x))
bench("conv channels-last in and weight", lambda: F.conv_transpose2d(x_cl, w_cl, conv.bias, 1, 1))
bench("conv channels-last, no bias", lambda: F.conv_transpose2d(x_cl, w_cl, None, 1, 1))
bench("max_pool2d on NCHW output", lambda: F.max_pool2d(y, 2, 2))
bench("max_pool2d on channels-last output", lambda: F.max_pool2d(y_cl, 2, 2))
bench("whole chain channels-last (PyTorch ops)", lambda: chain_cl(x))
comp = torch.compile(ref)
with torch.no_grad():
    comp(x)
bench("torch.compile (default)", lambda: comp(x))
