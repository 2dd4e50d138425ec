"""compute-sanitizer's memcheck over the recipe brain's candidates of two suite problems, on a GPU."""

import json
import shutil

import pytest
import torch

from kskill.eval import sanitizer_check

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
              pytest.mark.skipif(not (shutil.which("compute-sanitizer") or
                                      __import__("os").path.exists("/usr/local/cuda/bin/compute-sanitizer")),
                                 reason="needs compute-sanitizer")]


def test_memcheck_runs_every_candidate_and_finds_them_clean(tmp_path):
    status = sanitizer_check.main(["--out", str(tmp_path), "--problems", "07_softmax_rows", "14_batchnorm_train"])
    report = json.loads((tmp_path / "sanitizer.json").read_text())
    assert report["candidates"] and all(c["status"] == "clean" for c in report["candidates"]), report
    assert status == 0
