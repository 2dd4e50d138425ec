"""KernelBench's static rules for a Triton backend (agents/reviewer/backend_rules.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.agents.reviewer.backend_rules import check_triton_backend, strip_comments

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer" / "candidates"

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(X_ptr, Y_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(Y_ptr + offs, tl.load(X_ptr + offs, mask=offs < n) * 2, mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK_SIZE=1024)
        return y
'''


def rules_of(source: str) -> set[str]:
    return {f.rule for f in check_triton_backend(source).errors}


def test_a_plain_triton_module_passes_and_a_comment_saying_pass_does_not_count():
    verdict = check_triton_backend(KERNEL + "# expect: pass; try: nothing\n")
    assert verdict.passed, verdict.errors
    assert check_triton_backend((FIXTURES / "honest" / "relu_triton.py").read_text()).passed


@pytest.mark.parametrize("extra, rule", [
    ("\ndef fallback(x):\n    try:\n        return x\n    except RuntimeError:\n        return x\n", "bypass"),
    ("\nclass Shell(torch.nn.Module):\n    pass\n", "bypass"),
    ('\ndef doc():\n    """One pass over the rows."""\n', "bypass"),  # KernelBench reads docstrings too
    ("\nimport time\ntime.perf_counter = lambda: 0.0\n", "timing_patch"),
    ("\ntorch.cuda.synchronize = lambda: None\n", "timing_patch"),
    ("\nimport threading\n", "threads"),
    ("\nfrom concurrent.futures import ThreadPoolExecutor\n", "threads"),
    ("\nclass Lazy(torch.Tensor):\n    x = 1\n", "lazy_tensor"),
])
def test_each_error_rule_rejects(extra, rule):
    verdict = check_triton_backend(KERNEL + extra)
    assert not verdict.passed and rule in rules_of(KERNEL + extra)


def test_a_module_without_a_triton_kernel_is_rejected():
    wrap = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    assert rules_of(wrap) == {"no_triton_kernel"}
    decorated_only = "import triton\n\n@triton.jit\ndef k(X):\n    return\n"
    assert rules_of(decorated_only) == {"no_triton_kernel"}


def test_library_calls_and_streams_are_warnings_only():
    source = KERNEL + "\nlayer = torch.nn.Linear(4, 4)\nz = torch.matmul(a, b)\ns = torch.cuda.Stream()\n"
    verdict = check_triton_backend(source)
    assert verdict.passed
    assert {f.rule for f in verdict.warnings} == {"torch_nn_layer", "torch_op", "streams"}
    assert any(f.line == source.split("\n").index("z = torch.matmul(a, b)") + 1 for f in verdict.warnings)


def test_comments_are_cut_as_kernelbench_cuts_them():
    assert strip_comments("x = 1  # try: pass\ny = a // b  # pass") == "x = 1  \ny = a "
    assert not check_triton_backend(KERNEL + "w = 'no # try: here'\n").errors
