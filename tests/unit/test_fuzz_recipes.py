"""Random small models through the recipe brain (eval/fuzz_recipes.py), a fixed seed: every candidate builds and
matches its reference in Triton's interpreter."""

import random

import pytest

from kskill.agents.recipes import build_candidate
from kskill.eval.fuzz_recipes import check, model_source

CASES = range(24)


@pytest.mark.parametrize("case", CASES)
def test_a_random_model_builds_and_matches_its_reference(case):
    source, techniques, params = model_source(random.Random(4300 + case))
    problem, applied = check(source, techniques, params)
    assert problem is None, f"{techniques} {params} (applied {applied}): {problem}\n{source}"


def test_the_cases_exercise_the_templates():
    """The draws are not vacuous: most of them apply the row operator's technique."""
    drawn = [model_source(random.Random(4300 + case)) for case in CASES]
    applied = [build_candidate(source, techniques.split("+"), params).applied for source, techniques, params in drawn]
    assert sum(techniques.split("+")[0] in a for (_, techniques, _), a in zip(drawn, applied)) >= 16, applied
