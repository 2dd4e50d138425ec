"""The `-m llm` tier: kskill against a real OpenAI-compatible server (llama.cpp serving Gemma 3
270M on loopback, one per session). The small model writes poor code and poor JSON: what is
checked is that kskill runs end to end, classifies every failure, and accounts for every token."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import kskill
from kskill.agents.brains import (
    ENDPOINT_FAILURES, REPLY_FAILURES, ChatEndpoint, Draft, OptimizeTask, PromptBudget, RecipeBrain, SeedTask,
    TrajectoryStep, open_client, prompts)
from kskill.cli import cli
from kskill.eval.llm_replies import summarise, survey
from kskill.ingest.extract_llm import ANSWER_FAILURES

pytestmark = [pytest.mark.llm, pytest.mark.timeout(900)]  # a hang fails, it does not stall CI

EXAMPLE = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
CLASSIFIED = {"usable", *REPLY_FAILURES, *ENDPOINT_FAILURES, *ANSWER_FAILURES, "prompt_too_long"}


def test_the_prompt_budget_errs_high_against_the_real_tokenizer(llm_server):
    """The server's own count of a real optimize prompt (recipe code, playbook, trajectory) stays
    under the budget's estimate, so a prompt that fits the budget fits the context."""
    source = EXAMPLE.read_text()
    parent = RecipeBrain().seed(SeedTask(source, "pointwise_chain"))
    task = OptimizeTask(source, "pointwise_chain", Draft(parent.source, parent.techniques), "kernel_fusion",
                        "memory_bandwidth", "memory_bandwidth matched; kernel_fusion ranked first",
                        "Compute the chain in one kernel.", ('"fusing pointwise operations" (GPU MODE, p. 17)',),
                        (TrajectoryStep(1, "seed", None, "verified", 1.02),), "passed on cpu")
    budget = PromptBudget(max_tokens=3000)
    messages = prompts.optimize_messages(task, budget)
    env = llm_server.environment()
    endpoint = ChatEndpoint(open_client(env["OPENAI_BASE_URL"], "local", timeout_s=120), env["KSKILL_LLM_MODEL"],
                            max_reply_tokens=1)
    reply = endpoint.complete(messages)
    assert 0 < reply.usage.prompt_tokens <= budget.tokens_of(messages) <= budget.max_tokens
    assert reply.usage.completion_tokens <= 1 and reply.truncated


def _cli(args: list[str], codes: tuple[int, ...] = (0,)) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code in codes, result.output
    return result.exit_code, json.loads(result.stdout)


def test_optimize_runs_end_to_end_and_a_re_run_hits_the_response_cache(llm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("KSKILL_HOME", str(tmp_path / "home"))
    args = ["optimize", str(EXAMPLE), "--brain", "llm", "--iterations", "2", "--trials", "1", "--device", "cpu",
            "--retrieval", "lexical", "--json"]
    try:
        _, first = _cli([*args, "--out", str(tmp_path / "first")])
        _, second = _cli([*args, "--out", str(tmp_path / "second")])
    finally:
        CliRunner().invoke(cli, ["graph", "stop"])
    for run in (first, second):
        assert run["stop_reason"] and run["reviewed"] >= 1
        assert run["usage"]["calls"] >= 1
        by_agent = run["usage_by_agent"]
        assert sum(u["tokens"] for u in by_agent.values()) == run["usage"]["prompt_tokens"] + run["usage"][
            "completion_tokens"]
        assert by_agent["generator"]["calls"] == 1  # the seed's one call
        for row in run["trajectory"]:
            if row["fallback"]:  # the small model's reply failed, classified, and the recipe brain stood in
                assert row["fallback"]["brain"] == "recipes" and row["fallback"]["reason"] in CLASSIFIED
            if row["status"] == "no_code":
                assert any(reason in row["failure"] for reason in REPLY_FAILURES.values()) or row["failure"]
        report = Path(run["report"]).read_text()
        assert "## LLM usage" in report and "| generator |" in report
    # the seed prompt depends on the problem alone: the re-run's seed comes from the cache
    assert first["usage"]["cached"] == 0 and second["usage"]["cached"] >= 1
    assert second["usage_by_agent"]["generator"]["cached"] == 1
    assert second["usage_by_agent"]["generator"]["tokens"] == 0


def test_ingest_runs_end_to_end(llm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("KSKILL_HOME", str(tmp_path / "home"))
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(FIXTURES / "stream_k_note.md", papers)  # a structured note: parsed exactly, no LLM call
    (papers / "fusion.md").write_text(
        "# Fusion\n\nFusing a chain of pointwise operations into one kernel removes the DRAM round trips "
        "between them when the kernel is memory-bound. It needs the ops to have a single consumer.\n")
    try:
        # ingest exits 1 when a file failed: the small model's JSON may fail, the table still comes
        code, report = _cli(["ingest", str(papers), "--brain", "llm", "--lexical", "--json"], codes=(0, 1))
    finally:
        CliRunner().invoke(cli, ["graph", "stop"])
    files = {Path(f["path"]).name: f for f in report["files"]}
    assert files["stream_k_note.md"]["status"] == "ingested"
    free_text = files["fusion.md"]
    assert free_text["status"] in ("ingested", "failed")
    assert code == (1 if free_text["status"] == "failed" else 0)
    if free_text["status"] == "failed":  # the small model's JSON failed, and says how
        assert any(f"({reason})" in free_text["reason"] for reason in CLASSIFIED)
    usage = report["llm_usage"]
    assert usage["calls"] == 1 and usage["prompt_tokens"] > 0


def test_real_replies_end_classified_with_no_crash_and_no_hang(llm_server, llm_env, tmp_path):
    outcomes = survey(llm_server.environment(), tmp_path / "home", 4, review=False,
                      reply_tokens=int(llm_env["KSKILL_LLM_REPLY_TOKENS"]),
                      context_tokens=llm_server.context_tokens)
    summary = summarise(outcomes)
    assert summary["replies"] == 4 and summary["crashes"] == 0 and summary["hangs"] == 0
    assert set(summary["outcomes"]) <= CLASSIFIED, summary
    assert {o.task for o in outcomes} >= {"seed", "optimize", "repair", "extract"}
