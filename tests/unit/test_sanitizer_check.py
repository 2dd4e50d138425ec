"""sanitizer_check's own logic without a GPU: the candidates it writes, and how it files the sanitizer's
report lines under the candidate whose kernels ran when they came (its GPU run: tests/gpu)."""

import json

import recipe_support  # noqa: F401  (sets TRITON_INTERPRET before the recipes define their kernels)

from kskill.eval import sanitizer_check as sc
from kskill.eval.lineage import SMALL, SUITE, lineage_candidates, shrink


def test_it_writes_the_lineage_of_each_problem_and_its_cuda_graph_form(tmp_path):
    listed = sc.build(tmp_path, ["07_softmax_rows"])
    lineage = lineage_candidates(shrink((SUITE / "07_softmax_rows.py").read_text(), SMALL["07_softmax_rows"]))
    assert [(e["techniques"], e["params"]) for e in listed] == lineage + [(lineage[0][0] + ["cuda_graph"], lineage[0][1])]
    assert json.loads((tmp_path / "candidates.json").read_text()) == listed
    assert all("class ModelNew" in open(e["path"]).read() for e in listed)


def test_the_child_runs_each_candidate_between_its_markers(tmp_path, capsys):
    listed = sc.build(tmp_path, ["14_batchnorm_train"])
    sc.child(tmp_path, 1, device="cpu")  # from the second on, in Triton's interpreter
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("@@")]
    assert lines == [f"{marker} {e['n']}" for e in listed[1:] for marker in (sc.BEGIN, sc.END)]
    assert sc.attribute("\n".join(lines), listed) is None
    assert [e["status"] for e in listed] == ["not run"] + ["clean"] * (len(listed) - 1)


def test_report_lines_are_filed_under_the_candidate_running_and_a_stopped_child_names_its_candidate():
    listed = [{"n": i, "errors": [], "status": "not run"} for i in range(3)]
    output = "\n".join([f"{sc.BEGIN} 0", "its own print", f"{sc.END} 0", f"{sc.BEGIN} 1",
                        "========= Invalid __global__ read of size 4 bytes",
                        "=========     at 0x10 in k.py:3:_norm_0_stats", "========= ERROR SUMMARY: 1 error"])
    assert sc.attribute(output, listed) == 1
    assert [e["status"] for e in listed] == ["clean", "ran", "not run"]
    assert listed[1]["errors"] == ["Invalid __global__ read of size 4 bytes", "at 0x10 in k.py:3:_norm_0_stats"]


def test_a_run_restarts_after_a_child_that_stops_and_reports_each_candidate(tmp_path, capsys):
    """The whole run on the CPU, with a stand-in for compute-sanitizer that runs the child as it is
    and reports an error (and stops the child) in one candidate's output: a run that learns of an
    error the way the sanitizer tells it."""
    fake = tmp_path / "fake-sanitizer"
    fake.write_text("#!/bin/sh\nshift 4\n"  # drop --tool memcheck --print-limit 20
                    "\"$@\" | while IFS= read -r line; do echo \"$line\"; "
                    "case \"$line\" in *'begin 1') echo '========= Invalid __global__ read of size 4 bytes'; exit 3;; "
                    "esac; done\n")
    fake.chmod(0o755)
    status = sc.main(["--out", str(tmp_path / "out"), "--problems", "07_softmax_rows", "--sanitizer", str(fake),
                      "--device", "cpu"])
    report = json.loads((tmp_path / "out" / "sanitizer.json").read_text())["candidates"]
    assert status == 1 and report[1]["status"] == "errors"
    assert report[1]["errors"][0] == "Invalid __global__ read of size 4 bytes"
    assert [c["status"] for c in report[:1] + report[2:]] == ["clean"] * (len(report) - 1)
    assert "1 not clean" in capsys.readouterr().out
