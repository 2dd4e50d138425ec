"""compute-sanitizer memcheck over the stencil templates' vector form (templates/columns.py) at odd sizes: rolled
max and average pooling (2-d and 3-d, strides 1 and 2, padding, dilation) and depthwise convolutions (3 x 3 and
3 x 7, padded and not, ragged last tiles), each launched twice and compared with PyTorch."""
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


NO_INIT = ""
CONV = "    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(6, 6, {}, padding={}, groups=6)\n"
cases = [("F.max_pool2d(x, 4, 1, 1)", NO_INIT, "torch.randn(3, 5, 67, 301)", "fused_pooling"),
         ("F.max_pool2d(torch.relu(x), 3, 2, 1)", NO_INIT, "torch.randn(2, 3, 71, 259)", "fused_pooling"),
         ("F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)", NO_INIT, "torch.randn(2, 3, 45, 133)", "fused_pooling"),
         ("F.max_pool2d(x, 3, 1, 1, dilation=2)", NO_INIT, "torch.randn(2, 3, 40, 150)", "fused_pooling"),
         ("F.avg_pool3d(x, 3, 2, 1)", NO_INIT, "torch.randn(2, 3, 9, 33, 141)", "fused_pooling"),
         ("self.conv(x)", CONV.format(3, 1), "torch.randn(2, 6, 37, 517)", "depthwise_convolution"),
         ("self.conv(x)", CONV.format("(3, 7)", 0), "torch.randn(2, 6, 29, 263)", "depthwise_convolution"),
         ("torch.relu(self.conv(x))", CONV.format(3, 0), "torch.randn(2, 6, 19, 131)", "depthwise_convolution+kernel_fusion")]
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
              "ok" if torch.allclose(got, want, atol=1e-4, rtol=1e-4) else "WRONG", flush=True)
