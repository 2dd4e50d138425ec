"""Errors raised by the recipe brain."""

from __future__ import annotations

from kskill.agents.errors import AgentError


class RecipeNotApplicable(AgentError):
    """A recipe cannot be applied to this reference (the message says why and what would make it apply)."""


class CaptureError(RecipeNotApplicable):
    """The reference could not be loaded, traced or shape-propagated."""
