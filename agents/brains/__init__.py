"""The two brains that write code for the Generator, Optimizer and Repairer: `recipes`
(deterministic, the default, no network) and `llm` (any OpenAI-compatible endpoint)."""

from kskill.agents.brains.base import (
    ENDPOINT_FAILURES, REPLY_FAILURES, Brain, BrainError, BrainUnavailable, BudgetExhausted, CannotRepair, Draft,
    EndpointRefused, Fallback, NoUsableCode, OptimizeTask, PromptTooLong, RepairTask, SeedTask, TrajectoryStep, Usage)
from kskill.agents.brains.endpoint import ChatEndpoint, LlmBudget, Reply, RetryPolicy, open_client
from kskill.agents.brains.extract import extract_code, screen_reply
from kskill.agents.brains.llm import LlmBrain
from kskill.agents.brains.prompts import PromptBudget

__all__ = ["ENDPOINT_FAILURES", "REPLY_FAILURES", "Brain", "BrainError", "BrainUnavailable", "BudgetExhausted",
           "CannotRepair", "ChatEndpoint", "Draft", "EndpointRefused", "Fallback", "LlmBrain", "LlmBudget",
           "NoUsableCode", "OptimizeTask", "PromptBudget", "PromptTooLong", "RecipeBrain", "RepairTask", "Reply",
           "RetryPolicy", "SeedTask", "TrajectoryStep", "Usage", "extract_code", "open_client", "screen_reply"]


def __getattr__(name: str):
    # RecipeBrain imports torch; commands that only read runs (kskill runs, audit) should not pay for it.
    if name == "RecipeBrain":
        from kskill.agents.brains.recipes import RecipeBrain

        return RecipeBrain
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
