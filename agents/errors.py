"""Errors of the agents layer (generator, reviewer, diagnoser, ...), all under KskillError."""

from kskill.graph_schema.errors import KskillError


class AgentError(KskillError):
    """An agent could not do its job for a reason it can explain."""


class ProblemError(AgentError):
    """A problem file is missing, unreadable, or does not define Model, get_inputs and get_init_inputs."""


class ReviewError(AgentError):
    """The Reviewer itself failed (not the candidate): the worker could not be started or answered nonsense."""
