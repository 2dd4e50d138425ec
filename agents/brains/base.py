"""What a brain is given and what it gives back: the tasks of the Generator, Optimizer and
Repairer, the Draft a brain writes, and the usage it reports.

A brain writes code; it never runs it (the Reviewer does, in its sandbox), never plans (the
Planner does) and never reads the graph (the agents hand it what it needs in the task).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kskill.agents.errors import AgentError


class BrainError(AgentError):
    """A brain could not produce a candidate; `failure_class` says why in one word."""

    failure_class = "other"


class NoUsableCode(BrainError):
    """The reply held no code that parses and defines ModelNew; `reply` keeps what came back."""

    failure_class = "no_code"

    def __init__(self, message: str, reply: str = ""):
        super().__init__(message)
        self.reply = reply


class BudgetExhausted(BrainError):
    """The run's token or cost budget for the LLM is spent; the loop stops."""

    failure_class = "budget"


class BrainUnavailable(BrainError):
    """The endpoint kept failing (rate limits, server errors, timeouts) past every retry."""

    failure_class = "unavailable"


class CannotRepair(BrainError):
    """The brain has no repair for this failure (the branch ends)."""

    failure_class = "no_repair"


class CannotApply(BrainError):
    """The brain has nothing to write for this technique here (the deterministic brain's recipe
    finds nothing to do, or cannot capture the reference)."""

    failure_class = "not_applicable"


@dataclass(frozen=True)
class Usage:
    """Tokens and cost of one brain call; cached replies cost nothing."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    cached: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.cost_usd + other.cost_usd, self.calls + other.calls, self.cached + other.cached)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens - other.prompt_tokens, self.completion_tokens - other.completion_tokens,
                     self.cost_usd - other.cost_usd, self.calls - other.calls, self.cached - other.cached)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Draft:
    """A candidate a brain wrote: the source and what went into it.

    `techniques` is the ordered list of techniques the code embodies (its lineage plus the new
    one); for the recipe brain it and `params` determine the source completely.
    """

    source: str
    techniques: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrajectoryStep:
    """One earlier attempt, as prompts and reports show it."""

    n: int
    kind: str
    technique: str | None
    status: str
    speedup: float | None
    failure: str = ""


@dataclass(frozen=True)
class SeedTask:
    problem_source: str
    problem_name: str


@dataclass(frozen=True)
class OptimizeTask:
    problem_source: str
    problem_name: str
    parent: Draft
    technique: str
    bottleneck: str | None
    case: str  # the Planner's one-line reason
    playbook: str
    evidence: tuple[str, ...]
    trajectory: tuple[TrajectoryStep, ...]
    latest_review: str  # a short summary of the parent's review
    recipe: str = ""  # the technique's recipe key in the skill base (the deterministic brain's implementation)
    variant: str = ""  # the variant the plan chose ("" when the technique has none), with its parameters:
    variant_params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RepairTask:
    problem_source: str
    problem_name: str
    draft: Draft
    failure_class: str
    message: str
    log_tail: str
    remedies: tuple[str, ...]  # FailurePattern remedies, best match first
    remedy_techniques: tuple[str, ...]
    trajectory: tuple[TrajectoryStep, ...]
    attempt: int  # 1 for the first repair of this branch


class Brain(Protocol):
    """Writes candidates for the Generator, Optimizer and Repairer."""

    name: str
    used: Usage  # everything this brain has spent so far

    def seed(self, task: SeedTask) -> Draft: ...

    def optimize(self, task: OptimizeTask) -> Draft: ...

    def repair(self, task: RepairTask) -> Draft: ...

    def can_apply(self, problem_source: str, technique: str) -> tuple[bool, str]:
        """Whether this brain can apply `technique` to the problem, and why not (the Planner's capability)."""
        ...
