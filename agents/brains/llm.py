"""The LLM brain: candidates written by a model behind any OpenAI-compatible endpoint.

Each task becomes a prompt (prompts.py) within its token budget, one call through the
ChatEndpoint (cache, budget, retries, accounting), and a screened reply
(extract.screen_reply): a reply that is empty, prose, code that does not parse, code without
ModelNew, a shortcut the Reviewer would reject, or cut off at its token limit is a classified
failure before anything runs. So is an endpoint that keeps failing, refuses the request, or a
prompt that cannot fit.

With a fallback brain (the recipe brain, as `kskill optimize --brain llm` wires it), such a
failure does not cost the step: the fallback writes the candidate, and the Draft says so
(`Draft.fallback`: which brain, why, and the refused reply) for the trajectory. Where the
fallback cannot write one either, the LLM's classified failure is raised. After
`ENDPOINT_STRIKES` endpoint failures in a row the endpoint is not called again in this run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kskill.agents.brains import prompts
from kskill.agents.brains.base import (
    Brain, BrainError, BrainUnavailable, BudgetExhausted, Draft, EndpointRefused, Fallback, NoUsableCode, OptimizeTask,
    PromptTooLong, RepairTask, SeedTask, Usage)
from kskill.agents.brains.endpoint import ChatEndpoint, LlmBudget, RetryPolicy
from kskill.agents.brains.extract import screen_reply
from kskill.agents.errors import AgentError

log = logging.getLogger(__name__)
ENDPOINT_STRIKES = 2  # endpoint failures in a row after which the run stops calling it


class LlmBrain:
    name = "llm"

    def __init__(self, client: Any, model: str, *, cache_dir: Path | None = None, budget: LlmBudget = LlmBudget(),
                 retry: RetryPolicy = RetryPolicy(), temperature: float = 0.0, max_completion_tokens: int = 8192,
                 prompt_budget: prompts.PromptBudget = prompts.PromptBudget(), fallback: Brain | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.endpoint = ChatEndpoint(client, model, cache_dir=cache_dir, budget=budget, retry=retry,
                                     temperature=temperature, max_reply_tokens=max_completion_tokens, sleep=sleep)
        self.prompt_budget = prompt_budget
        self.fallback = fallback
        self.strikes = 0  # endpoint failures in a row

    @property
    def used(self) -> Usage:
        return self.endpoint.used

    # -- the Brain interface ---------------------------------------------------------------

    def seed(self, task: SeedTask) -> Draft:
        return self._write("seed", lambda: prompts.seed_messages(task, self.prompt_budget), (),
                           lambda brain: brain.seed(task))

    def optimize(self, task: OptimizeTask) -> Draft:
        return self._write("optimize", lambda: prompts.optimize_messages(task, self.prompt_budget),
                           (*task.parent.techniques, task.technique), lambda brain: brain.optimize(task))

    def repair(self, task: RepairTask) -> Draft:
        return self._write("repair", lambda: prompts.repair_messages(task, self.prompt_budget), task.draft.techniques,
                           lambda brain: brain.repair(task))

    def can_apply(self, problem_source: str, technique: str) -> tuple[bool, str]:
        return True, ""  # a model can attempt any technique; the Reviewer judges the result

    # -- one step --------------------------------------------------------------------------

    def _write(self, task: str, messages: Callable[[], list[dict[str, str]]], techniques: tuple[str, ...],
               instead: Callable[[Brain], Draft]) -> Draft:
        """The model's candidate for one task, or the fallback's with the model's classified failure."""
        try:
            if self.strikes >= ENDPOINT_STRIKES:
                raise BrainUnavailable(f"the LLM endpoint failed {self.strikes} calls in a row; it is not called "
                                       "again in this run", reason="endpoint_down")
            try:
                reply = self.endpoint.complete(messages())
            except (BrainUnavailable, EndpointRefused):
                self.strikes += 1
                raise
            self.strikes = 0
            return Draft(source=screen_reply(reply.text, reply.truncated), techniques=techniques)
        except BudgetExhausted:
            raise  # the run's budget ends the run, not the step
        except (NoUsableCode, BrainUnavailable, EndpointRefused, PromptTooLong) as exc:
            return self._fall_back(task, exc, instead)

    def _fall_back(self, task: str, exc: BrainError, instead: Callable[[Brain], Draft]) -> Draft:
        """The fallback brain's draft, marked with why the model's was not used; else `exc` itself."""
        reason = getattr(exc, "reason", exc.failure_class)
        if self.fallback is None:
            raise exc
        try:
            draft = instead(self.fallback)
        except AgentError as declined:  # RecipeNotApplicable, CannotRepair, ...
            log.info("the %s brain cannot stand in for the LLM's %s (%s): %s", self.fallback.name, task, reason,
                     declined)
            if isinstance(exc, BrainUnavailable):  # the branch ends, not the run: the next step may fall back
                raise BrainError(f"{exc}; the {self.fallback.name} brain cannot stand in: {declined}") from declined
            raise exc from declined
        log.info("%s: the LLM's reply failed (%s); the %s brain wrote this candidate", task, reason, self.fallback.name)
        marked = Fallback(brain=self.fallback.name, reason=reason, message=str(exc),
                          reply=getattr(exc, "reply", ""))
        return replace(draft, fallback=marked)
