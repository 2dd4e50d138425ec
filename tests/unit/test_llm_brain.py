"""The LLM brain against a scripted fake OpenAI-compatible client (no endpoint can be reached here):
code extraction from messy replies, retries with backoff, budgets, the response cache, prompts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import openai
import pytest

try:  # the HTTP library openai's errors carry: httpx, or httpx2 in newer openai releases
    import httpx
except ImportError:
    import httpx2 as httpx

from kskill.agents.brains import (
    REPLY_FAILURES, BrainError, BrainUnavailable, BudgetExhausted, Draft, EndpointRefused, LlmBrain, LlmBudget,
    NoUsableCode, OptimizeTask, RetryPolicy, SeedTask, TrajectoryStep, Usage, extract_code, screen_reply)
import kskill
from kskill.agents.brains import RecipeBrain, prompts

GOOD = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""
REQUEST = httpx.Request("POST", "http://llm.invalid/v1/chat/completions")


def reply(text: str, prompt_tokens: int = 100, completion_tokens: int = 50, finish: str = "stop") -> SimpleNamespace:
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text), finish_reason=finish)],
                           usage=SimpleNamespace(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))


def rate_limited(retry_after: str | None = None) -> openai.RateLimitError:
    headers = {"retry-after": retry_after} if retry_after else {}
    return openai.RateLimitError("rate limited", response=httpx.Response(429, request=REQUEST, headers=headers),
                                 body=None)


def server_error() -> openai.InternalServerError:
    return openai.InternalServerError("overloaded", response=httpx.Response(503, request=REQUEST), body=None)


class ScriptedClient:
    """Answers chat.completions.create from a script: each item is a reply or an exception to raise."""

    def __init__(self, script: list):
        self.script = list(script)
        self.calls: list[dict] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **kwargs):
        self.calls.append(kwargs)
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


def brain(script: list, **kwargs) -> tuple[LlmBrain, ScriptedClient, list[float]]:
    client, slept = ScriptedClient(script), []
    kwargs.setdefault("retry", RetryPolicy(attempts=4, base_delay_s=0.5, max_delay_s=8.0))
    return LlmBrain(client, "test-model", sleep=slept.append, **kwargs), client, slept


SEED = SeedTask(problem_source="class Model: ...", problem_name="p")


# --- code extraction ----------------------------------------------------------------------------

def test_extracts_the_block_after_prose():
    text = f"Sure! Here is a faster version.\n\n```python\n{GOOD}```\n\nIt fuses the ops. Hope this helps."
    assert extract_code(text) == GOOD


def test_prefers_the_last_block_that_defines_modelnew():
    draft = GOOD.replace("relu", "sigmoid")
    text = f"First try:\n```python\n{draft}```\nBetter:\n```python\n{GOOD}```\nUsage:\n```python\nm = ModelNew()\n```"
    assert extract_code(text) == GOOD


def test_joins_blocks_when_kernel_and_module_are_apart():
    kernel = "import torch\n\n\ndef helper(x):\n    return x * 2\n"
    module = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return helper(x)\n"
    code = extract_code(f"The kernel:\n```python\n{kernel}```\nThe module:\n```py\n{module}```")
    assert "def helper" in code and "class ModelNew" in code
    compile(code, "candidate", "exec")


def test_ignores_non_python_blocks():
    text = f"```cuda\n__global__ void k() {{}}\n```\n```\n{GOOD}```"
    assert extract_code(text) == GOOD


def test_code_without_fences_and_trailing_prose():
    text = f"Here you go:\n{GOOD}\nThis version should be about 2x faster because it avoids copies."
    assert extract_code(text) == GOOD


def test_unclosed_fence_from_a_cut_off_reply():
    assert extract_code(f"```python\n{GOOD}") == GOOD


@pytest.mark.parametrize("text, reason, why", [
    ("", "empty", "empty"),
    ("   \n", "empty", "empty"),
    ("I'm sorry, I cannot help with that.", "prose", "no Python code"),
    ("To speed this up, fuse the ops into one Triton kernel and use wider loads.", "prose", "no Python code"),
    ("```python\nclass Model(nn.Module):\n    pass\n```", "wrong_class", "does not define ModelNew"),
    ("```python\nclass FastModel(nn.Module):\n    def forward(self, x):\n        return x\n```", "wrong_class",
     "wrong class name"),
    ("```python\nclass ModelNew(nn.Module:\n    def forward(\n```", "syntax", "does not parse"),
    ("```python\ndef forward(x)\n    return x +\n```", "syntax", "line 1"),
])
def test_no_usable_code_is_classified(text, reason, why):
    with pytest.raises(NoUsableCode, match=why) as caught:
        extract_code(text)
    assert caught.value.failure_class == "no_code" and caught.value.reason == reason
    assert caught.value.reply == text and reason in REPLY_FAILURES


def test_a_torch_compile_shortcut_is_refused_before_review():
    shortcut = GOOD.replace("return torch.relu(x)", "return torch.compile(torch.relu)(x)")
    with pytest.raises(NoUsableCode, match="torch_compile") as caught:
        screen_reply(f"```python\n{shortcut}```")
    assert caught.value.reason == "shortcut"
    assert screen_reply(f"```python\n{GOOD}```") == GOOD


def test_a_reply_cut_at_its_token_limit_is_truncated():
    cut = GOOD[:GOOD.index("def forward") + 20]
    with pytest.raises(NoUsableCode, match="cut off") as caught:
        screen_reply(f"```python\n{cut}", truncated=True)
    assert caught.value.reason == "truncated"
    # a cut-off reply whose code is whole anyway is still usable
    assert screen_reply(f"```python\n{GOOD}", truncated=True) == GOOD


# --- calls: retries, budget, cache ------------------------------------------------------------

def test_rate_limits_are_retried_with_backoff_honouring_retry_after():
    b, client, slept = brain([rate_limited("3"), rate_limited(), reply(f"```python\n{GOOD}```")])
    draft = b.seed(SEED)
    assert draft.source == GOOD and len(client.calls) == 3
    assert slept[0] == 3.0  # Retry-After wins
    assert 1.0 <= slept[1] <= 1.25  # then exponential: 0.5 * 2**1, plus up to 25% jitter
    assert b.used.tokens == 150 and b.used.calls == 1


def test_server_errors_and_timeouts_are_retried():
    b, client, slept = brain([server_error(), openai.APITimeoutError(request=REQUEST), TimeoutError("read"),
                              reply(GOOD)])
    assert b.seed(SEED).source == GOOD
    assert len(client.calls) == 4 and len(slept) == 3
    assert slept == sorted(slept)  # backoff grows


def test_an_endpoint_that_keeps_failing_is_unavailable():
    b, client, slept = brain([rate_limited()] * 4)
    with pytest.raises(BrainUnavailable, match="after 4 calls") as caught:
        b.seed(SEED)
    assert len(client.calls) == 4 and len(slept) == 3
    assert caught.value.reason == "rate_limit" and b.used.failed == 4 and b.used.calls == 0


def test_client_errors_are_not_retried():
    refused = openai.AuthenticationError("bad key", response=httpx.Response(401, request=REQUEST), body=None)
    b, client, slept = brain([refused, reply(GOOD)])
    with pytest.raises(EndpointRefused, match="refused"):
        b.seed(SEED)
    assert len(client.calls) == 1 and slept == []


def test_garbage_reply_costs_tokens_and_says_no_code():
    b, _, _ = brain([reply("As an AI model I think you should use CUDA.", 80, 20)])
    with pytest.raises(NoUsableCode):
        b.seed(SEED)
    assert b.used.tokens == 100


def test_token_budget_stops_the_next_call():
    b, client, _ = brain([reply(GOOD, 300, 300), reply(GOOD)], budget=LlmBudget(max_tokens=500))
    b.seed(SEED)
    with pytest.raises(BudgetExhausted, match="token budget"):
        b.seed(SeedTask(problem_source="another", problem_name="q"))
    assert len(client.calls) == 1


def test_cost_is_counted_and_bounded():
    budget = LlmBudget(max_cost_usd=0.001, prompt_usd_per_mtok=2.0, completion_usd_per_mtok=8.0)
    b, _, _ = brain([reply(GOOD, 200, 100)], budget=budget)
    b.seed(SEED)
    assert b.used.cost_usd == pytest.approx((200 * 2.0 + 100 * 8.0) / 1e6)
    b.endpoint.used = Usage(cost_usd=0.002)
    with pytest.raises(BudgetExhausted, match="cost budget"):
        b.seed(SeedTask(problem_source="x", problem_name="x"))


def test_cache_answers_the_same_prompt_without_a_call(tmp_path):
    first, client, _ = brain([reply(GOOD)], cache_dir=tmp_path)
    assert first.seed(SEED).source == GOOD
    second, client2, _ = brain([], cache_dir=tmp_path)  # a fresh process: an empty script would fail if called
    assert second.seed(SEED).source == GOOD
    assert client2.calls == [] and second.used.cached == 1 and second.used.tokens == 0
    assert len(list(tmp_path.rglob("*.json"))) == 1


def test_no_model_name_is_a_clear_error():
    with pytest.raises(BrainError, match="KSKILL_LLM_MODEL"):
        LlmBrain(ScriptedClient([]), "")


# --- prompts -----------------------------------------------------------------------------------

def test_optimize_prompt_carries_plan_playbook_evidence_trajectory_and_review():
    parent = Draft(source=GOOD, techniques=("kernel_fusion",))
    task = OptimizeTask(
        problem_source="class Model: ...", problem_name="p", parent=parent, technique="vectorized_access",
        bottleneck="memory_bandwidth", case="memory_bandwidth detected; vectorized_access ranked first",
        playbook="Use 16-byte loads.", evidence=('"wide loads help" (Guide, p. 3)',),
        trajectory=(TrajectoryStep(1, "seed", None, "verified", 1.0), TrajectoryStep(2, "optimize", "kernel_fusion",
                                                                                       "numeric", None, "max abs 0.3")),
        latest_review="passed on cuda; 1.4x")
    text = prompts.optimize_messages(task)[-1]["content"]
    for expected in ("memory_bandwidth detected", "vectorized_access", "Use 16-byte loads.", "wide loads help",
                     "| 2 | optimize | kernel_fusion | numeric | - | max abs 0.3 |", "passed on cuda; 1.4x",
                     "techniques applied: kernel_fusion", GOOD.strip()):
        assert expected in text
    assert LlmBrain(ScriptedClient([reply(GOOD)]), "m", sleep=lambda s: None).optimize(task).techniques == (
        "kernel_fusion", "vectorized_access")


# --- the recipe brain stands in for a failed reply ------------------------------------------------

POINTWISE = (Path(kskill.__file__).parent / "examples" / "pointwise_chain.py").read_text()
POINTWISE_SEED = SeedTask(problem_source=POINTWISE, problem_name="pointwise_chain")


@pytest.mark.parametrize("text, reason", [
    ("Sorry, I can only describe the kernel in words.", "prose"),
    ("```python\nclass ModelNew(nn.Module:\n```", "syntax"),
    ("```python\nclass Model(nn.Module):\n    pass\n```", "wrong_class"),
    (f"```python\n{GOOD.replace('torch.relu(x)', 'torch.compile(torch.relu)(x)')}```", "shortcut"),
])
def test_a_bad_reply_falls_back_to_the_recipe_brain_and_says_why(text, reason):
    b, client, _ = brain([reply(text)], fallback=RecipeBrain())
    draft = b.seed(POINTWISE_SEED)
    assert draft.source == RecipeBrain().seed(POINTWISE_SEED).source
    assert draft.fallback is not None and draft.fallback.brain == "recipes" and draft.fallback.reason == reason
    assert draft.fallback.reply == text and len(client.calls) == 1
    assert b.used.tokens == 150  # the refused reply still cost its tokens


def test_an_unavailable_endpoint_falls_back_then_is_not_called_again():
    b, client, slept = brain([server_error()] * 8, fallback=RecipeBrain(), retry=RetryPolicy(attempts=2))
    first = b.seed(POINTWISE_SEED)
    assert first.fallback.reason == "server_error" and len(client.calls) == 2
    second = b.seed(POINTWISE_SEED)
    assert second.fallback.reason == "server_error" and len(client.calls) == 4
    third = b.seed(POINTWISE_SEED)  # two failed steps in a row: the endpoint is left alone
    assert third.fallback.reason == "endpoint_down" and len(client.calls) == 4
    assert b.used.failed == 4


def test_without_a_stand_in_the_classified_failure_is_raised():
    task = OptimizeTask(POINTWISE, "pointwise_chain", RecipeBrain().seed(POINTWISE_SEED), "flash_attention", None,
                        "", "", (), (), "")
    b, _, _ = brain([reply("I would use flash attention here.")], fallback=RecipeBrain())
    with pytest.raises(NoUsableCode) as caught:  # no flash_attention recipe applies to a pointwise chain
        b.optimize(task)
    assert caught.value.reason == "prose"
    b, _, _ = brain([server_error()] * 2, fallback=RecipeBrain(), retry=RetryPolicy(attempts=2))
    with pytest.raises(BrainError, match="cannot stand in") as caught:  # the branch ends, not the run
        b.optimize(task)
    assert not isinstance(caught.value, BrainUnavailable)


def test_a_body_that_is_not_a_completion_is_retried_as_a_bad_response():
    b, client, slept = brain(["<html>502 Bad Gateway</html>", SimpleNamespace(choices=None), reply(GOOD)])
    assert b.seed(SEED).source == GOOD and len(client.calls) == 3 and b.used.failed == 2
