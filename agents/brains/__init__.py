"""The two brains that write code for the Generator, Optimizer and Repairer: `recipes`
(deterministic, the default, no network) and `llm` (any OpenAI-compatible endpoint)."""

from kskill.agents.brains.base import (
    Brain, BrainError, BrainUnavailable, BudgetExhausted, CannotApply, CannotRepair, Draft, NoUsableCode,
    OptimizeTask, RepairTask, SeedTask, TrajectoryStep, Usage)
from kskill.agents.brains.extract import extract_code
from kskill.agents.brains.llm import LlmBrain, LlmBudget, RetryPolicy, open_client

__all__ = ["Brain", "BrainError", "BrainUnavailable", "BudgetExhausted", "CannotApply", "CannotRepair", "Draft",
           "LlmBrain", "LlmBudget", "NoUsableCode", "OptimizeTask", "RecipeBrain", "RepairTask", "RetryPolicy", "SeedTask",
           "TrajectoryStep", "Usage", "extract_code", "open_client"]


def __getattr__(name: str):
    # RecipeBrain imports torch; commands that only read runs (kskill runs, audit) should not pay for it.
    if name == "RecipeBrain":
        from kskill.agents.brains.recipes import RecipeBrain

        return RecipeBrain
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
