"""Reviewer: sandboxed compile, correctness, timing and profiling of candidates.

Public entry: review(problem, candidate, options) -> Review (see review.py).
"""

from kskill.agents.reviewer.models import Flag, Review, ReviewOptions, Timing
from kskill.agents.reviewer.review import require_isolation, review
from kskill.agents.reviewer.sandbox import SandboxUnavailable

__all__ = ["Flag", "Review", "ReviewOptions", "SandboxUnavailable", "Timing", "require_isolation", "review"]
