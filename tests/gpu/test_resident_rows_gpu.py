"""Resident-rows kernels (templates/resident.py) on a real GPU: the fused form, with every program waiting
at its row's barrier, runs (no deadlock) and matches the reference at fp32 1e-4."""

import importlib.util

import pytest
import torch

from kskill.agents.recipes import build_candidate

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
CASES = {  # module text, forward body, input shape
    "softmax": ("", "torch.softmax(x, dim=-1)", (300, 200_000)),
    "log_softmax": ("", "F.log_softmax(x * 0.5, dim=1)", (64, 1_000_003)),
    "instance_norm": ("nn.InstanceNorm2d(64, affine=True)", "torch.relu(self.n(x))", (4, 64, 256, 256)),
    "group_norm": ("nn.GroupNorm(8, 64)", "self.n(x)", (8, 64, 128, 128)),
    "layer_norm_few_rows": ("nn.LayerNorm((64, 128, 128))", "self.n(x) * 2.0", (4, 64, 128, 128)),
}


def _module(source: str, path) -> dict:
    """The namespace of a source written to `path` (Triton reads a kernel's source from its file)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


@pytest.mark.parametrize("case", sorted(CASES))
def test_resident_rows_match_the_reference(case, tmp_path):
    module, body, shape = CASES[case]
    init = f"        self.n = {module}\n" if module else ""
    src = (f"{HEADER}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}"
           f"    def forward(self, x):\n        return {body}\n\n"
           f"def get_inputs():\n    return [torch.randn{shape}]\n\ndef get_init_inputs():\n    return []\n")
    cand = build_candidate(src, ["fused_normalization", "online_softmax", "kernel_fusion"])
    assert "_resident_launch(" in cand.source, cand.notes
    ns, ref_ns = _module(cand.source, tmp_path / "candidate.py"), _module(src, tmp_path / "reference.py")
    x = torch.randn(shape, device="cuda") * 3.0 + 1.0
    assert ns["_resident_launch"](x, 10_000, 8)[1] == 3, "the fused form with the barrier runs on this GPU"
    torch.manual_seed(0)
    ref = ref_ns["Model"]().cuda()
    torch.manual_seed(0)
    new = ns["ModelNew"]().cuda()
    with torch.no_grad():
        for _ in range(3):  # repeated calls: the counters start from zero every time
            torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)
    torch.cuda.synchronize()
