"""compute-sanitizer memcheck over the pipelined exchange form (chunks of 2048 and 8192) at odd sizes, and a
fused group norm whose per-channel operands are indexed from the row; each launched three times (every row
a lane, then the reckoned lanes)."""
import importlib.util, tempfile, torch
from kskill.agents.recipes.builder import build_candidate

def problem(body, init, inputs):
    return ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n" + init +
            f"    def forward(self, x):\n        return {body}\n\ndef get_inputs():\n    return [{inputs}]\n\n"
            "def get_init_inputs():\n    return []\n")

def load(src):
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(src); f.close()
    spec = importlib.util.spec_from_file_location("cand", f.name); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m

NORM = "    def __init__(self):\n        super().__init__()\n        self.n = {}\n"
cases = [("torch.softmax(x, dim=-1)", "", "torch.randn(8, 20001)", "online_softmax"),
         ("torch.log_softmax(x, dim=-1)", "", "torch.randn(12, 30011)", "online_softmax"),
         ("self.n(x)", NORM.format("nn.InstanceNorm2d(4)"), "torch.randn(2, 4, 97, 131)", "fused_normalization"),
         ("self.n(x)", NORM.format("nn.LayerNorm((5, 4001))"), "torch.randn(4, 5, 4001)", "fused_normalization"),
         ("self.n(x + self.b) * self.s", NORM.format("nn.GroupNorm(3, 6)") +
          "        self.b = nn.Parameter(torch.randn(6, 1, 1))\n        self.s = nn.Parameter(torch.randn(6, 1, 1))\n",
          "torch.randn(5, 6, 131, 257)", "fused_normalization+kernel_fusion")]
for body, init, inputs, tech in cases:
    src = problem(body, init, inputs)
    ref = load(src)
    torch.manual_seed(0)
    x = [t.cuda() for t in ref.get_inputs()]
    torch.manual_seed(1)  # the same parameters in the reference and each candidate (ModelNew subclasses Model)
    want = ref.Model().cuda()(*x)
    for params in ({"pipeline": True}, {"pipeline": True, "pipe_chunk": 8192}):
        cand = build_candidate(src, tech.split('+'), params)
        torch.manual_seed(1)
        model = load(cand.source).ModelNew().cuda()
        for call in range(3):
            got = model(*x)
            torch.cuda.synchronize()
            print(tech, inputs, params, "call", call, cand.params,
                  "ok" if torch.allclose(got, want, atol=1e-4, rtol=1e-4) else "WRONG", flush=True)
