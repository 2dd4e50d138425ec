"""What a brain is given and what it gives back: the tasks of the Generator, Optimizer and
Repairer, the Draft a brain writes, and the usage it reports.

A brain writes code; it never runs it (the Reviewer does, in its sandbox), never plans (the
Planner does) and never reads the graph (the agents hand it what it needs in the task).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from typing import Any, Protocol

from kskill.agents.errors import AgentError


class BrainError(AgentError):
    """A brain could not produce a candidate; `failure_class` says why in one word."""

    failure_class = "other"


class NoUsableCode(BrainError):
    """The reply held no candidate worth a review; `reply` keeps what came back.

    `failure_class` stays "no_code" (the attempt's status); `reason` says which way the reply
    failed: empty, prose, syntax, wrong_class, shortcut or truncated (see REPLY_FAILURES).
    """

    failure_class = "no_code"

    def __init__(self, message: str, reply: str = "", reason: str = "prose"):
        super().__init__(f"{reason}: {message}")  # the class leads, in the trajectory and the report
        self.detail = message
        self.reply = reply
        self.reason = reason


class BudgetExhausted(BrainError):
    """The run's token or cost budget for the LLM is spent; the loop stops."""

    failure_class = "budget"


class BrainUnavailable(BrainError):
    """The endpoint kept failing past every retry; `reason` says how: timeout, rate_limit,
    server_error, connection or bad_response (a body that is not a chat completion)."""

    failure_class = "unavailable"

    def __init__(self, message: str, reason: str = "server_error"):
        super().__init__(message)
        self.reason = reason


class EndpointRefused(BrainError):
    """The endpoint refused the request (bad key, unknown model, prompt too long): not retried."""

    failure_class = "refused"
    reason = "refused"


class PromptTooLong(BrainError):
    """The prompt does not fit its token budget even with every cuttable section cut."""

    failure_class = "prompt_too_long"
    reason = "prompt_too_long"


class CannotRepair(BrainError):
    """The brain has no repair for this failure (the branch ends)."""

    failure_class = "no_repair"


@dataclass(frozen=True)
class Usage:
    """Tokens and cost of brain calls: `calls` answered (`cached` of them from the response cache,
    which costs nothing) and `failed` requests (errors and timeouts, each retry counted)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    cached: int = 0
    failed: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def __sub__(self, other: Usage) -> Usage:
        return Usage(*(a - b for a, b in zip(astuple(self), astuple(other))))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# How an LLM reply can fail before review, each a `reason` of NoUsableCode.
REPLY_FAILURES = {
    "empty": "the reply was empty",
    "prose": "the reply holds no code",
    "syntax": "the reply's code does not parse",
    "wrong_class": "the reply's code parses but defines no ModelNew",
    "shortcut": "the reply's code takes a shortcut the Reviewer rejects (torch.compile, threads, ...)",
    "truncated": "the reply was cut off at its token limit before the code was complete",
}


# How a call to the endpoint can fail, each a `reason` of BrainUnavailable (the first five,
# retried first) or of EndpointRefused; endpoint_down: not called after repeated failures.
ENDPOINT_FAILURES = ("timeout", "rate_limit", "server_error", "connection", "bad_response", "refused",
                     "endpoint_down")


@dataclass(frozen=True)
class Fallback:
    """Why the LLM did not write this candidate: its reply (or its endpoint) failed in a
    classified way, and `brain` wrote the candidate instead."""

    brain: str
    reason: str  # a REPLY_FAILURES key, an endpoint failure (timeout, rate_limit, ...), refused or prompt_too_long
    message: str
    reply: str = ""  # the refused reply, kept in the run directory (not in the graph)

    def record(self) -> dict[str, str]:
        """What the trajectory keeps (the reply stays in the run directory)."""
        return {"brain": self.brain, "reason": self.reason, "message": self.message[:300]}


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
    fallback: Fallback | None = None  # set when the fallback brain wrote it in the LLM's place


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


@dataclass(frozen=True)
class RepairTask:
    problem_source: str
    problem_name: str
    draft: Draft
    failure_class: str
    message: str
    log: str  # the review's log; the prompt cuts a long one from the middle
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
