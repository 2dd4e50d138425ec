"""One call path to an OpenAI-compatible chat endpoint, shared by the LLM brain and the LLM extractor.

Around each call: a response cache keyed by the request's hash (under KSKILL_HOME, so a
repeated run costs nothing), a per-run budget of tokens and cost checked before every call,
bounded retries with exponential backoff (honouring Retry-After, capped) on rate limits,
server errors, timeouts, dropped connections and bodies that are not a chat completion, and
an account of tokens, cost and failed requests. Other client errors (bad key, unknown model, a
prompt the server will not take) fail at once. The client is passed in, so tests script it;
nothing here reaches the network by itself.
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

from kskill.agents.brains.base import BrainError, BrainUnavailable, BudgetExhausted, EndpointRefused, Usage

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
    max_delay_s: float = 30.0  # also caps a server's Retry-After

    def delay(self, retry: int, exc: BaseException) -> float:
        after = _retry_after(exc)
        if after is not None:
            return min(after, self.max_delay_s)
        return min(self.base_delay_s * 2 ** retry * (1 + 0.25 * random.random()), self.max_delay_s)


@dataclass(frozen=True)
class Reply:
    """One completion: its text, what it cost, and why the endpoint stopped writing."""

    text: str
    usage: Usage
    finish_reason: str = ""  # "stop"; "length" when cut at the token limit; "" when not said

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def open_client(base_url: str, api_key: str, timeout_s: float = 120.0) -> Any:
    """An `openai.OpenAI` client for an OpenAI-compatible endpoint; retries are ours, not the client's."""
    if not base_url and not api_key:
        raise BrainError("the llm brain needs an endpoint: set OPENAI_BASE_URL (and OPENAI_API_KEY if it "
                         "asks for one) and KSKILL_LLM_MODEL, or use --brain recipes")
    import openai

    return openai.OpenAI(base_url=base_url or None, api_key=api_key or "not-needed", max_retries=0,
                         timeout=timeout_s)


class ChatEndpoint:
    """Chat completions with cache, budget, retries and accounting; `used` says what was spent."""

    def __init__(self, client: Any, model: str, *, cache_dir: Path | None = None, budget: LlmBudget = LlmBudget(),
                 retry: RetryPolicy = RetryPolicy(), temperature: float = 0.0, max_reply_tokens: int = 8192,
                 sleep: Callable[[float], None] = time.sleep):
        if not model:
            raise BrainError("the llm brain needs a model name: set KSKILL_LLM_MODEL (or llm_model in kskill.toml)")
        self.client, self.model = client, model
        self.cache_dir = cache_dir
        self.budget, self.retry = budget, retry
        self.temperature, self.max_reply_tokens = temperature, max_reply_tokens
        self.sleep = sleep
        self.used = Usage()

    def complete(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None) -> Reply:
        """The reply to `messages`, from the cache or the endpoint."""
        request = self._request(messages, response_format)
        key = request_hash(request)
        cached = self._cache_read(key)
        if cached is not None:
            reply = Reply(cached["text"], Usage(calls=1, cached=1), cached.get("finish_reason", ""))
        else:
            self._check_budget()
            response = self._call_with_retries(request)
            text = _reply_text(response)
            prompt_tokens, completion_tokens = _token_counts(response, messages, text)
            cost = self.budget.cost(prompt_tokens, completion_tokens)
            reply = Reply(text, Usage(prompt_tokens, completion_tokens, cost, calls=1), _finish_reason(response))
            if text:
                self._cache_write(key, {"model": self.model, "text": text, "finish_reason": reply.finish_reason})
        self.used += reply.usage
        return reply

    def _request(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                   "max_tokens": self.max_reply_tokens}
        if response_format is not None:
            request["response_format"] = response_format
        return request

    def _check_budget(self) -> None:
        if self.used.tokens >= self.budget.max_tokens:
            raise BudgetExhausted(f"the run's LLM token budget is spent ({self.used.tokens} of "
                                  f"{self.budget.max_tokens} tokens)")
        if self.budget.max_cost_usd is not None and self.used.cost_usd >= self.budget.max_cost_usd:
            raise BudgetExhausted(f"the run's LLM cost budget is spent (${self.used.cost_usd:.4f} of "
                                  f"${self.budget.max_cost_usd:.4f})")

    def _call_with_retries(self, request: dict[str, Any]) -> Any:
        last: BaseException | None = None
        for attempt in range(self.retry.attempts):
            try:
                response = self.client.chat.completions.create(**request)
                if not _is_completion(response):
                    raise BadResponse(f"the endpoint's answer is not a chat completion: {str(response)[:120]!r}")
                return response
            except Exception as exc:  # the client's errors are classified, not swallowed
                self.used += Usage(failed=1)
                reason = failure_reason(exc)
                if reason == "refused":
                    raise EndpointRefused(f"the LLM endpoint refused the request: {type(exc).__name__}: "
                                          f"{str(exc)[:300]}") from exc
                last = exc
                if attempt + 1 < self.retry.attempts:
                    delay = self.retry.delay(attempt, exc)
                    log.info("LLM call failed (%s: %s); retrying in %.1f s", reason, type(exc).__name__, delay)
                    self.sleep(delay)
        raise BrainUnavailable(f"the LLM endpoint kept failing after {self.retry.attempts} calls "
                               f"({failure_reason(last)}): {type(last).__name__}: {str(last)[:300]}",
                               reason=failure_reason(last)) from last

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None

    def _cache_read(self, key: str) -> dict[str, Any] | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text())
            return entry if isinstance(entry.get("text"), str) else None
        except (OSError, ValueError, AttributeError):
            return None  # a torn cache entry is a miss, not an error

    def _cache_write(self, key: str, entry: dict[str, Any]) -> None:
        path = self._cache_path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        tmp.replace(path)


class BadResponse(Exception):
    """A 200 answer whose body is not a chat completion (a proxy's HTML page, a cut-off body)."""


def request_hash(request: dict[str, Any]) -> str:
    text = json.dumps(request, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def failure_reason(exc: BaseException | None) -> str:
    """How a call failed: timeout, connection, rate_limit, server_error and bad_response are worth
    another try; refused (any other client error) is not."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency
        openai = None
    if isinstance(exc, TimeoutError) or (openai is not None and isinstance(exc, openai.APITimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionError) or (openai is not None and isinstance(exc, openai.APIConnectionError)):
        return "connection"
    if isinstance(exc, (BadResponse, json.JSONDecodeError)) or (
            openai is not None and isinstance(exc, openai.APIResponseValidationError)):
        return "bad_response"
    status = getattr(exc, "status_code", None)
    if status == 429:
        return "rate_limit"
    if isinstance(status, int) and (status in RETRYABLE_STATUS or status >= 500):
        return "server_error"
    return "refused"


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        value = headers.get("retry-after")
        return max(float(value), 0.0) if value is not None else None
    except (TypeError, ValueError):
        return None


def _is_completion(response: Any) -> bool:
    return isinstance(getattr(response, "choices", None), list)


def _reply_text(response: Any) -> str:
    """The first choice's text; empty when the endpoint sent none (extraction then says so)."""
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError, TypeError):
        return ""


def _finish_reason(response: Any) -> str:
    try:
        return str(response.choices[0].finish_reason or "")
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
