"""The LLM brain: chat completions from any OpenAI-compatible endpoint through `openai`.

Around each call: a response cache keyed by the prompt's hash (under KSKILL_HOME, so a
repeated run costs nothing), a per-run budget of tokens and cost checked before every call,
and retries with exponential backoff (honouring Retry-After) on rate limits, server errors,
timeouts and dropped connections. Other client errors (bad key, unknown model) fail at once.
The client is passed in, so tests script it; nothing here reaches the network by itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kskill.agents.brains import prompts
from kskill.agents.brains.base import (
    BrainError, BrainUnavailable, BudgetExhausted, Draft, OptimizeTask, RepairTask, SeedTask, Usage)
from kskill.agents.brains.extract import extract_code

log = logging.getLogger(__name__)
RETRYABLE_STATUS = (408, 409, 429)


@dataclass(frozen=True)
class LlmBudget:
    """Limits of one run; prices (USD per million tokens) turn tokens into cost, 0 when unknown."""

    max_tokens: int = 400_000
    max_cost_usd: float | None = None
    prompt_usd_per_mtok: float = 0.0
    completion_usd_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt_usd_per_mtok + completion_tokens * self.completion_usd_per_mtok) / 1e6


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # calls in all, the first included
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, retry: int, exc: BaseException) -> float:
        after = _retry_after(exc)
        if after is not None:
            return min(after, self.max_delay_s)
        return min(self.base_delay_s * 2 ** retry * (1 + 0.25 * random.random()), self.max_delay_s)


def open_client(base_url: str, api_key: str, timeout_s: float = 120.0) -> Any:
    """An `openai.OpenAI` client for an OpenAI-compatible endpoint; retries are ours, not the client's."""
    if not base_url and not api_key:
        raise BrainError("the llm brain needs an endpoint: set OPENAI_BASE_URL (and OPENAI_API_KEY if it "
                         "asks for one) and KSKILL_LLM_MODEL, or use --brain recipes")
    import openai

    return openai.OpenAI(base_url=base_url or None, api_key=api_key or "not-needed", max_retries=0,
                         timeout=timeout_s)


class LlmBrain:
    name = "llm"

    def __init__(self, client: Any, model: str, *, cache_dir: Path | None = None, budget: LlmBudget = LlmBudget(),
                 retry: RetryPolicy = RetryPolicy(), temperature: float = 0.0, max_completion_tokens: int = 8192,
                 sleep: Callable[[float], None] = time.sleep):
        if not model:
            raise BrainError("the llm brain needs a model name: set KSKILL_LLM_MODEL (or llm_model in kskill.toml)")
        self.client, self.model = client, model
        self.cache_dir = cache_dir
        self.budget, self.retry = budget, retry
        self.temperature, self.max_completion_tokens = temperature, max_completion_tokens
        self.sleep = sleep
        self.used = Usage()

    # -- the Brain interface ---------------------------------------------------------------

    def seed(self, task: SeedTask) -> Draft:
        return self._draft(prompts.seed_messages(task), ())

    def optimize(self, task: OptimizeTask) -> Draft:
        return self._draft(prompts.optimize_messages(task), (*task.parent.techniques, task.technique))

    def repair(self, task: RepairTask) -> Draft:
        return self._draft(prompts.repair_messages(task), task.draft.techniques)

    def can_apply(self, problem_source: str, technique: str) -> tuple[bool, str]:
        return True, ""  # a model can attempt any technique; the Reviewer judges the result

    # -- calls -------------------------------------------------------------------------------

    def _draft(self, messages: list[dict[str, str]], techniques: tuple[str, ...]) -> Draft:
        text, _ = self.complete(messages)
        return Draft(source=extract_code(text), techniques=techniques)

    def complete(self, messages: list[dict[str, str]]) -> tuple[str, Usage]:
        """The reply text for `messages`, from the cache or the endpoint, with what it cost."""
        key = prompt_hash(self.model, self.temperature, messages)
        cached = self._cache_read(key)
        if cached is not None:
            usage = Usage(calls=1, cached=1)
            self.used += usage
            return cached, usage
        self._check_budget()
        response = self._call_with_retries(messages)
        text = _reply_text(response)
        prompt_tokens, completion_tokens = _token_counts(response, messages, text)
        usage = Usage(prompt_tokens, completion_tokens, self.budget.cost(prompt_tokens, completion_tokens), calls=1)
        self.used += usage
        if text:
            self._cache_write(key, text)
        return text, usage

    def _check_budget(self) -> None:
        if self.used.tokens >= self.budget.max_tokens:
            raise BudgetExhausted(f"the run's LLM token budget is spent ({self.used.tokens} of "
                                  f"{self.budget.max_tokens} tokens)")
        if self.budget.max_cost_usd is not None and self.used.cost_usd >= self.budget.max_cost_usd:
            raise BudgetExhausted(f"the run's LLM cost budget is spent (${self.used.cost_usd:.4f} of "
                                  f"${self.budget.max_cost_usd:.4f})")

    def _call_with_retries(self, messages: list[dict[str, str]]) -> Any:
        last: BaseException | None = None
        for attempt in range(self.retry.attempts):
            try:
                return self.client.chat.completions.create(
                    model=self.model, messages=messages, temperature=self.temperature,
                    max_tokens=self.max_completion_tokens)
            except Exception as exc:  # the client's errors are classified, not swallowed
                if not retryable(exc):
                    raise BrainError(f"the LLM endpoint refused the request: {type(exc).__name__}: {exc}") from exc
                last = exc
                if attempt + 1 < self.retry.attempts:
                    delay = self.retry.delay(attempt, exc)
                    log.info("LLM call failed (%s); retrying in %.1f s", type(exc).__name__, delay)
                    self.sleep(delay)
        raise BrainUnavailable(f"the LLM endpoint kept failing after {self.retry.attempts} calls: "
                               f"{type(last).__name__}: {last}") from last

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None

    def _cache_read(self, key: str) -> str | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text())["text"]
        except (OSError, ValueError, KeyError):
            return None  # a torn cache entry is a miss, not an error

    def _cache_write(self, key: str, text: str) -> None:
        path = self._cache_path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"model": self.model, "text": text}))
        tmp.replace(path)


def prompt_hash(model: str, temperature: float, messages: list[dict[str, str]]) -> str:
    text = json.dumps({"model": model, "temperature": temperature, "messages": messages}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def retryable(exc: BaseException) -> bool:
    """Rate limits, server errors, timeouts and dropped connections are worth another try."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency
        openai = None
    if openai is not None and isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in RETRYABLE_STATUS or status >= 500)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _reply_text(response: Any) -> str:
    """The first choice's text; empty when the endpoint sent none (extraction then says so)."""
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError, TypeError):
        return ""


def _token_counts(response: Any, messages: list[dict[str, str]], text: str) -> tuple[int, int]:
    """Tokens as the endpoint reports them; about four characters a token when it reports none."""
    usage = getattr(response, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if isinstance(prompt, int) and isinstance(completion, int):
        return prompt, completion
    return sum(len(m["content"]) for m in messages) // 4 + 1, len(text) // 4 + 1
