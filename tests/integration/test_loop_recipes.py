"""The closed loop end to end on the CPU (Triton interpreter), on a real embedded graph:
recipe brain on three bundled problems, and the LLM brain through a scripted fake endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import kskill
from kskill.agents.brains import LlmBrain, RetryPolicy
from kskill.agents.reviewer import ReviewOptions, review
from kskill.audit import audit_run, render_text
from kskill.audit_html import render_html
from kskill.config import load_settings
from kskill.graph_schema import queries
from kskill.report import verdict
from kskill.run_state import LoopConfig
from kskill.session import start
from kskill.trajectory import Trajectory

pytestmark = pytest.mark.slow  # whole runs of the loop, a real review per candidate

EXAMPLES = Path(kskill.__file__).parent / "examples"
FAST = {"iterations": 4, "trials": 1, "cpu_timing_reps": 2, "retrieval": "lexical", "device": "cpu"}


def _edge(store, bottleneck: str, technique: str) -> dict:
    rows = store.run(queries.all_edges("ADDRESSED_BY"), {"skip": 0, "limit": 100000})
    return next(r["props"] for r in rows if r["start"] == bottleneck and r["end"] == technique)


@pytest.mark.parametrize("name, technique", [
    ("pointwise_chain", "kernel_fusion"), ("softmax_rows", "online_softmax"),
    ("diag_scale_matmul", "algebraic_simplification")])
def test_recipe_loop_end_to_end(store, tmp_path, name, technique):
    problem = EXAMPLES / f"{name}.py"
    learn = "always" if name == "diag_scale_matmul" else "auto"
    edge_before = _edge(store, "redundant_work", "algebraic_simplification") if learn == "always" else None
    state = start(store, load_settings(), problem, LoopConfig(**FAST, learn=learn), tmp_path / "run")

    # a correct result: model_new.py passes an independent review, and the report says what it is
    model = (state.out_dir / "model_new.py").read_text()
    assert review(problem, model, ReviewOptions(trials=2, timing=False, device="cpu")).passed
    best = state.best()
    assert model == best.source
    report = (state.out_dir / "report.md").read_text()
    assert verdict(state) in report and "| # | kind | parent |" in report
    if best.kind == "reference":
        assert "no candidate beat the reference" in report and model.endswith("ModelNew = Model\n")
    assert (state.out_dir / "speedup.png").stat().st_size > 1000

    # the trajectory is in the graph, attempt by attempt, and matches the files
    rows = Trajectory(store).attempts(state.run_id)
    assert [r["n"] for r in rows] == sorted(state.attempts) and len(rows) >= 3
    assert Trajectory(store).run(state.run_id)["status"] == "finished"
    hashes = [r["attempt"]["code_hash"] for r in rows]
    assert len(hashes) == len(set(hashes)), "no two identical attempts in one run"
    for r in rows[1:]:
        assert r["parent"] is not None and r["attempt"]["status"] != "pending"
        folder = state.attempt_dir(r["n"])
        assert (folder / "candidate.py").is_file() and json.loads((folder / "review.json").read_text())["problem"]
    planned = [r for r in rows if r["attempt"]["kind"] == "optimize"]
    assert planned and all(r["decision"] and r["applied"] == [r["selected"]] for r in planned)
    assert planned[0]["selected"] == technique

    # the audit explains the first planned attempt with the evidence behind its technique
    audit = audit_run(store, state.run_id, attempt=planned[0]["n"])
    text = render_text(audit)
    quote = store.run(queries.NODE_EVIDENCE, {"id": technique})[0]["quote"]
    assert f"selected: {technique}" in text and " ".join(quote.split())[:60] in text
    assert "conditions matched -> bottleneck" in text and "rejected (" in text
    assert f":param attempt => '{planned[0]['attempt']['id']}'" in text
    html = render_html(audit)
    assert html.count('class="graph"') == 1 and f"selected: {technique}" in html and "<blockquote>" in html

    if edge_before is not None:  # learn=always: the outcome reached the ADDRESSED_BY prior
        after = _edge(store, "redundant_work", "algebraic_simplification")
        assert after["trials"] == edge_before.get("trials", 0) + 1


# --- the LLM brain through the loop, against a scripted endpoint ---------------------------------

SEED_OK = """import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        z = F.gelu(x + y)
        return torch.sigmoid(torch.tanh(z) * 2.0 + 1.0) - 0.5
"""
BROKEN = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        # {note}
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


class Endpoint:
    """A fake OpenAI-compatible endpoint: replies (or errors) queued per kind of prompt."""

    def __init__(self, **queues):
        self.queues = queues
        self.calls: list[str] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model, messages, **kwargs):
        user = messages[-1]["content"]
        kind = ("seed" if user.startswith("Write a first") else "optimize" if user.startswith("Apply ONE")
                else "repair")
        self.calls.append(kind)
        item = self.queues[kind].pop(0)
        if isinstance(item, BaseException):
            raise item
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=item))],
                               usage=SimpleNamespace(prompt_tokens=1000, completion_tokens=200))


def test_llm_loop_with_rate_limit_prose_and_the_same_failure_twice(store, tmp_path):
    endpoint = Endpoint(
        seed=[f"Here is a straightforward version:\n```python\n{SEED_OK}```\nIt matches the reference."],
        optimize=[TimeoutError("read timed out"),
                  f"Fused:\n```python\n{BROKEN.format(note='fused')}```\nand a usage example:\n```python\nModelNew()\n```"],
        repair=[f"Fixed the mask:\n```python\n{BROKEN.format(note='masked')}```"])
    slept: list[float] = []
    brain = LlmBrain(endpoint, "fake-model", cache_dir=tmp_path / "cache", sleep=slept.append,
                     retry=RetryPolicy(attempts=3, base_delay_s=0.01))
    config = LoopConfig(**{**FAST, "iterations": 6}, brain="llm", max_repairs=3)
    state = start(store, load_settings(), EXAMPLES / "pointwise_chain.py", config, tmp_path / "run", brain=brain)

    assert endpoint.calls == ["seed", "optimize", "optimize", "repair"] and len(slept) == 1
    kinds = [(a.kind, a.status) for a in sorted(state.attempts.values(), key=lambda a: a.n)]
    assert kinds == [("reference", "verified"), ("seed", "verified"), ("optimize", "runtime"), ("repair", "runtime")]
    assert state.attempts[2].technique == "kernel_fusion"
    rows = {r["n"]: r for r in Trajectory(store).attempts(state.run_id)}
    assert rows[2]["failure_class"] == "runtime" and "fp_illegal_memory_access" in rows[2]["patterns"]
    assert rows[3]["parent"] == 2 and len({r["attempt"]["code_hash"] for r in rows.values()}) == 4
    text = render_text(audit_run(store, state.run_id, attempt=3))
    assert "failure pattern fp_illegal_memory_access" in text
    summary = json.loads((state.out_dir / "run.json").read_text())
    assert summary["usage"]["prompt_tokens"] == 3000 and summary["usage"]["calls"] == 3
    assert json.loads(rows[2]["attempt"]["params"])["usage"]["completion_tokens"] == 200
    assert state.best().n == 1 or state.best().kind == "reference"
