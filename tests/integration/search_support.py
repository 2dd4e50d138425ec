"""Shared pieces of the search tests: problems, and a scripted review.

Timings made on this machine (the Triton interpreter) cannot rank candidates, so the search
tests script the Reviewer's verdict: one real CPU review of the problem serves as the template,
and each candidate gets a speedup from a rule over its code (a stand-in for what a GPU would
measure). The recipe brain, the Planner, the graph, the Feature Extractor and the run directory
are all real. What the Reviewer itself does is tested with it (tests/unit/test_reviewer_*).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import kskill
from kskill.agents.problem import code_hash
from kskill.agents.reviewer import Review, ReviewOptions, review

EXAMPLES = Path(kskill.__file__).parent / "examples"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "problems"
GEMM = EXAMPLES / "gemm_bias_gelu.py"  # a linear layer, GELU and a scale: the GEMM variants apply
BROADCAST = FIXTURES / "broadcast_mul.py"  # one broadcast multiply
TF32X3 = 'input_precision="tf32x3"'
FAST = {"trials": 1, "cpu_timing_reps": 2, "retrieval": "off", "device": "cpu", "learn": "never", "confirm": 0}

_templates: dict[Path, Review] = {}


def template(problem: Path) -> Review:
    """A real CPU review of the reference as its own candidate (made once per problem)."""
    if problem not in _templates:
        found = review(problem, problem.read_text() + "\nModelNew = Model\n",
                       ReviewOptions(trials=1, device="cpu", cpu_timing_reps=2, profile=False))
        assert found.passed and found.timing is not None, found.failure_message
        _templates[problem] = found
    return _templates[problem]


class ScriptedReview:
    """A review function for `build_deps(review_fn=...)`: every candidate passes with the speedup
    `speedup_of(source)` gives; `calls` lists the code hash of each candidate reviewed, in order."""

    def __init__(self, problem: Path, speedup_of: Callable[[str], float] = lambda source: 1.1,
                 representative: bool = False, runtime_ms: float | None = None,
                 before: Callable[[int], None] = lambda count: None, tolerance: float | None = None):
        self.base = template(problem)
        self.speedup_of, self.representative, self.runtime_ms = speedup_of, representative, runtime_ms
        self.tolerance = tolerance  # the atol = rtol the Reviewer reports having applied (None: its default)
        self.before = before  # called with the number of reviews done so far, before each one
        self.calls: list[str] = []

    def __call__(self, problem, source: str) -> Review:
        self.before(len(self.calls))
        self.calls.append(code_hash(source))
        timing = self.base.timing.model_copy(update={"speedup": self.speedup_of(source),
                                                     "representative": self.representative})
        observations = dict(self.base.observations)
        if self.runtime_ms is not None:
            observations.update(runtime_ms=self.runtime_ms, speedup=timing.speedup)
        if self.tolerance is not None:
            observations.update(atol=self.tolerance, rtol=self.tolerance)
        return self.base.model_copy(update={"timing": timing, "candidate_hash": code_hash(source),
                                            "observations": observations})
