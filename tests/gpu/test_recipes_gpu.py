"""Recipe-brain candidates on a real GPU: every suite problem, full technique sequence, fp32 1e-4."""

import importlib.util
from pathlib import Path

import pytest
import torch

from kskill.agents.recipes import applicable, build_candidate

pytestmark = pytest.mark.gpu
SUITE = sorted((Path(__file__).parents[2] / "eval" / "problems").glob("[0-9]*.py"))
ORDER = ["algebraic_simplification", "flash_attention", "gemm_epilogue_fusion", "online_softmax",
         "fused_normalization", "triton_reduction", "fused_scan", "fused_pooling", "fused_loss",
         "kernel_fusion", "vectorized_access", "cuda_graph"]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("path", SUITE, ids=[p.stem for p in SUITE])
def test_suite_candidate_matches_reference(path, tmp_path):
    source = path.read_text()
    techniques = [t for t in ORDER if applicable(source, t).ok]
    cand = build_candidate(source, techniques)
    file = tmp_path / f"cand_{path.stem}.py"
    file.write_text(cand.source)  # triton.jit needs the kernels in a real file on the GPU
    problem, module = _load(path, f"p_{path.stem}"), _load(file, f"c_{path.stem}")
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    torch.manual_seed(0)
    new = module.ModelNew(*problem.get_init_inputs()).cuda()
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        with torch.no_grad():
            expected, got = ref(*inputs), new(*inputs)
        if expected.dtype.is_floating_point:
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
        else:
            assert torch.equal(got, expected)
    for (name, a), (_, b) in zip(ref.named_buffers(), new.named_buffers()):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5, msg=f"buffer {name}")
