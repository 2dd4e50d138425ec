"""Shared helpers of the recipe-brain tests: build a candidate and compare it with its reference.

Generated kernels run on CPU tensors through Triton's interpreter (TRITON_INTERPRET=1 is set
before any candidate is executed), over small odd shapes with fp32 tolerances.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

from kskill.agents.recipes import build_candidate  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def problem(model: str, inputs: str, init: str = "[]") -> str:
    """A KernelBench-format problem source from a Model class text and input expressions."""
    return f"{HEADER}{model}\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n"


def load(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<generated>", "exec"), namespace)
    return namespace


def check(source: str, techniques: list[str], params: dict | None = None, trials: int = 2,
          compare_buffers: bool = False):
    """Build the candidate, run it and the reference on fresh inputs, assert they agree."""
    cand = build_candidate(source, techniques, params)
    ref_ns, new_ns = load(source), load(cand.source)
    torch.manual_seed(0)
    ref = ref_ns["Model"](*ref_ns["get_init_inputs"]())
    torch.manual_seed(0)
    new = new_ns["ModelNew"](*ref_ns["get_init_inputs"]())
    for trial in range(trials):
        torch.manual_seed(100 + trial)
        inputs = ref_ns["get_inputs"]()
        with torch.no_grad():
            expected, got = ref(*inputs), new(*inputs)
        assert_close(expected, got)
    if compare_buffers:
        for (name, a), (_, b) in zip(ref.named_buffers(), new.named_buffers()):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5, msg=f"buffer {name} differs")
    return cand


def assert_close(expected, got) -> None:
    if isinstance(expected, torch.Tensor):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        if expected.dtype.is_floating_point:
            tol = TOL[expected.dtype]
            torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
        else:
            assert torch.equal(got, expected)
        return
    for a, b in zip(expected, got):
        assert_close(a, b)
