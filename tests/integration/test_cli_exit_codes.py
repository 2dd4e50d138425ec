"""Every command exits non-zero when its job failed, with one line on stderr naming the cause and
no traceback unless -v. `kskill.cli.run` is what the `kskill` script runs; here it runs in-process
on the session's private KSKILL_HOME with a real embedded store. (ingest and graph have their own.)"""

from __future__ import annotations

import json

from pathlib import Path

import pytest

from kskill.cli import run
from kskill.examples import bundled

EXAMPLE = str(bundled()["softmax_rows"])
ARITY = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return torch.relu(x) + y

def get_inputs():
    return [torch.randn(8, 8)]

def get_init_inputs():
    return []
'''


@pytest.fixture
def kskill(home_server: Path, capsys: pytest.CaptureFixture):
    """Run a command line; return (exit status, stdout, stderr)."""

    def call(*args: str) -> tuple[int, str, str]:
        code = run(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return call


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"syntax": tmp_path / "syntax.py", "binary": tmp_path / "binary.py", "arity": tmp_path / "arity.py",
             "no_model_new": tmp_path / "candidate.py", "big": tmp_path / "big.json"}
    paths["syntax"].write_text("import torch\nclass Model(:\n    pass\n")
    paths["binary"].write_bytes(b"\xff\xfe\x00 not text")
    paths["arity"].write_text(ARITY)
    paths["no_model_new"].write_text("x = 1\n")
    paths["big"].write_text('{"code_launches_per_forward": 100000000000000000000000000000}')
    return paths


def one_line_error(err: str, *words: str) -> None:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err


def test_help_is_h_too(kskill):
    for args in (["-h"], ["audit", "-h"], ["skills", "list", "-h"]):
        code, out, _ = kskill(*args)
        assert code == 0 and out.startswith("Usage: kskill")


def test_examples_lists_installed_paths(kskill):
    code, out, _ = kskill("examples")
    assert code == 0
    for name, path in bundled().items():
        assert f"{name}" in out and str(path) in out and path.is_file()
    code, out, _ = kskill("examples", "softmax_rows")
    assert code == 0 and out.strip() == EXAMPLE
    code, _, err = kskill("examples", "nope")
    assert code == 2
    one_line_error(err, "no example 'nope'")


def test_config_show_with_a_broken_settings_file(kskill, tmp_path, monkeypatch):
    bad = tmp_path / "kskill.toml"
    bad.write_text('grpah_uri = "x"\n')
    monkeypatch.setenv("KSKILL_CONFIG", str(bad))
    code, _, err = kskill("config", "show")
    assert code == 1
    one_line_error(err, "grpah_uri")


@pytest.mark.parametrize("args", [("audit", "run-none"), ("runs", "show", "run-none")])
def test_unknown_run(kskill, args):
    code, _, err = kskill(*args)
    assert code == 1
    one_line_error(err, "no run 'run-none'")


@pytest.mark.parametrize("args", [("audit", "../etc"), ("runs", "show", "a/b"), ("optimize", "--resume", ""),
                                  ("optimize", "--resume", "..")])
def test_path_like_run_ids_are_refused(kskill, args):
    code, _, err = kskill(*args)
    assert code == 2
    one_line_error(err, "is not a run id")


def test_skills_commands_that_fail(kskill):
    code, _, err = kskill("skills", "show", "no_such_skill")
    assert code == 1
    one_line_error(err, "no node with id 'no_such_skill'")
    code, _, err = kskill("skills", "review", "--accept", "no_such_skill")
    assert code == 1
    one_line_error(err, "not proposed skills: no_such_skill")
    code, out, _ = kskill("skills", "list", "--kind", "technique")
    assert code == 0 and "kernel_fusion" in out


@pytest.mark.parametrize("extra, words", [
    (["--time-limit", "nan"], ["--time-limit", "not a finite number"]),
    (["--atol", "inf"], ["--atol", "not a finite number"]),
    (["--out", "/dev/null"], ["/dev/null exists and is not a directory"]),
    (["--gpu", "tpu9"], ["--gpu", "'tpu9' is not in the peak table", "h200-sxm"]),
    (["--gpu", "a100"], ["--gpu", "ambiguous", "a100-sxm4-40gb"]),
])
def test_optimize_bad_options(kskill, extra, words):
    code, _, err = kskill("optimize", EXAMPLE, *extra)
    assert code == 2
    one_line_error(err, *words)


def test_plan_uses_the_ridge_point_of_the_gpu_it_is_told(kskill):
    """On a machine without a GPU, --gpu names the target whose peaks the plan reads."""
    code, out, err = kskill("plan", EXAMPLE, "--gpu", "h200", "--json")
    assert code == 0, err
    observed = json.loads(out)["observations"]
    assert observed["gpu_name"] == "NVIDIA H200 SXM 141GB"
    assert observed["ridge_point"] == pytest.approx(67e12 / 4800e9)  # fp32 softmax: the CUDA-core peak
    assert "memory_bound" in observed and "est_launch_work_us" in observed
    code, _, err = kskill("plan", EXAMPLE, "--gpu", "tpu9")
    assert code == 2
    one_line_error(err, "--gpu", "not in the peak table")


RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        {check}
        return torch.relu(x)

def get_inputs():
    return [torch.randn({n})]

def get_init_inputs():
    return []
'''
NEEDS_CUDA = 'assert x.is_cuda, "this model needs CUDA"'


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="what a machine without CUDA does")
def test_a_plan_this_machine_cannot_check_reads_the_code_and_says_why(kskill, tmp_path):
    """Without CUDA, `plan --gpu NAME` plans for that GPU from the code alone, and so does a plan for a
    problem too large for the CPU; a plain plan of a small problem still runs its reference."""
    cuda_only, huge = tmp_path / "cuda_only.py", tmp_path / "huge.py"
    cuda_only.write_text(RELU.format(check=NEEDS_CUDA, n="64, 64"))
    huge.write_text(RELU.format(check="", n="2**29"))  # 2 GiB of inputs: sized on the meta device, never allocated
    code, out, err = kskill("plan", str(cuda_only), "--gpu", "h200", "--json")
    assert code == 0 and json.loads(out)["observations"]["gpu_name"] == "NVIDIA H200 SXM 141GB", err
    assert "the reference was not run: the plan is for NVIDIA H200 SXM 141GB" in err
    code, out, err = kskill("plan", str(huge), "--json")
    assert code == 0 and "hold 4.0 GiB, too much for this machine's CPU" in err, err
    code, _, err = kskill("plan", str(cuda_only))
    assert code == 1
    one_line_error(err, "this model needs CUDA")


