"""compute-sanitizer memcheck over this session's group norm that reads its adopted convolution channels-last, at odd
sizes, in every row form (a row in registers, the two-read loop, split rows, one row, two rows and pipelined rows a
program), 2-d and 3-d, with a prologue, a per-channel epilogue operand and a residual read of the product; each
candidate launched twice and compared with PyTorch. The convolutions run in TF32 on cuDNN (PyTorch's default) in
both layouts, so results are compared at 1e-3."""
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


INIT = ("    def __init__(self):\n        super().__init__()\n        self.conv = {conv}\n"
        "        self.gn = nn.GroupNorm({groups}, {c})\n        self.scale = nn.Parameter(torch.randn({c}, {ones}))\n")
TECH = ["channels_last", "fused_normalization", "kernel_fusion"]
cases = [("nn.Conv2d(3, 20, 3)", 5, "1, 1", "torch.randn(3, 3, 13, 17)", "torch.relu(self.gn(F.gelu(self.conv(x))) * self.scale)", {}),
         ("nn.ConvTranspose2d(3, 24, 3, stride=2)", 3, "1, 1", "torch.randn(2, 3, 47, 45)", "self.gn(self.conv(x)) * self.scale", {}),
         ("nn.ConvTranspose2d(3, 24, 3, stride=2)", 3, "1, 1", "torch.randn(2, 3, 47, 45)", "self.gn(self.conv(x))", {"group": 2}),
         ("nn.ConvTranspose2d(3, 24, 3, stride=2)", 3, "1, 1", "torch.randn(2, 3, 47, 45)", "self.gn(self.conv(x))",
          {"pipeline": True, "pipe_chunk": 1024}),
         ("nn.Conv2d(3, 16, 3)", 2, "1, 1", "torch.randn(2, 3, 61, 59)", "self.gn(torch.tanh(self.conv(x)))", {"row_exchange": False}),
         ("nn.Conv2d(3, 16, 3)", 2, "1, 1", "torch.randn(2, 3, 61, 59)", "self.gn(self.conv(x))",
          {"launch": {"_norm_0": {"SPLIT": 3, "BLOCK_R": 1024}}}),
         ("nn.Conv3d(2, 12, 3)", 3, "1, 1, 1", "torch.randn(2, 2, 9, 11, 13)", "self.gn(self.conv(x)) * self.scale", {}),
         ("nn.Conv2d(3, 16, 3)", 4, "1, 1", "torch.randn(2, 3, 37, 41)",
          "(lambda c: torch.logsumexp(c + F.hardswish(torch.tanh(self.gn(c))), dim=1, keepdim=True))(self.conv(x))", {})]
for conv, groups, ones, inputs, body, params in cases:
    c = int(conv.split(", ")[1])
    src = problem(body, INIT.format(conv=conv, groups=groups, c=c, ones=ones), inputs)
    ref = load(src)
    torch.manual_seed(0)
    x = [t.cuda() for t in ref.get_inputs()]
    torch.manual_seed(1)
    want = ref.Model().cuda()(*x)
    cand = build_candidate(src, TECH, params)
    assert "offs_in" in cand.source, f"{conv} {params}: not read channels-last"
    torch.manual_seed(1)
    model = load(cand.source).ModelNew().cuda()
    for call in range(2):
        got = model(*x)
        torch.cuda.synchronize()
        print(conv, groups, inputs, body[:40], "call", call, cand.params,
              "ok" if torch.allclose(got, want, atol=1e-3, rtol=1e-3) else "WRONG", flush=True)
