"""Gather the observations a plan is made from: static features of the problem (and candidate),
problem facts, and profiler metrics given by vocabulary name, by raw Nsight Compute name, or as
an `ncu --csv --page raw` report. Nothing in a candidate is executed here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kskill.agents.errors import AgentError
from kskill.agents.candidate_features import candidate_features
from kskill.agents.features import reference_features
from kskill.agents.observations import Observations, vocabulary
from kskill.agents.reviewer.profiling import ncu_observations, parse_ncu_csv

HALF_PRECISION = {"float16", "bfloat16"}
FP32_TOLERANCE, HALF_TOLERANCE = 1e-4, 1e-2


def default_tolerance(dtype: str) -> float:
    """ARCHITECTURE 6: atol = rtol = 1e-4 for fp32, 1e-2 for fp16/bf16."""
    return HALF_TOLERANCE if dtype in HALF_PRECISION else FP32_TOLERANCE


def gather(problem_source: str, candidate_source: str | None = None,
           measured: Mapping[str, Any] | None = None, ncu_csv: str | None = None,
           atol: float | None = None, rtol: float | None = None, gpu: Any = "detect") -> Observations:
    """One typed observation set for the Planner."""
    features = reference_features(problem_source)
    if candidate_source is not None:
        features = features.merged(candidate_features(candidate_source))
    else:
        # Without a candidate the reference itself is what runs: its launches are the estimate,
        # and it has no kernels of its own.
        features.values.setdefault("code_custom_kernels", 0)
        if "est_kernel_launches" in features.values:
            features.values.setdefault("code_launches_per_forward", features.values["est_kernel_launches"])
    profile: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    if ncu_csv is not None:
        rows = parse_ncu_csv(ncu_csv)
        if not rows:
            raise AgentError("the Nsight Compute report holds no kernel rows; export it with `ncu --csv --page raw`")
        profile, unavailable, _ = ncu_observations(rows)
    if measured:
        profile.update(split_measured(measured))
    dtype = _dtype(features.values)
    problem = {"atol": atol if atol is not None else default_tolerance(dtype),
               "rtol": rtol if rtol is not None else default_tolerance(dtype)}
    return Observations.merge(profile=profile, features=features, problem=problem, gpu=gpu,
                              unavailable=unavailable)


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
