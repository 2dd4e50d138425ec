"""Every candidate the recipe brain writes passes KernelBench's static rules for a Triton backend
(agents/reviewer/backend_rules.py): no `pass` or try/except in the text, no timing patches, no
threads, no tensor subclasses. A candidate that holds Triton kernels is accepted outright; one
made of framework switches alone (a CUDA graph, TF32) has no Triton kernel, which KernelBench's
Triton backend reports as `no_triton_kernel`, and must break no other rule.

The candidates are built (not run) for every bundled example and every problem of the recipe
suite, each technique the brain can apply on its own and the whole stack together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.agents.recipes import RECIPES, applicable, build_candidate
from kskill.agents.reviewer.backend_rules import check_triton_backend

ROOT = Path(__file__).parents[2]
PROBLEMS = sorted((ROOT / "kskill" / "examples").glob("[a-z]*.py")) + sorted((ROOT / "eval" / "problems").glob("[0-9]*.py"))


def _verdict_errors(source: str) -> list[str]:
    verdict = check_triton_backend(source)
    has_kernel = "@triton.jit" in source
    return [str(e) for e in verdict.errors if has_kernel or e.rule != "no_triton_kernel"]


@pytest.mark.parametrize("path", PROBLEMS, ids=[f"{p.parent.name}/{p.stem}" for p in PROBLEMS])
def test_every_candidate_passes_kernelbench_static_rules(path: Path):
    source = path.read_text(encoding="utf-8")
    usable = [t for t in RECIPES if applicable(source, t).ok]
    candidates = {"seed": build_candidate(source, []).source}
    for technique in usable:
        candidates[technique] = build_candidate(source, [technique]).source
    # the whole stack, with the fusion that picks up what a rewrite turned into pointwise work
    candidates["all"] = build_candidate(source, [*usable, "kernel_fusion"]).source
    failures = {name: errs for name, text in candidates.items() if (errs := _verdict_errors(text))}
    assert not failures, failures
    assert any("@triton.jit" in text for text in candidates.values()) or not usable


def test_reference_docstrings_are_not_copied_into_the_candidate():
    source = ('import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n'
              '    """A model; its forward pass adds one."""\n\n'
              '    def forward(self, x):\n        """Forward pass."""\n        return x + 1\n\n\n'
              'def get_inputs():\n    return [torch.randn(4)]\n\n\ndef get_init_inputs():\n    return []\n')
    text = build_candidate(source, ["kernel_fusion"]).source
    assert "Forward pass" not in text and "forward pass" not in text
    assert check_triton_backend(text).passed, check_triton_backend(text).errors
