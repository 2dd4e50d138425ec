"""The deepest lineage the search writes for each suite problem, in every variant the skill base
authors, checked at small sizes in Triton's interpreter.

The suite's problems are GPU-sized; here each problem's module-level size constants are replaced
by small odd ones (same code otherwise), and every (techniques, params) candidate of the lineage
(kskill.eval.lineage: the recipe brain, technique by technique, then each variant) is built and
compared with the reference over fresh inputs.
"""

import pytest
from recipe_support import check

from kskill.eval.lineage import SMALL, SUITE, lineage_candidates, required_tolerance, shrink

pytestmark = pytest.mark.slow  # every variant of 37 problems built and run in Triton's interpreter


def test_every_suite_problem_has_small_sizes():
    assert sorted(SMALL) == sorted(p.stem for p in SUITE.glob("[0-9]*.py"))


@pytest.mark.parametrize("stem", sorted(SMALL))
def test_benchmarked_candidates_are_correct_at_small_sizes(stem):
    source = shrink((SUITE / f"{stem}.py").read_text(), SMALL[stem])
    built = lineage_candidates(source)
    for techniques, params in built:
        check(source, techniques, params)
    assert built or stem in ("34_small_convnet",), f"{stem}: the search writes no Triton candidate"


def test_a_tf32_variant_is_held_to_the_tolerance_its_conditions_require():
    assert required_tolerance({"dot_precision": "tf32", "gemm_backend": "triton"}, 1e-4) == 5e-3
    assert required_tolerance({"dot_precision": "tf32x3", "gemm_backend": "triton"}, 1e-4) == 1e-4
    assert required_tolerance({}, 1e-4) == 1e-4


def test_the_3xtf32_gemm_and_attention_forms_are_among_the_checked_candidates():
    gemm = lineage_candidates(shrink((SUITE / "01_matmul_bias_relu.py").read_text(), SMALL["01_matmul_bias_relu"]))
    assert any(p.get("dot_precision") == "tf32x3" and p.get("gemm_backend") == "triton" for _, p in gemm)
    attention = lineage_candidates(shrink((SUITE / "32_attention.py").read_text(), SMALL["32_attention"]))
    assert any(p == {"dot_precision": "tf32x3"} and "flash_attention" in t for t, p in attention)
