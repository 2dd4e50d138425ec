"""Tokens and cost per run and per agent, as report.md, run.json and `--json` give them, and the
LLM settings that set prices, context and reply length."""

from __future__ import annotations

from pathlib import Path

import pytest

import kskill
from kskill.agents.brains import Fallback, Usage
from kskill.agents.problem import load_problem
from kskill.config import load_settings
from kskill.graph_schema.errors import ConfigError
from kskill.llm_settings import llm_endpoint, llm_options
from kskill.report import report_markdown, summary
from kskill.run_state import AttemptRecord, LoopConfig, RunState

EXAMPLE = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"


def run_state(tmp_path: Path) -> RunState:
    state = RunState("run-x", load_problem(EXAMPLE), LoopConfig(brain="llm"), tmp_path)
    state.attempts[0] = AttemptRecord(0, "reference", "h0", "ref", status="verified", speedup=1.0)
    state.attempts[1] = AttemptRecord(1, "seed", "h1", "a", parent=0, status="verified", speedup=1.1,
                                      usage=Usage(900, 300, 0.004, calls=1))
    state.attempts[2] = AttemptRecord(2, "optimize", "h2", "b", parent=1, status="verified", speedup=1.3,
                                      usage=Usage(1500, 400, 0.007, calls=1, failed=2),
                                      fallback=Fallback("recipes", "syntax", "the reply's code does not parse", "x"))
    state.attempts[3] = AttemptRecord(3, "repair", "h3", "c", parent=2, status="correctness",
                                      usage=Usage(calls=1, cached=1))
    state.usage = Usage(2400, 700, 0.011, calls=3, cached=1, failed=2) + Usage(100, 0, 0.0005, calls=1)
    return state


def test_usage_is_given_per_agent_and_sums_to_the_run(tmp_path):
    data = summary(run_state(tmp_path))
    agents = data["usage_by_agent"]
    assert agents["generator"]["tokens"] == 1200 and agents["optimizer"]["failed"] == 2
    assert agents["repairer"]["cached"] == 1 and agents["repairer"]["tokens"] == 0
    assert agents["other"] == {"prompt_tokens": 100, "completion_tokens": 0, "cost_usd": pytest.approx(0.0005),
                               "calls": 1, "cached": 0, "failed": 0, "tokens": 100}
    for key in ("prompt_tokens", "completion_tokens", "calls", "cached", "failed"):
        assert sum(a[key] for a in agents.values()) == data["usage"][key]
    assert sum(a["cost_usd"] for a in agents.values()) == pytest.approx(data["usage"]["cost_usd"])
    assert [r["fallback"] for r in data["trajectory"]][2] == {
        "brain": "recipes", "reason": "syntax", "message": "the reply's code does not parse"}


def test_report_has_a_table_per_agent_and_lists_fallbacks(tmp_path):
    state = run_state(tmp_path)
    text = report_markdown(state, summary(state), plotted=False)
    assert "## LLM usage" in text
    assert "| optimizer | 1 | 0 | 2 | 1500 | 400 | 0.0070 |" in text
    assert "- attempt 2 (optimize): recipes wrote it; the LLM failed (syntax)" in text


def test_a_recipe_run_has_no_llm_section(tmp_path):
    state = RunState("run-y", load_problem(EXAMPLE), LoopConfig(), tmp_path)
    state.attempts[0] = AttemptRecord(0, "reference", "h0", "ref", status="verified", speedup=1.0)
    assert "## LLM usage" not in report_markdown(state, summary(state), plotted=False)


def test_llm_settings_have_defaults_and_prices_turn_tokens_into_cost(tmp_path):
    defaults = llm_options(load_settings({"KSKILL_HOME": str(tmp_path)}))
    assert (defaults.context_tokens, defaults.reply_tokens, defaults.timeout_s) == (32768, 8192, 120.0)
    env = {"KSKILL_HOME": str(tmp_path), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "KSKILL_LLM_MODEL": "m",
           "KSKILL_LLM_CONTEXT": "4096", "KSKILL_LLM_REPLY_TOKENS": "512", "KSKILL_LLM_PRICE": "2.5, 10"}
    options = llm_options(load_settings(env))
    assert options.prompt_budget.max_tokens == 3584
    endpoint = llm_endpoint(load_settings(env))
    assert endpoint.max_reply_tokens == 512 and endpoint.cache_dir == tmp_path / "llm-cache"
    assert endpoint.budget.cost(1_000_000, 100_000) == pytest.approx(2.5 + 1.0)


@pytest.mark.parametrize("env, message", [
    ({"KSKILL_LLM_CONTEXT": "lots"}, "KSKILL_LLM_CONTEXT must be a whole number"),
    ({"KSKILL_LLM_CONTEXT": "1024", "KSKILL_LLM_REPLY_TOKENS": "1000"}, "at least 512 tokens for the prompt"),
    ({"KSKILL_LLM_PRICE": "3"}, "KSKILL_LLM_PRICE must be two numbers"),
    ({"KSKILL_LLM_PRICE": "1,x"}, "KSKILL_LLM_PRICE must be a number"),
    ({"KSKILL_LLM_TIMEOUT": "0"}, "KSKILL_LLM_TIMEOUT must be a positive number"),
])
def test_bad_llm_settings_are_one_line_errors_naming_the_variable(tmp_path, env, message):
    with pytest.raises(ConfigError, match=message):
        llm_options(load_settings({"KSKILL_HOME": str(tmp_path), **env}))
