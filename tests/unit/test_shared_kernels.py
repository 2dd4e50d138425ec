"""Kernels written once where units have the same code (agents/recipes/shared_kernels.py)."""

import re

from recipe_support import check, problem

from kskill.agents.recipes.shared_kernels import canonical

KERNEL = '''@triton.jit
def {name}_kernel({x}_ptr, out_ptr, N: tl.constexpr, {block}: tl.constexpr):
    """{doc}"""
    offs = tl.program_id(0) * {block} + tl.arange(0, {block})
    tl.store(out_ptr + offs, tl.load({x}_ptr + offs, mask=offs < N), mask=offs < N)  # {x}
'''


def test_names_pointers_docstrings_and_comments_do_not_make_code_different_but_constexpr_names_do():
    a = canonical(KERNEL.format(name="_relu_0", x="conv_1", block="BLOCK", doc="conv_1's ReLU"))
    b = canonical(KERNEL.format(name="_relu_7", x="features_3_0", block="BLOCK", doc="features_3_0's ReLU"))
    c = canonical(KERNEL.format(name="_relu_7", x="conv_1", block="TILE", doc="conv_1's ReLU"))
    assert a[0] == b[0] and a[1] == ["_relu_0_kernel"] and b[1] == ["_relu_7_kernel"]
    assert a[0] != c[0]  # launchers pass constexprs by keyword: another name is another kernel


def test_repeated_batch_norms_share_each_kernel_and_stay_correct():
    """The statistics and finalize kernels of all three are one code; the apply kernels of the two
    followed by a ReLU (fused into them) are another, the third's a third."""
    model = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.BatchNorm2d(4), nn.BatchNorm2d(4), nn.BatchNorm2d(6)

    def forward(self, x, y):
        return torch.relu(self.b(torch.relu(self.a(x)))), self.c(y)
'''
    cand = check(problem(model, "[torch.randn(2, 4, 5, 5), torch.randn(3, 6, 4, 4)]"),
                 ["fused_normalization", "kernel_fusion"], compare_buffers=True)
    launched = set(re.findall(r"(\w+)\[[^\]]*\]\(", cand.source.split("class ModelNew")[0]))
    defined = re.findall(r"@triton\.jit\ndef (\w+)\(", cand.source)
    assert launched == set(defined) and len(defined) == 4, (defined, sorted(launched))
