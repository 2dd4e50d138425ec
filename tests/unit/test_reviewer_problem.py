"""Problems and candidates are read and validated without running them."""

from pathlib import Path

import pytest

from kskill.agents.errors import ProblemError
from kskill.agents.problem import load_candidate, load_problem

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer"


def test_problem_from_path_and_from_source_agree():
    path = FIXTURES / "problems" / "relu.py"
    from_path = load_problem(path)
    from_text = load_problem(path.read_text(), name="relu")
    assert from_path.name == from_text.name == "relu"
    assert from_path.source_hash == from_text.source_hash
    assert from_path.path == path and from_text.path is None


def test_missing_definitions_are_named():
    with pytest.raises(ProblemError, match="does not define get_inputs, get_init_inputs"):
        load_problem("import torch\nclass Model:\n    pass\n")


def test_problem_syntax_error_gives_the_line():
    with pytest.raises(ProblemError, match="syntax error at line 2"):
        load_problem("class Model:\n    def f(:\n")


def test_missing_problem_file_names_the_fix(tmp_path):
    with pytest.raises(ProblemError, match="does not exist"):
        load_problem(str(tmp_path / "absent.py"))


def test_assigned_functions_count_as_definitions():
    problem = load_problem("class Model: pass\nget_inputs = lambda: []\nget_init_inputs = lambda: []\n")
    assert problem.name == "problem"


def test_candidate_without_modelnew_is_a_reviewable_error():
    candidate = load_candidate("class Model:\n    pass\n")
    assert candidate.error is not None and "ModelNew" in candidate.error


def test_candidate_syntax_error_keeps_the_line():
    candidate = load_candidate("class ModelNew:\n    def f(:\n")
    assert candidate.error.startswith("SyntaxError") and candidate.error_line == 2


def test_candidate_imported_modelnew_counts():
    assert load_candidate("from elsewhere import Fast as ModelNew\n").error is None
