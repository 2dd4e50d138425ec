"""Development check (not a product figure): are the channels-last group norm's differences on the GPU cuDNN's
TF32 rounding or an error of the walk? Session 44's first call found level2/85 (channels-last candidates, ok=False
at 1e-4) and sani43.py's 3-d case (WRONG at 1e-3) off on the H200, though both match in Triton's interpreter.
Each case is compared with PyTorch with cuDNN's TF32 on (PyTorch's default) and off, for the group norm read
channels-last and, as the control, read NCHW after the same channels-last convolution (MIN_RUN_BYTES lifted).
Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh:
python3 -P eval/runs/push-h200-s44/tf32_check.py"""
import importlib.util, tempfile
import torch
from kskill.agents.recipes import fused_normalization
from kskill.agents.recipes.builder import build_candidate

SANI_3D = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.conv = nn.Conv3d(2, 12, 3)\n        self.gn = nn.GroupNorm(3, 12)\n"
           "        self.scale = nn.Parameter(torch.randn(12, 1, 1, 1))\n    def forward(self, x):\n"
           "        return self.gn(self.conv(x)) * self.scale\n\ndef get_inputs():\n    return [torch.randn(2, 2, 9, 11, 13)]\n\n"
           "def get_init_inputs():\n    return []\n")
CASES = [("sani43 3-d", SANI_3D, ["fused_normalization", "kernel_fusion"]),
         ("level2/85", open(".kb/level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py").read(),
          ["fused_normalization", "kernel_fusion", "fused_pooling"])]


def load(src, name):
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(src); f.close()
    spec = importlib.util.spec_from_file_location(name, f.name); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m


for label, src, techniques in CASES:
    ref_mod = load(src, "ref")
    x = [t.cuda() for t in ref_mod.get_inputs()]
    for read in ("channels-last", "nchw"):
        fused_normalization.MIN_RUN_BYTES = 8 if read == "channels-last" else 1 << 30
        cand = build_candidate(src, techniques + ["channels_last"], {})
        mod = load(cand.source, f"c_{read.replace('-', '_')}")
        for tf32 in (True, False):
            torch.backends.cudnn.allow_tf32 = tf32
            torch.manual_seed(0)
            ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
            torch.manual_seed(0)
            new = mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
            with torch.no_grad():
                want, got = ref(*x), new(*x)
            diff = (got - want).abs().max().item()
            print(f"{label:12s} norm read {read:13s} offs_in={'offs_in' in cand.source!s:5s} cudnn tf32={tf32!s:5s} "
                  f"max |diff| {diff:.2e} ok at 1e-4 {torch.allclose(got, want, atol=1e-4, rtol=1e-4)}", flush=True)
