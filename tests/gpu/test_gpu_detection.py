"""GPU detection against the peak table, on a machine with CUDA (run with `pytest -m gpu`)."""

from __future__ import annotations

import pytest

from kskill.agents import gpus
from kskill.agents.features import Features
from kskill.agents.observations import Observations

pytestmark = pytest.mark.gpu


def test_detected_gpu_matches_the_device():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    name = torch.cuda.get_device_name(0)
    spec, reason = gpus.detect()
    if spec is None:
        assert name in reason  # an unknown model is named, never guessed
        return
    props = torch.cuda.get_device_properties(0)
    assert spec.sm_count == props.multi_processor_count, f"{name}: table says {spec.sm_count} SMs"
    obs = Observations.merge(features=Features({"flops": 10**6, "bytes_moved": 10**6, "input_dtypes": "float32"}))
    assert obs.values["gpu_name"] == spec.name and obs.values["ridge_point"] > 1
