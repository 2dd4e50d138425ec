"""Capturing references whose forward branches or loops over sizes: the trace follows the branch the
problem's inputs take (agents/recipes/capture.py, ShapeTracer), so the recipes can work on them."""

import importlib

import pytest
from recipe_support import check, problem

from kskill.agents.recipes.capture import capture
from kskill.agents.recipes.errors import CaptureError

LOOP = ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.cell = nn.Linear(6, 4)\n"
        "    def forward(self, x, h):\n"
        "        steps, batch, _ = x.size()\n"
        "        outs = []\n"
        "        for t in range(steps):\n"
        "            h = torch.tanh(self.cell(torch.cat((x[t], h), dim=1)))\n"
        "            outs.append(h * 2.0)\n"
        "        return torch.stack(outs, dim=0)\n")

BRANCH = ("class Model(nn.Module):\n"
          "    def forward(self, x, mask=None):\n"
          "        b, l, c = x.shape\n"
          "        if l % 2 == 1:\n"
          "            x = x[:, :l - 1]\n"
          "        if mask is not None:\n"
          "            x = x * mask\n"
          "        if int(l) > 100:\n"
          "            return x\n"
          "        return torch.relu(x) + 1.0\n")


def test_a_time_loop_over_a_size_is_unrolled():
    src = problem(LOOP, "[torch.randn(5, 3, 2), torch.randn(3, 4)]")
    graph = capture(src)
    assert sum(n.op == "tanh" for n in graph.nodes) == 5, "one step per time step of these inputs"
    cand = check(src, ["kernel_fusion", "gemm_epilogue_fusion"])
    assert cand.applied


def test_branches_over_sizes_and_a_default_argument_follow_these_inputs():
    src = problem(BRANCH, "[torch.randn(2, 7, 3)]")
    graph = capture(src)
    assert [n.attrs.get("default", "none") for n in graph.inputs()][1] is None
    assert not any(n.op == "mul" for n in graph.nodes if n.op != "input"), "mask is None: its branch is not taken"
    cand = check(src, ["kernel_fusion"])
    assert cand.applied == ["kernel_fusion"]
    assert "=None)" in cand.source.split("class ModelNew")[1].split("\n")[3], "the default stays in the signature"


def test_a_branch_on_a_value_the_trace_cannot_compute_is_still_a_capture_error():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n"
                  "        if x.sum() > 0:\n            return x\n        return -x\n", "[torch.randn(4)]")
    with pytest.raises(CaptureError):
        capture(src)


def test_a_number_made_a_tensor_in_forward_is_filled_on_the_device():
    """torch.tensor(100.0, device=...) copies from host memory, which a CUDA graph cannot capture;
    torch.full gives the same value and dtype with a fill on the device."""
    src = problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.scale = nn.Parameter(torch.ones(3) * 5.0)\n"
                  "    def forward(self, x):\n"
                  "        s = torch.clamp(self.scale, max=torch.log(torch.tensor(1. / 0.01, device=x.device))).exp()\n"
                  "        return x * s + torch.tensor(2)\n", "[torch.randn(4, 3)]")
    cand = check(src, ["kernel_fusion"])
    forward = cand.source.split("class ModelNew")[1]
    assert "torch.full((), 100.0, device=x.device)" in forward and "torch.tensor(" not in forward


def test_a_loop_too_long_to_unroll_is_a_capture_error(monkeypatch):
    capture_module = importlib.import_module("kskill.agents.recipes.capture")  # the module, not its function
    monkeypatch.setattr(capture_module, "MAX_TRACED_NODES", 40)
    capture_module._captured.cache_clear()
    src = problem(LOOP, "[torch.randn(50, 3, 2), torch.randn(3, 4)]")
    with pytest.raises(CaptureError, match="too long to unroll"):
        capture(src)
