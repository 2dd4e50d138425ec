"""Hostile inputs at the command line, fuzzed with hypothesis: CLI arguments, observation JSON for
`kskill plan --observations`, and problem files. Whatever comes in, a command ends with its exit
status and, on failure, one line naming the cause: never a defect ("unexpected ...") or a traceback.
Path-like run ids are refused before anything is looked up; Cypher-looking text is data, not code.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kskill.agents.observations import vocabulary
from kskill.cli import run
from kskill.examples import bundled

pytestmark = pytest.mark.reliability
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EXAMPLE = bundled()["softmax_rows"]
METRICS = sorted(vocabulary())


@pytest.fixture
def kskill(home_server: Path, capsys: pytest.CaptureFixture):
    def call(*args: str) -> tuple[int, str]:
        code = run(list(args))
        return code, capsys.readouterr().err

    return call


def handled(code: int, err: str) -> None:
    """The command ended as a command should: 0, or an error of one line that is not a defect."""
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and not err.startswith("error: unexpected "), err
    if code:
        assert err.startswith("error: ") and err.count("\n") == 1, err


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)


@FUZZ
@given(run_id=text)
def test_run_ids_from_anywhere(kskill, run_id):
    # "--" ends the options: a run id such as "-/" is then an argument, as a user would pass it (without it,
    # the parser answers "No such option '-/'", exit 2); --resume takes the next word as its value whatever it is
    for command in (["audit", "--"], ["runs", "show", "--"], ["optimize", "--resume"]):
        code, err = kskill(*command, run_id)
        handled(code, err)
        assert code != 0, "no such run exists"
        if "/" in run_id or ".." in run_id or run_id.startswith(".") or not run_id:
            assert code == 2 and "is not a run id" in err, err


@FUZZ
@given(run_id=st.from_regex(r"(\.\./|/|\./)[A-Za-z0-9_./-]{0,30}", fullmatch=True))
def test_path_like_run_ids_are_refused(kskill, run_id):
    for command in (["audit"], ["runs", "show"], ["optimize", "--resume"]):
        code, err = kskill(*command, run_id)
        assert code == 2 and "is not a run id" in err, err


@pytest.fixture
def no_run(monkeypatch):
    """Stop `optimize` right after its options were accepted, before the run starts."""
    import kskill.session as session
    from kskill.agents.errors import ProblemError

    def stop(*args, **kwargs):
        raise ProblemError("stopped before the run")

    monkeypatch.setattr(session, "start", stop)


@FUZZ
@given(option=st.sampled_from(["--time-limit", "--atol", "--rtol", "--max-cost", "--iterations", "--trials",
                               "--patience", "--confirm", "--max-tokens"]),
       value=st.one_of(text, st.sampled_from(["nan", "-nan", "inf", "-inf", "1e400", "-1", "0", "1e-400", "2.5",
                                              "99999999999999999999999999"])))
def test_numeric_options(kskill, no_run, option, value):
    """A value is refused at its option (2), or accepted and the command goes on (here: stopped, 1)."""
    code, err = kskill("optimize", str(EXAMPLE), option, value)
    handled(code, err)
    assert code == 2 or "stopped before the run" in err, err
    if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity", "1e400"):
        assert code == 2, f"{option} {value} was accepted"


@FUZZ
@given(skill_id=st.one_of(text, st.sampled_from([
    "x' OR 1=1 //", "kernel_fusion'}) DETACH DELETE n //", "MATCH (n) DETACH DELETE n", "$id", "`id`",
    "\\u0000", "kernel_fusion\nMATCH (n) RETURN n"])))
def test_cypher_looking_ids_are_data(kskill, skill_id):
    before = _node_count(kskill)
    code, err = kskill("skills", "show", "--", skill_id)
    handled(code, err)
    if code:
        assert "no node with id" in err, err
    assert _node_count(kskill) == before


def _node_count(kskill) -> int:
    from kskill.app import App

    app = App()
    try:
        return app.store().run("MATCH (n) RETURN count(n) AS c")[0]["c"]
    finally:
        app.close()


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3) |
                          st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
metric_name = st.one_of(st.sampled_from(METRICS), st.sampled_from([
    "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__registers_per_thread", "not__a.metric"]), st.text(alphabet=string.printable, max_size=20))


@pytest.fixture
def plan_without_sandbox(monkeypatch):
    """The observations are what is fuzzed here: the reference check (one sandboxed review of the
    reference, seconds each) is the same for every example and is tested on its own elsewhere."""
    import kskill.problem_check as problem_check
    from kskill.agents.problem import load_problem

    monkeypatch.setattr(problem_check, "runnable_problem", lambda path, *args: load_problem(path))


@settings(FUZZ, max_examples=30)
@given(observations=st.dictionaries(metric_name, json_value, max_size=6))
def test_observation_json(kskill, plan_without_sandbox, tmp_path_factory, observations):
    path = tmp_path_factory.mktemp("obs") / "observations.json"
    path.write_text(json.dumps(observations))  # NaN and Infinity as Python writes them
    code, err = kskill("plan", str(EXAMPLE), "--observations", str(path))
    handled(code, err)


@settings(FUZZ, max_examples=30)
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_observation_files_that_are_not_json(kskill, plan_without_sandbox, tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("obs") / "observations.json"
    path.write_bytes(raw)
    code, err = kskill("plan", str(EXAMPLE), "--observations", str(path))
    handled(code, err)


PROBLEM_PARTS = ["import torch", "import torch.nn as nn", "class Model(nn.Module):\n    def forward(self, x):\n        return x",
                 "def get_inputs():\n    return [torch.randn(4, 4)]", "def get_init_inputs():\n    return []",
                 "Model = 3", "def get_inputs(:", "raise SystemExit(3)", "get_inputs = None", "\x00", "\udcff"]


@settings(FUZZ, max_examples=30)
@given(source=st.one_of(st.binary(max_size=300),
                        st.lists(st.sampled_from(PROBLEM_PARTS), max_size=6).map(
                            lambda parts: "\n\n".join(parts).encode("utf-8", "surrogateescape"))))
def test_problem_files_that_do_not_parse_or_lack_names(kskill, tmp_path_factory, source):
    """Problem files refused before anything runs: unreadable, not Python, or without the three names.
    (Those that pass this go on to the sandboxed reference check, fuzzed below with fewer examples.)"""
    from kskill.agents.errors import ProblemError
    from kskill.agents.problem import load_problem

    path = tmp_path_factory.mktemp("problem") / "problem.py"
    path.write_bytes(source)
    try:
        load_problem(path)
    except ProblemError:
        code, err = kskill("plan", str(path))
        handled(code, err)
        assert code == 1


GET_INPUTS = st.sampled_from([
    "[]", "[torch.randn(4, 4), torch.randn(4, 4)]", "None", "[1, 2, 3]", "['a']", "torch.randn(4, 4)",
    "[torch.randn(0, 4)]", "[torch.randn(4, 4).to(torch.int64)]", "[torch.randn(4, 4)] * 1000",
    "iter([torch.randn(4, 4)])", "[float('nan')]", "[{'x': torch.randn(4)}]", "1 / 0"])


@pytest.mark.slow
@settings(FUZZ, max_examples=6)
@given(inputs=GET_INPUTS)
def test_problems_whose_reference_misbehaves(kskill, tmp_path_factory, inputs):
    """Problem files that parse and name everything, with get_inputs returning anything: the
    reference runs once in the sandbox and either works or is refused with one line."""
    path = tmp_path_factory.mktemp("problem") / "problem.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                    f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")
    code, err = kskill("plan", str(path))
    handled(code, err)
