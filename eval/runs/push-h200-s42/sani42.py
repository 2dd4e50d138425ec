"""compute-sanitizer memcheck over this session's forms at odd sizes: pooling that reads its adopted convolution
channels-last (2-d and 3-d, max and average, padding, ragged position and channel tiles, a fused prologue and
epilogue) and depthwise convolutions with a plane's tiles consecutive (the default grid now; vector and column
forms, ragged last tiles), each launched twice and compared with PyTorch. The convolutions run in TF32 on cuDNN
(PyTorch's default) in both layouts, so results are compared at 1e-3."""
import importlib.util, tempfile, torch
from kskill.agents.recipes.builder import build_candidate


def problem(body, init, inputs):
    return ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n" + init +
            f"    def forward(self, x):\n        return {body}\n\ndef get_inputs():\n    return [{inputs}]\n\n"
            "def get_init_inputs():\n    return []\n")


def load(src):
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(src); f.close()
    spec = importlib.util.spec_from_file_location("cand", f.name); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m


CONV = "    def __init__(self):\n        super().__init__()\n        self.conv = {}\n"
DW = CONV.format("nn.Conv2d(6, 6, {}, padding={}, groups=6)")
cases = [("torch.clamp(F.max_pool2d(torch.relu(self.conv(x)), 2), -0.5, 0.5)", CONV.format("nn.ConvTranspose2d(5, 70, 3, stride=2)"),
          "torch.randn(3, 5, 21, 33)", "channels_last+fused_pooling+kernel_fusion"),
         ("F.avg_pool2d(self.conv(x) * 2.0, 3, 2, 1, count_include_pad=False)", CONV.format("nn.Conv2d(3, 37, 3)"),
          "torch.randn(2, 3, 45, 67)", "channels_last+fused_pooling+kernel_fusion"),
         ("torch.sigmoid(F.max_pool3d(self.conv(x), 2, 1))", CONV.format("nn.Conv3d(2, 19, 3)"),
          "torch.randn(2, 2, 9, 17, 13)", "channels_last+fused_pooling+kernel_fusion"),
         ("self.conv(x)", DW.format(3, 1), "torch.randn(2, 6, 37, 517)", "depthwise_convolution"),
         ("self.conv(x)", DW.format("(3, 7)", 0), "torch.randn(2, 6, 29, 263)", "depthwise_convolution"),
         ("torch.relu(self.conv(x))", DW.format(3, 0), "torch.randn(2, 6, 19, 101)", "depthwise_convolution+kernel_fusion")]
for body, init, inputs, tech in cases:
    src = problem(body, init, inputs)
    ref = load(src)
    torch.manual_seed(0)
    x = [t.cuda() for t in ref.get_inputs()]
    torch.manual_seed(1)
    want = ref.Model().cuda()(*x)
    cand = build_candidate(src, tech.split("+"), {})
    torch.manual_seed(1)
    model = load(cand.source).ModelNew().cuda()
    for call in range(2):
        got = model(*x)
        torch.cuda.synchronize()
        print(tech, body, inputs, "call", call, cand.params,
              "ok" if torch.allclose(got, want, atol=1e-3, rtol=1e-3) else "WRONG", flush=True)
