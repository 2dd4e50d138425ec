"""The two brains that write code for the Generator, Optimizer and Repairer: `recipes`
(deterministic, the default, no network) and `llm` (any OpenAI-compatible endpoint)."""

from kskill.agents.brains.base import (
    Brain, BrainError, BrainUnavailable, BudgetExhausted, CannotRepair, Draft, NoUsableCode, OptimizeTask,
    RepairTask, SeedTask, TrajectoryStep, Usage)
from kskill.agents.brains.extract import extract_code
from kskill.agents.brains.llm import LlmBrain, LlmBudget, RetryPolicy, open_client
from kskill.agents.brains.recipes import RecipeBrain

__all__ = ["Brain", "BrainError", "BrainUnavailable", "BudgetExhausted", "CannotRepair", "Draft", "LlmBrain",
           "LlmBudget", "NoUsableCode", "OptimizeTask", "RecipeBrain", "RepairTask", "RetryPolicy", "SeedTask",
           "TrajectoryStep", "Usage", "extract_code", "open_client"]
