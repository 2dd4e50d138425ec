"""Whether a problem can be worked on at all: asked before `plan` spends time on it, and by
`optimize` at the end of a run whose reviews never built the reference (the first review does).

A problem that does not parse or lacks Model, get_inputs or get_init_inputs is refused when it is
read; one whose Model does not run on its own inputs (wrong arity, wrong types, a crash) is found
by reviewing the reference against itself once, in the Reviewer's sandbox, with no timing.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kskill.agents.errors import ProblemError
from kskill.agents.problem import Problem, load_problem

log = logging.getLogger(__name__)

# Failure classes that, when the candidate is the reference itself, mean the reference cannot run.
CANNOT_RUN = {"compile", "runtime", "timeout", "memory"}


def runnable_problem(path: Path | Problem, device: str = "auto", timeout_s: float = 300.0) -> Problem:
    """The problem at `path` (or the problem itself), once its reference ran on its own inputs;
    ProblemError otherwise."""
    from kskill.agents.generator import reference_candidate
    from kskill.agents.reviewer import ReviewOptions, review

    problem = path if isinstance(path, Problem) else load_problem(path)
    # The problem is trusted code (the user's own model): it runs without a sandbox where none works.
    options = ReviewOptions(trials=1, timing=False, profile=False, ncu=False, static_checks=False,
                            device=device, timeout_s=timeout_s, unsandboxed_ok=True)
    result = review(problem, reference_candidate(problem).source, options)  # ProblemError in its phases
    if result.passed:
        return problem
    if result.failure_class in CANNOT_RUN:
        raise ProblemError(f"problem {problem.name} cannot run: {result.failure_message or result.failure_class}")
    # Compared with itself, a reference can still differ (nondeterminism) or trip a dynamic check:
    # that is the Reviewer's business for each candidate, not a reason to refuse the problem.
    log.warning("the reference of %s does not pass a review against itself (%s): %s", problem.name,
                result.failure_class, result.failure_message)
    return problem
