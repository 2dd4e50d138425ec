"""Random small models through the recipe brain (eval/fuzz_recipes.py), a fixed seed: every candidate builds and
matches its reference in Triton's interpreter."""

import random

import pytest

from kskill.eval.fuzz_recipes import check, model_source


@pytest.mark.parametrize("case", range(24))
def test_a_random_model_builds_and_matches_its_reference(case):
    source, techniques, params = model_source(random.Random(4300 + case))
    problem, applied = check(source, techniques, params)
    assert problem is None, f"{techniques} {params} (applied {applied}): {problem}\n{source}"
    assert applied, "a technique applied"
