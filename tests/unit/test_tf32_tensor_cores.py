"""tf32_tensor_cores: applied only where the error analysis fits the tolerance."""

from recipe_support import check, problem

from kskill.agents.recipes import applicable

MM = "class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"


def test_declined_at_fp32_tolerance():
    src = problem(MM, "[torch.randn(5, 7), torch.randn(7, 3)]")
    verdict = applicable(src, "tf32_tensor_cores")
    assert not verdict.ok and "rtol" in verdict.reason
    assert check(src, ["tf32_tensor_cores"]).applied == []


def test_applied_at_loose_tolerance():
    src = problem(MM, "[torch.randn(5, 7), torch.randn(7, 3)]")
    cand = check(src, ["tf32_tensor_cores"], {"rtol": 1e-2})
    assert cand.applied == ["tf32_tensor_cores"] and "with _tf32_matmuls():" in cand.source
