"""Reading, filtering and sampling a suite of KernelBench-format problems (eval/suite.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kskill.eval.errors import EvalError
from kskill.eval.results import ResultsDir
from kskill.eval.suite import read_suite, select, stratified_sample

PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n" \
          "def get_inputs():\n    return [torch.randn(4)]\n\ndef get_init_inputs():\n    return []\n"
KERNELBENCH = Path("/work/shared/kernelbench")


def make_suite(root: Path, layout: dict[str, list[str]]) -> Path:
    for folder, names in layout.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            (root / folder / f"{name}.py").write_text(PROBLEM)
    return root


def test_level_folders_are_levels_in_numeric_order_and_non_problems_are_named(tmp_path):
    root = make_suite(tmp_path / "kb", {"level1": ["10_b", "2_a"], "level2": ["1_c"]})
    (root / "level1" / "helpers.py").write_text("X = 1\n")
    suite = read_suite(root)
    assert [(p.id, p.level) for p in suite.problems] == [("level1/2_a", 1), ("level1/10_b", 1), ("level2/1_c", 2)]
    assert len(suite.skipped) == 1 and "helpers" in suite.skipped[0] and "Model" in suite.skipped[0]
    assert suite.problems[0].slug == "level1__2_a"


def test_a_single_level_folder_and_a_flat_folder(tmp_path):
    level = make_suite(tmp_path, {"level3": ["1_x", "2_y"]}) / "level3"
    assert [(p.id, p.level) for p in read_suite(level).problems] == [("level3/1_x", 3), ("level3/2_y", 3)]
    flat = make_suite(tmp_path / "mine", {".": ["relu"]})
    assert [(p.id, p.level) for p in read_suite(flat).problems] == [("relu", 0)]
    with pytest.raises(EvalError, match="holds no KernelBench-format problem"):
        read_suite(make_suite(tmp_path / "empty", {".": []}))


def test_level_and_glob_filters(tmp_path):
    problems = read_suite(make_suite(tmp_path, {"level1": ["1_Softmax", "2_ReLU"], "level2": ["1_Conv_Softmax"]})).problems
    assert [p.id for p in select(problems, levels=(2,))] == ["level2/1_Conv_Softmax"]
    assert [p.id for p in select(problems, patterns=("*Softmax*",))] == ["level1/1_Softmax", "level2/1_Conv_Softmax"]
    assert [p.id for p in select(problems, patterns=("level1/2_*",))] == ["level1/2_ReLU"]
    with pytest.raises(EvalError, match="no problem"):
        select(problems, levels=(3,))


def test_sample_is_stratified_by_level_and_seeded(tmp_path):
    problems = read_suite(make_suite(tmp_path, {"level1": [f"{i}_p" for i in range(1, 21)],
                                                "level2": [f"{i}_q" for i in range(1, 11)]})).problems
    first = stratified_sample(problems, 6, seed=3)
    assert Counter(p.level for p in first) == {1: 4, 2: 2}
    assert first == stratified_sample(problems, 6, seed=3)
    assert first != stratified_sample(problems, 6, seed=4)
    assert first == sorted(first, key=problems.index), "the sample keeps the suite's order"
    # one level's draw does not depend on the other level's contents
    only_level1 = [p for p in problems if p.level == 1]
    assert [p for p in first if p.level == 1] == [p for p in stratified_sample(only_level1, 4, seed=3)]


def test_a_larger_sample_of_the_same_seed_holds_the_smaller_one(tmp_path):
    problems = read_suite(make_suite(tmp_path, {"level1": [f"{i}_p" for i in range(1, 87)],
                                                "level2": [f"{i}_q" for i in range(1, 87)],
                                                "level3": [f"{i}_r" for i in range(1, 43)]})).problems
    for seed in range(5):
        drawn = [set(p.id for p in stratified_sample(problems, n, seed)) for n in (6, 20, 40, 60)]
        assert all(small <= large for small, large in zip(drawn, drawn[1:])), seed


def test_resume_grows_an_evaluation_to_a_larger_sample_of_the_same_seed_only(tmp_path):
    folder = ResultsDir(tmp_path / "out")
    record = {"suite": "/kb", "selection": ["level1/1_p", "level1/2_p"], "settings": {"device": "cuda"},
              "sample": {"n": 2, "seed": 0, "levels": [], "filters": []}, "started_at": "then"}
    folder.begin(record, resume=False)
    grown = {**record, "selection": ["level1/1_p", "level1/2_p", "level1/3_p"],
             "sample": {**record["sample"], "n": 3}, "started_at": "now"}
    folder.begin(grown, resume=True)
    stored = folder.record()
    assert stored["selection"] == grown["selection"] and stored["sample"]["n"] == 3
    assert stored["started_at"] == "then" and stored["grown_from"] == [record["sample"]]
    for other in ({**grown, "sample": {**grown["sample"], "n": 4, "seed": 1}},  # another seed
                  {**grown, "sample": {**grown["sample"], "n": 4}, "settings": {"device": "cpu"}},  # other settings
                  {**grown, "sample": {**grown["sample"], "n": 4}, "selection": ["level1/9_p"]},  # drops problems
                  {**grown, "sample": {**grown["sample"], "n": 2}, "selection": record["selection"]}):  # smaller
        with pytest.raises(EvalError, match="was started with another"):
            folder.begin(other, resume=True)


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="the KernelBench development set is not at /work/shared/kernelbench")
def test_the_kernelbench_development_set_reads_as_it_is():
    suite = read_suite(KERNELBENCH)
    assert Counter(p.level for p in suite.problems) == {1: 86, 2: 86, 3: 42}
    assert not suite.skipped
    sample = select(suite.problems, sample=40, seed=0)
    assert Counter(p.level for p in sample) == {1: 16, 2: 16, 3: 8}
    assert set(select(suite.problems, sample=20, seed=0)) <= set(sample)  # the 20 grow into the 40
