"""Where no sandbox works, untrusted candidates (a file given to `kskill review`, the LLM brain's
code) are refused before anything runs, unless --unsafe-no-sandbox says otherwise; the recipe
brain's own code still runs. "No sandbox" is made by offering kskill no sandbox tool."""

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kskill.agents.brains import RecipeBrain
from kskill.agents.reviewer import SandboxUnavailable, sandbox
from kskill.cli import cli
from kskill.config import load_settings
from kskill.run_state import LoopConfig
from kskill.session import build_deps

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
"""
CANDIDATE = """import pathlib

import torch.nn as nn

pathlib.Path({marker!r}).write_text("ran")


class ModelNew(nn.Module):
    def forward(self, x):
        return x + 1
"""


@pytest.fixture
def no_sandbox(monkeypatch):
    monkeypatch.setattr(sandbox, "BACKENDS", ())
    sandbox.choose_sandbox.cache_clear()
    yield
    sandbox.choose_sandbox.cache_clear()


def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    problem, candidate, marker = tmp_path / "problem.py", tmp_path / "candidate.py", tmp_path / "ran"
    problem.write_text(PROBLEM)
    candidate.write_text(CANDIDATE.format(marker=str(marker)))
    return problem, candidate, marker


def test_review_refuses_a_candidate_without_a_sandbox(no_sandbox, tmp_path):
    problem, candidate, marker = files(tmp_path)
    result = CliRunner().invoke(cli, ["review", str(problem), str(candidate), "--device", "cpu", "--no-timing"])
    assert isinstance(result.exception, SandboxUnavailable)
    assert "--unsafe-no-sandbox" in str(result.exception) and "no sandbox works" in str(result.exception)
    assert not marker.exists()


def test_review_runs_it_with_unsafe_no_sandbox_and_says_so(no_sandbox, tmp_path):
    problem, candidate, marker = files(tmp_path)
    result = CliRunner().invoke(cli, ["review", str(problem), str(candidate), "--device", "cpu", "--no-timing",
                                      "--trials", "1", "--unsafe-no-sandbox"])
    assert result.exit_code == 0, result.output
    assert marker.read_text() == "ran"
    assert "no sandbox: the candidate ran with your privileges" in result.output


def test_the_llm_brain_needs_a_sandbox_or_the_flag_and_the_recipe_brain_does_not(no_sandbox, store):
    settings = load_settings()
    llm = LoopConfig(brain="llm", retrieval="off", device="cpu")
    brain = RecipeBrain()  # stands in for the LLM's client: the config's brain decides the trust
    with pytest.raises(SandboxUnavailable):
        build_deps(store, settings, llm, brain=brain)
    build_deps(store, settings, llm, brain=brain, unsafe_no_sandbox=True)
    build_deps(store, settings, LoopConfig(retrieval="off", device="cpu"))


def test_recipe_runs_carry_compiled_kernels_between_batches_and_llm_runs_do_not(store):
    """The recipe brain's code is kskill's own: its batches share a kernel cache. An LLM's candidates
    could plant a kernel for a later one, so theirs do not; nor does the re-timing at the end."""
    settings = load_settings()
    recipes = build_deps(store, settings, LoopConfig(retrieval="off", device="cpu"))
    cache = recipes.review_batch.keywords["options"].kernel_cache
    assert cache and Path(cache).is_dir()
    assert recipes.confirm_batch.keywords["options"].kernel_cache is None
    llm = build_deps(store, settings, LoopConfig(brain="llm", retrieval="off", device="cpu"), brain=RecipeBrain(),
                     unsafe_no_sandbox=True)
    assert llm.review_batch.keywords["options"].kernel_cache is None
    shutil.rmtree(cache)  # a run removes it at its end; these deps run nothing
