"""cuda_graph: the forward is wrapped for graph replay (CPU runs fall back to the plain forward)."""

from recipe_support import check, problem

from kskill.agents.recipes import applicable

MLP = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(7, 9)
        self.b = nn.Linear(9, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
'''


def test_graph_wrapper_emitted_and_cpu_fallback_correct():
    cand = check(problem(MLP, "[torch.randn(5, 7)]"), ["kernel_fusion", "cuda_graph"])
    assert cand.applied == ["kernel_fusion", "cuda_graph"]
    assert "torch.cuda.CUDAGraph()" in cand.source and "_fresh(self._static_output)" in cand.source
    assert "Stream(" not in cand.source


def test_random_ops_block_capture():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return F.dropout(x, 0.5)\n", "[torch.randn(3)]")
    assert not applicable(src, "cuda_graph").ok
