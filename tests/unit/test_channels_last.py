"""channels_last: conv regions and their epilogues run in NHWC memory order."""

from recipe_support import check, problem

CONV = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 2.0
'''


def test_nhwc_epilogue_matches():
    cand = check(problem(CONV, "[torch.randn(2, 3, 7, 9)]"), ["gemm_epilogue_fusion", "channels_last"])
    assert cand.applied == ["gemm_epilogue_fusion", "channels_last"]
    assert "channels_last" in cand.source and ".permute(0, 2, 3, 1)" in cand.source


def test_needs_a_conv_region():
    cand = check(problem("class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n", "[torch.randn(3)]"),
                 ["channels_last"])
    assert cand.applied == []
