"""The Feature Extractor: the one place where what is known about a candidate is merged into the
observations a plan is made from. Static features of the problem (computed once) and of the
candidate, problem facts (dtype, tolerance), and profiler metrics (a review's, or given by
vocabulary name, by raw Nsight Compute name, or as an `ncu --csv --page raw` report), with the
metrics derived from them against the GPU's peaks. `kskill plan` and `kskill optimize` both plan
from it. Nothing in a candidate is executed here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kskill.agents.errors import AgentError
from kskill.agents.candidate_features import candidate_features
from kskill.agents.features import Features, reference_features
from kskill.agents.gpus import GpuSpec, detect
from kskill.agents.observations import Observations, vocabulary
from kskill.agents.reviewer.profiling import ncu_observations, parse_ncu_csv

HALF_PRECISION = {"float16", "bfloat16"}
FP32_TOLERANCE, HALF_TOLERANCE = 1e-4, 1e-2


def default_tolerance(dtype: str) -> float:
    """ARCHITECTURE 6: atol = rtol = 1e-4 for fp32, 1e-2 for fp16/bf16."""
    return HALF_TOLERANCE if dtype in HALF_PRECISION else FP32_TOLERANCE


class FeatureExtractor:
    """Observations of the candidates of one problem, under one tolerance and one GPU.

    The reference's features and the GPU are settled once, on first use. `gpu` is a GpuSpec, None
    (then `gpu_reason` says why there is none), or "detect" to ask torch for device 0.
    """

    def __init__(self, problem_source: str, atol: float | None = None, rtol: float | None = None,
                 gpu: GpuSpec | None | str = "detect", gpu_reason: str = "no GPU given"):
        self.problem_source = problem_source
        self.atol, self.rtol = atol, rtol
        self._gpu, self._gpu_reason = gpu, gpu_reason
        self._reference: Features | None = None

    @property
    def reference(self) -> Features:
        if self._reference is None:
            self._reference = reference_features(self.problem_source)
        return self._reference

    @property
    def gpu(self) -> tuple[GpuSpec | None, str]:
        if self._gpu == "detect":
            self._gpu, self._gpu_reason = detect()
        return self._gpu, self._gpu_reason  # type: ignore[return-value]

    def observe(self, candidate_source: str | None = None, profile: Mapping[str, Any] | None = None,
                unavailable: Mapping[str, str] | None = None) -> Observations:
        """The observations of one candidate (None: the reference itself, as it runs) with a
        review's measurements and the names it could not measure, with why."""
        features = Features(dict(self.reference.values), dict(self.reference.unavailable))
        # Without a candidate the reference itself is what runs: its code is read as a candidate's
        # (no kernels of its own, no channels-last, no CUDA graph, unless it has them) and its
        # launches are the estimate from its graph.
        features = features.merged(candidate_features(candidate_source or self.problem_source))
        if candidate_source is None:
            if "est_kernel_launches" in features.values:
                features.values.setdefault("code_launches_per_forward", features.values["est_kernel_launches"])
        elif features.values.get("code_recurrent_calls") and "code_launches_per_forward" in features.values:
            # A candidate that still calls the reference's recurrent layers launches their time steps too.
            features.values["code_launches_per_forward"] += int(features.values.get("est_recurrent_launches", 0))
        dtype = _dtype(features.values)
        problem = {"atol": self.atol if self.atol is not None else default_tolerance(dtype),
                   "rtol": self.rtol if self.rtol is not None else default_tolerance(dtype)}
        spec, why = self.gpu
        return Observations.merge(profile=profile, features=features, problem=problem, gpu=spec, gpu_reason=why,
                                  unavailable=unavailable)


def gather(problem_source: str, candidate_source: str | None = None,
           measured: Mapping[str, Any] | None = None, ncu_csv: str | None = None,
           atol: float | None = None, rtol: float | None = None, gpu: Any = "detect") -> Observations:
    """One typed observation set for the Planner (`kskill plan`), through the Feature Extractor."""
    profile: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    if ncu_csv is not None:
        rows = parse_ncu_csv(ncu_csv)
        if not rows:
            raise AgentError("the Nsight Compute report holds no kernel rows; export it with `ncu --csv --page raw`")
        profile, unavailable, _ = ncu_observations(rows)
    if measured:
        profile.update(split_measured(measured))
    return FeatureExtractor(problem_source, atol, rtol, gpu).observe(candidate_source, profile, unavailable)


def split_measured(measured: Mapping[str, Any]) -> dict[str, Any]:
    """Vocabulary names pass through; raw Nsight Compute names (`a__b.c`) are mapped; others refused."""
    known = vocabulary()
    raw = {k: v for k, v in measured.items() if "__" in k}
    out = {k: v for k, v in measured.items() if "__" not in k}
    unknown = sorted(k for k in out if k not in known)
    if unknown:
        raise AgentError(f"observation {unknown[0]!r} is neither a vocabulary metric nor a raw Nsight Compute "
                         "name; `kskill skills metrics` lists the names")
    if raw:
        out.update(Observations.from_raw_ncu(raw).values)
    return out


def read_observations_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AgentError(f"cannot read observations from {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise AgentError(f"{path} must hold one JSON object of metric name -> value")
    return data


def _dtype(values: Mapping[str, Any]) -> str:
    dtypes = [d for d in str(values.get("input_dtypes", "")).split(",") if d.startswith(("float", "bfloat"))]
    return dtypes[0] if dtypes else "float32"
