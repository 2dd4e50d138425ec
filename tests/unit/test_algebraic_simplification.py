"""algebraic_simplification: diagonal products, double transposes, neutral constants."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("expr", ["torch.diag(a) @ b", "b @ torch.diag(a)", "(b.t().t() * 1.0) + 0.0"])
def test_rewrites(expr):
    src = problem(f"class Model(nn.Module):\n    def forward(self, a, b):\n        return {expr}\n",
                  "[torch.randn(37), torch.randn(37, 37)]")
    cand = check(src, ["algebraic_simplification", "kernel_fusion"])
    assert cand.applied[0] == "algebraic_simplification"
    assert "diag(" not in cand.source.split("class ModelNew")[1]


REDUCED = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(48, 40)
        self.weight = nn.Parameter(torch.randn(40, 48))
        self.offset = nn.Parameter(torch.randn({offset}))
        self.pool = nn.AvgPool1d(6)

    def forward(self, x):
        return {expr}
'''


@pytest.mark.parametrize("expr, offset, reduced", [
    ("((x @ self.weight.T) / 2).sum(dim=1, keepdim=True) * 1.5", "40", "getattr_1.sum(1, keepdim=True)"),
    ("(self.fc(x) * 3.0 - self.offset).mean(dim=-1)", "40", "self.fc.weight.mean(0, keepdim=True)"),
    ("(2.0 + self.fc(x) + self.offset).sum(-1, keepdim=True)", "1, 40", "self.fc.bias.sum(0, keepdim=True)"),  # value second
    ("torch.sum(self.fc(x) - self.offset, dim=2)", "1", "self.fc.weight.sum(0, keepdim=True)"),   # 3-d input, one value
    ("(self.fc(x) * self.offset / self.offset).sum(dim=1)", "1", "self.fc.weight.sum(0, keepdim=True)"),  # factors
    ("(self.fc(x) + self.offset.sum()).mean(dim=1)", "3", "self.fc.weight.mean(0, keepdim=True)"),  # a 0-d offset
    ("(self.fc(x) * 1.0 - 0.5).sum(dim=1)", "1", "self.fc.weight.sum(0, keepdim=True)"),  # a neutral factor inside
    ("F.avg_pool1d(self.fc(x).unsqueeze(1), 4).squeeze(1) * 2.0", "1", "self.fc.weight.reshape(10, 4, -1).mean(1)"),
    ("self.pool(x @ self.weight.T)", "1", "getattr_1[:, :36].reshape(-1, 6, 6).mean(2)"),  # 40 in windows of 6
])
def test_a_reduction_over_a_linear_maps_features_reduces_the_weight_first(expr, offset, reduced):
    """sum_j (x W^T + b)_j = x (sum_j W_j) + sum_j b_j, through scalar factors and per-feature offsets: a
    matrix-vector product in place of the GEMM, the weight reduced in forward (it may change between calls)."""
    shape = "(3, 5, 48)" if "dim=2" in expr or "pool(" in expr else "(6, 48)"
    src = problem(REDUCED.format(offset=offset, expr=expr), f"[torch.randn{shape}]")
    cand = check(src, ["algebraic_simplification"])
    forward = cand.source.split("def forward")[-1]
    assert cand.applied == ["algebraic_simplification"] and reduced in forward
    assert "self.fc(x)" not in forward and "x @ " not in forward and "torch.matmul(x, self.weight" not in forward


@pytest.mark.parametrize("expr", [
    "(x @ self.weight.T).sum(dim=0)",                              # over the batch, not the features
    "torch.sigmoid(self.fc(x)).sum(dim=1)",                        # not linear
    "(self.fc(x) * self.offset).sum(dim=1)",                       # a per-feature factor
    "(lambda y: y.sum(dim=1, keepdim=True) + y[:, :1])(self.fc(x))",  # the product used twice
    "F.avg_pool1d(self.fc(x).unsqueeze(1), 4, stride=2).squeeze(1)",  # windows that overlap
    "F.avg_pool1d(self.fc(x).unsqueeze(1), 4, padding=1).squeeze(1)",  # padding
])
def test_a_reduction_the_identity_does_not_cover_keeps_the_product(expr):
    src = problem(REDUCED.format(offset="40", expr=expr), "[torch.randn(6, 48)]")
    cand = check(src, ["algebraic_simplification", "kernel_fusion"])
    assert "algebraic_simplification" not in cand.applied and ".sum(0)" not in cand.source
