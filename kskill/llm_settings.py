"""The LLM settings turned into an endpoint and a brain (read here, in kskill/, and passed down).

| setting | default | what it is |
|---|---|---|
| `KSKILL_LLM_CONTEXT` | 32768 | the model's context in tokens: prompt budget plus reply tokens |
| `KSKILL_LLM_REPLY_TOKENS` | 8192 | the most tokens one reply may take (`max_tokens` of each request) |
| `KSKILL_LLM_TIMEOUT` | 120 | seconds one request may take before it counts as a timeout (retried) |
| `KSKILL_LLM_PRICE` | 0,0 | USD per million prompt and completion tokens, e.g. `2.5,10`: cost = tokens x price |
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kskill.agents.brains import ChatEndpoint, LlmBrain, LlmBudget, PromptBudget, open_client
from kskill.config import Settings
from kskill.graph_schema.errors import ConfigError

MIN_PROMPT_TOKENS = 512


@dataclass(frozen=True)
class LlmOptions:
    context_tokens: int = 32_768
    reply_tokens: int = 8192
    timeout_s: float = 120.0
    prompt_usd_per_mtok: float = 0.0
    completion_usd_per_mtok: float = 0.0

    @property
    def prompt_budget(self) -> PromptBudget:
        return PromptBudget(max_tokens=self.context_tokens - self.reply_tokens)


def llm_options(settings: Settings) -> LlmOptions:
    """The LLM options in `settings`, each checked; a bad value is a ConfigError naming the variable."""
    d = LlmOptions()
    context = _number(settings.llm_context, "KSKILL_LLM_CONTEXT", d.context_tokens, int)
    reply = _number(settings.llm_reply_tokens, "KSKILL_LLM_REPLY_TOKENS", d.reply_tokens, int)
    timeout = _number(settings.llm_timeout, "KSKILL_LLM_TIMEOUT", d.timeout_s, float)
    prices = [p.strip() for p in settings.llm_price.split(",")] if settings.llm_price else ["0", "0"]
    if len(prices) != 2:
        raise ConfigError(f"KSKILL_LLM_PRICE must be two numbers, USD per million prompt and completion tokens "
                          f"(e.g. 2.5,10), not {settings.llm_price!r}")
    prompt_price, completion_price = (_number(p, "KSKILL_LLM_PRICE", 0.0, float) for p in prices)
    if reply < 1 or context - reply < MIN_PROMPT_TOKENS:
        raise ConfigError(f"KSKILL_LLM_CONTEXT ({context}) must leave at least {MIN_PROMPT_TOKENS} tokens for the "
                          f"prompt after KSKILL_LLM_REPLY_TOKENS ({reply})")
    if timeout <= 0:
        raise ConfigError(f"KSKILL_LLM_TIMEOUT must be a positive number of seconds, not {settings.llm_timeout!r}")
    return LlmOptions(context, reply, timeout, prompt_price, completion_price)


def llm_endpoint(settings: Settings, max_tokens: int = LlmBudget().max_tokens,
                 max_cost_usd: float | None = None) -> ChatEndpoint:
    """The configured endpoint with its response cache under KSKILL_HOME (the ingest extractor's)."""
    options = llm_options(settings)
    return ChatEndpoint(_client(settings, options), settings.llm_model, cache_dir=_cache_dir(settings),
                        budget=_budget(options, max_tokens, max_cost_usd), max_reply_tokens=options.reply_tokens)


def llm_brain(settings: Settings, max_tokens: int, max_cost_usd: float | None) -> LlmBrain:
    """The LLM brain for `kskill optimize --brain llm`, with the recipe brain as its fallback."""
    from kskill.agents.brains import RecipeBrain  # imports torch: only when a brain is built

    options = llm_options(settings)
    return LlmBrain(_client(settings, options), settings.llm_model, cache_dir=_cache_dir(settings),
                    budget=_budget(options, max_tokens, max_cost_usd), max_completion_tokens=options.reply_tokens,
                    prompt_budget=options.prompt_budget, fallback=RecipeBrain())


def _client(settings: Settings, options: LlmOptions):
    return open_client(settings.openai_base_url, settings.openai_api_key, timeout_s=options.timeout_s)


def _cache_dir(settings: Settings) -> Path:
    return settings.home / "llm-cache"


def _budget(options: LlmOptions, max_tokens: int, max_cost_usd: float | None) -> LlmBudget:
    return LlmBudget(max_tokens=max_tokens, max_cost_usd=max_cost_usd, prompt_usd_per_mtok=options.prompt_usd_per_mtok,
                     completion_usd_per_mtok=options.completion_usd_per_mtok)


def _number(text: str, variable: str, default, kind):
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(f"{variable} must be a {'whole ' if kind is int else ''}number, not {text!r}") from None
    if value < 0:
        raise ConfigError(f"{variable} must not be negative, not {text!r}")
    return value