def test_optimize_and_plan_refuse_broken_problems(kskill, files):
    for command in ("optimize", "plan"):
        code, _, err = kskill(command, str(files["syntax"]))
        assert code == 1
        one_line_error(err, "syntax error at line 2")
        code, _, err = kskill(command, str(files["binary"]))
        assert code == 1
        one_line_error(err, "cannot read problem file", "utf-8")
    code, _, err = kskill("optimize")
    assert code == 2
    one_line_error(err, "give a PROBLEM file or --resume RUN")
    code, _, err = kskill("optimize", "--resume", "run-none")
    assert code == 1
    one_line_error(err, "no run 'run-none'")


def test_plan_refuses_bad_inputs_beside_the_problem(kskill, files):
    code, _, err = kskill("plan", EXAMPLE, "--observations", str(files["big"]))
    assert code == 1
    one_line_error(err, "code_launches_per_forward", "out of range")
    code, _, err = kskill("plan", EXAMPLE, "--candidate", str(files["no_model_new"]))
    assert code == 1
    one_line_error(err, "does not define ModelNew")


def test_a_reference_that_cannot_run_is_an_error(kskill, files):
    """The problem parses and names everything, but its Model does not take what get_inputs gives:
    `plan` runs the reference once in the Reviewer's sandbox before planning; `optimize` finds it
    in its first review (which builds the reference), or, having reviewed nothing, before it would
    return the reference. Either way the error is the last line, and the run is marked failed."""
    code, _, err = kskill("plan", str(files["arity"]))
    assert code == 1, err
    one_line_error(err, "arity", "missing 1 required positional argument")
    # Without retrieval: its embedding model would load (seconds) for a run that cannot start.
    code, out, err = kskill("optimize", str(files["arity"]), "--device", "cpu", "--retrieval", "off", "--json")
    assert code == 1 and out == "", err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("error: ") and "arity" in last and "missing 1 required positional argument" in last, err
    assert "Traceback" not in err
    code, out, _ = kskill("runs", "list", "--json")
    assert code == 0 and [r["status"] for r in json.loads(out) if r["problem"] == "arity"] == ["failed"], out


def test_review_of_a_missing_candidate(kskill):
    code, _, err = kskill("review", EXAMPLE, "/nonexistent/candidate.py")
    assert code == 2
    one_line_error(err, "/nonexistent/candidate.py")


def test_a_defect_is_one_line_and_its_traceback_needs_v(kskill, monkeypatch):
    import kskill.commands.examples as examples_command

    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(examples_command, "bundled", broken)
    code, _, err = kskill("examples")
    assert code == 1
    one_line_error(err, "unexpected RuntimeError: boom", "-v")
    code, _, err = kskill("-v", "examples")
    assert code == 1 and "Traceback" in err and err.rstrip().splitlines()[-1].startswith("error: ")


def test_interrupted_optimize_prints_the_resume_command(kskill, monkeypatch):
    import kskill.session as session
    from kskill.loop import Progress

    def interrupted(store, settings, problem, config, out_dir, on_progress, **options):
        on_progress(Progress(0, config.iterations, "review attempt 1 (seed)", 1.0, 0, "run-softmax-rows-1", None))
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "start", interrupted)
    code, _, err = kskill("optimize", EXAMPLE)
    assert code == 130
    assert "continue it with: kskill optimize --resume run-softmax-rows-1" in err
    assert "Traceback" not in err
