"""Reviewer: sandboxed compile, correctness, timing and profiling of candidates.

Public entry: review(problem, candidate, options) -> Review (see review.py).
"""

from kskill.agents.reviewer.models import Flag, Review, ReviewOptions, Timing
from kskill.agents.reviewer.review import review

__all__ = ["Flag", "Review", "ReviewOptions", "Timing", "review"]
