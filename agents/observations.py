"""One typed set of observations per candidate: profiler metrics, static features and problem
facts under their vocabulary names, plus the metrics derived from them.

The vocabulary (names, types, raw Nsight Compute names) is graph_schema/skills/metrics.yaml.
Every name that could not be observed is kept in `unavailable` with the reason; a value is never
invented for it. Derived metrics are computed deterministically, and how each was obtained is
kept in `derivations` so an audit can show it. `to_params()` is the flat map the Planner's
Cypher evaluates Conditions against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kskill.agents.errors import AgentError
from kskill.agents.gpus import GpuSpec, detect, ridge_bounds
from kskill.graph_schema.model import Metric, Scalar

BOUND_PCT = 60.0  # "NCU memory throughput > 60% | Memory-bound" (liger optimization strategies)
FLOATING = ("float32", "float16", "bfloat16", "float64")
IMPOSSIBLE_ROOFLINE = 1.1  # past the roof by more than timing noise: the estimate's assumptions are wrong


class ObservationError(AgentError):
    """A value does not fit the vocabulary (wrong type for its metric)."""


@lru_cache(maxsize=1)
def vocabulary() -> dict[str, Metric]:
    """The Metric vocabulary of the built-in skill base, by name."""
    from kskill.graph_schema.skillbase import read_builtin

    nodes = read_builtin().payload.nodes.values()
    return {n.id: n for n in nodes if isinstance(n, Metric)}


@lru_cache(maxsize=1)
def ncu_name_map() -> dict[str, str]:
    """Raw Nsight Compute metric name -> vocabulary name, from the ncu_names in metrics.yaml."""
    return {raw: m.id for m in vocabulary().values() for raw in m.ncu_names}


def _coerce(name: str, value: Any) -> Scalar:
    kind = vocabulary()[name].type
    if kind == "bool":
        if isinstance(value, bool):
            return value
    elif kind == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    elif isinstance(value, str):
        return value
    raise ObservationError(f"metric {name} is a {kind} (graph_schema/skills/metrics.yaml) but got {value!r}")


@dataclass
class Observations:
    """Values by vocabulary name; unavailable names with why; derivations; names not in the vocabulary."""

    values: dict[str, Scalar] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    derivations: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def set(self, name: str, value: Any, how: str = "") -> None:
        """Record one value (validated against its metric's type), or its absence when None/NaN."""
        if name not in vocabulary():
            self.unknown[name] = value
            return
        if value is None or (isinstance(value, float) and math.isnan(value)):
            self.unavailable.setdefault(name, "reported without a value")
            return
        self.values[name] = _coerce(name, value)
        self.unavailable.pop(name, None)
        if how:
            self.derivations[name] = how

    def mark_unavailable(self, name: str, reason: str) -> None:
        if name not in self.values:
            self.unavailable[name] = reason

    def to_params(self) -> dict[str, Scalar]:
        """The flat name -> value map the Planner's Cypher evaluates conditions against."""
        return dict(self.values)

    @classmethod
    def from_raw_ncu(cls, raw: Mapping[str, Any]) -> Observations:
        """Map one kernel's raw `ncu --csv --page raw` metrics to vocabulary names."""
        obs = cls()
        for name, value in _ncu_values(raw).items():
            obs.set(name, value)
        branches = _number(raw.get(BRANCH_COUNT))
        if obs.values.get("branch_efficiency_pct") == 0 and not branches:
            # ncu prints 0 % uniform branch targets for a kernel that executes no branch at all:
            # that is no divergence, not total divergence.
            del obs.values["branch_efficiency_pct"]
            obs.unavailable["branch_efficiency_pct"] = "the kernel executed no branch instructions"
        for metric in vocabulary().values():
            if metric.source == "ncu" and metric.id not in obs.values:
                obs.unavailable.setdefault(metric.id, "not among the Nsight Compute metrics given")
        return obs

    @classmethod
    def merge(cls, profile: Mapping[str, Any] | Observations | None = None,
              features: Any = None, problem: Mapping[str, Any] | None = None,
              gpu: GpuSpec | None | str = "detect",
              unavailable: Mapping[str, str] | None = None, gpu_reason: str = "no GPU given") -> Observations:
        """Profiler metrics, static features and problem facts in one set, with derived metrics.

        `profile`: vocabulary name -> value from the Reviewer (or an Observations from
        `from_raw_ncu`); `features`: a Features (or mapping); `problem`: facts such as dtype,
        atol and rtol; `gpu`: a GpuSpec, None for none (`gpu_reason` says why), or "detect" to ask torch;
        `unavailable`: names the Reviewer could not measure, with its reasons.
        Measured values win over derived ones: a derived metric the profile already holds is kept.
        """
        obs = cls()
        feature_values = getattr(features, "values", features) or {}
        for name, reason in (getattr(features, "unavailable", None) or {}).items():
            obs.mark_unavailable(name, reason)
        for source in (feature_values, problem or {}):
            for name, value in source.items():
                obs.set(name, value)
        if isinstance(profile, Observations):
            for name, reason in profile.unavailable.items():
                obs.mark_unavailable(name, reason)
            profile_values: Mapping[str, Any] = profile.values
        else:
            profile_values = profile or {}
        for name, value in profile_values.items():
            obs.set(name, value, "measured")
        for name, reason in (unavailable or {}).items():
            obs.mark_unavailable(name, reason)
        spec, why = detect() if gpu == "detect" else (gpu, gpu_reason)
        _derive(obs, spec, why)
        for name in vocabulary():
            if name not in obs.values and name not in obs.unavailable:
                obs.unavailable[name] = "not observed"
        return obs


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None


BRANCH_COUNT = "smsp__sass_branch_targets.sum"  # collected beside the branch-efficiency ratio

# Raw names that are parts of one quantity: summed when no name for the whole is present.
_PARTS = {
    "shared_mem_per_block_bytes": ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
    "shared_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                              "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
}
_LARGEST = {"tensor_pipe_utilization_pct"}  # per-architecture variants: the one that ran
_MEMORY_STALLS = ("long_scoreboard", "short_scoreboard", "lg_throttle", "mio_throttle", "tex_throttle", "drain",
                  "imc_miss")
_STALL_PREFIXES = ("smsp__average_warps_issue_stalled_", "smsp__pcsamp_warps_issue_stalled_")
_INTEGERS = {"registers_per_thread", "grid_size", "block_size", "shared_mem_per_block_bytes",
             "shared_bank_conflicts"}
_LIMITS = {"launch__occupancy_limit_registers": "registers", "launch__occupancy_limit_shared_mem": "shared_memory",
           "launch__occupancy_limit_warps": "warps", "launch__occupancy_limit_blocks": "blocks"}


def _stall_shares(raw: Mapping[str, float]) -> dict[str, float]:
    """Per-reason stall values as percent of the cycles between issues (or of all stalls).

    Only the first counter family present is used: the sampled (pcsamp) counters measure the
    same stalls again, and summing both families would count each stall twice.
    """
    for prefix in _STALL_PREFIXES:
        suffix = "_per_issue_active.ratio" if "average" in prefix else ""
        reasons = {k[len(prefix):len(k) - len(suffix)]: v for k, v in raw.items()
                   if k.startswith(prefix) and k.endswith(suffix) and "." not in k[len(prefix):len(k) - len(suffix)]
                   and not k[len(prefix):].startswith(("not_issued", "selected"))}
        total = raw.get("smsp__average_warps_active_per_issue_active.ratio") if "average" in prefix else None
        total = total or sum(reasons.values())
        if reasons and total > 0:
            return {prefix + reason + suffix: 100.0 * value / total for reason, value in reasons.items()}
    return {}


def _ncu_values(raw_in: Mapping[str, Any]) -> dict[str, Scalar]:
    raw = {k: v for k, v in ((k, _number(v)) for k, v in raw_in.items()) if v is not None}
    stall = _stall_shares(raw)
    out: dict[str, Scalar] = {}
    for metric in vocabulary().values():
        if metric.source != "ncu" or metric.id == "occupancy_limiter":
            continue
        parts = _PARTS.get(metric.id, ())
        whole = [(stall if n in stall else raw)[n] for n in metric.ncu_names if n in raw and n not in parts]
        present = whole or [raw[n] for n in parts if n in raw]
        if not present:
            continue
        if not whole:
            value = sum(present)
        elif metric.id in _LARGEST:
            value = max(present)
        else:
            value = present[0]
        out[metric.id] = int(value) if metric.id in _INTEGERS else value
    memory = [v for k, v in stall.items() if any(f"_stalled_{r}" in k for r in _MEMORY_STALLS)]
    if memory:
        out["memory_stall_share"] = sum(memory) / 100.0
    limits = {kind: raw[name] for name, kind in _LIMITS.items() if name in raw}
    if len(limits) == len(_LIMITS):
        full = raw.get("sm__maximum_warps_per_active_cycle_pct", 0.0) >= 99.9
        out["occupancy_limiter"] = "none" if full else min(limits, key=lambda k: limits[k])
    return out


# --- derived metrics ------------------------------------------------------------------------------


def _tensor_cores(obs: Observations) -> bool:
    """Whether the compute roof is the tensor-core one: contractions in half precision, TF32 turned on,
    or fp32 convolutions, which cuDNN runs in TF32 unless told not to (torch.backends.cudnn.allow_tf32
    is on by default, unlike the matmul switch)."""
    if not obs.get("has_contraction"):
        return False
    return (obs.get("dtype") in ("float16", "bfloat16") or bool(obs.get("code_uses_tf32"))
            or (bool(obs.get("has_convolution")) and obs.get("dtype") == "float32"))


def _derive(obs: Observations, spec: GpuSpec | None, gpu_why: str) -> None:
    _derive_dtype(obs)
    if spec is not None:
        obs.set("gpu_name", spec.name, f"peak table entry {spec.key}")
        obs.set("gpu_arch", spec.arch, f"peak table entry {spec.key}")
        obs.set("gpu_sm_count", spec.sm_count, f"peak table entry {spec.key}")
    else:
        for name in ("gpu_name", "gpu_arch", "gpu_sm_count", "ridge_point"):
            obs.mark_unavailable(name, gpu_why)
    flops, moved = obs.get("flops"), obs.get("bytes_moved")
    if "arithmetic_intensity" not in obs.values and flops is not None and moved:
        obs.set("arithmetic_intensity", flops / moved, "flops / bytes_moved of the reference")
    dtype, tensor = obs.get("dtype"), _tensor_cores(obs)
    if spec is not None and isinstance(dtype, str):
        ridge = spec.ridge_point(dtype, tensor)
        if ridge is None:
            obs.mark_unavailable("ridge_point", f"the peak table has no {dtype} figure")
        else:
            obs.set("ridge_point", ridge, f"{spec.key} {'tensor-core' if tensor else 'CUDA-core'} peak / DRAM bandwidth")
    _derive_roofline(obs, spec, gpu_why)
    _derive_launches(obs, spec, gpu_why)
    _derive_boundness(obs, spec, tensor)
    _derive_ratios(obs)
    _derive_fusion(obs)


def _derive_dtype(obs: Observations) -> None:
    dtypes = str(obs.get("input_dtypes", "")).split(",")
    floating = [d for d in dtypes if d in FLOATING]
    if "dtype" not in obs.values and len(set(floating)) == 1:
        obs.set("dtype", floating[0], "the one floating dtype among the reference inputs")


def roofline_seconds(obs: Observations, spec: GpuSpec) -> float | None:
    """The roofline's time for the work the observations describe: max(flops/peak, bytes_moved/bandwidth),
    or None when a figure is missing."""
    flops, moved = obs.get("flops"), obs.get("bytes_moved")
    peak = spec.peak_flops(obs.get("dtype", ""), _tensor_cores(obs))
    if flops is None or moved is None or peak is None:
        return None
    return max(flops / peak, moved / spec.dram_bandwidth)


def _derive_roofline(obs: Observations, spec: GpuSpec | None, gpu_why: str) -> None:
    if "roofline_fraction" not in obs.values:
        runtime = obs.get("runtime_ms")
        roof_s = roofline_seconds(obs, spec) if spec is not None else None
        if spec is None:
            obs.mark_unavailable("roofline_fraction", gpu_why)
        elif roof_s is None or not runtime:
            missing = [n for n in ("flops", "bytes_moved", "runtime_ms") if obs.get(n) is None]
            obs.mark_unavailable("roofline_fraction", f"needs {', '.join(missing) or 'a peak for this dtype'}")
        else:
            fraction = roof_s / (runtime / 1e3)
            if fraction > IMPOSSIBLE_ROOFLINE:  # faster than the roof: the peak assumed is not the unit that ran
                obs.mark_unavailable("roofline_fraction", f"the estimate came out at {fraction:.0%} of the roof, so "
                                     "the kernels ran on a faster unit than the peak assumed (cuDNN and cuBLAS "
                                     "use TF32 tensor cores for fp32 by default) or moved fewer bytes")
            else:
                obs.set("roofline_fraction", fraction,
                        f"max(flops/peak, bytes_moved/bandwidth) on {spec.key} over runtime_ms")
    if "headroom" not in obs.values and "roofline_fraction" in obs.values:
        obs.set("headroom", max(0.0, 1.0 - float(obs.values["roofline_fraction"])), "1 - roofline_fraction")
    if "speedup" not in obs.values and obs.get("runtime_ms") and obs.get("reference_runtime_ms") is not None:
        obs.set("speedup", obs.values["reference_runtime_ms"] / obs.values["runtime_ms"],
                "reference_runtime_ms / runtime_ms")


def _derive_launches(obs: Observations, spec: GpuSpec | None, gpu_why: str) -> None:
    """How many kernels a forward launches (measured, else counted in the code), and how much device
    work each of the reference's launches carries at best: the static view of launch overhead."""
    if "launches_per_forward" not in obs.values:
        for name, how in (("kernel_launches_per_forward", "torch.profiler's kernel count"),
                          ("code_launches_per_forward", "launch sites counted in the code (static estimate)")):
            if obs.get(name) is not None:
                obs.set("launches_per_forward", obs.values[name], how)
                break
    if spec is None:
        obs.mark_unavailable("est_launch_work_us", gpu_why)
        return
    # Eager's kernels move every intermediate too, so its device time is bounded by eager_bytes_moved,
    # not by the problem's compulsory bytes.
    launches, flops, moved = obs.get("est_kernel_launches"), obs.get("flops"), obs.get("eager_bytes_moved")
    peak = spec.peak_flops(obs.get("dtype", ""), _tensor_cores(obs))
    if not launches or flops is None or moved is None or peak is None:
        obs.mark_unavailable("est_launch_work_us", "needs est_kernel_launches, flops, eager_bytes_moved and "
                                                   "a peak for this dtype")
        return
    work_s = max(flops / peak, moved / spec.dram_bandwidth)
    obs.set("est_launch_work_us", work_s * 1e6 / launches,
            f"max(flops/peak, eager_bytes_moved/bandwidth) on {spec.key} / est_kernel_launches ({launches})")


def derive_from_counters(obs: Observations) -> None:
    """The derived metrics Nsight Compute counters alone settle (boundness, wave efficiency, memory
    stall share), by the rules `merge` applies: the Reviewer stores them with the counters."""
    _derive_boundness(obs, None, False)
    _derive_ratios(obs)


def _derive_boundness(obs: Observations, spec: GpuSpec | None, tensor: bool) -> None:
    if "memory_bound" in obs.values and "compute_bound" in obs.values:
        return
    sm, mem = obs.get("sm_throughput_pct"), obs.get("memory_throughput_pct")
    if sm is not None and mem is not None:
        how = f"Nsight Compute: the larger of SM and memory throughput, at least {BOUND_PCT:.0f}% of peak"
        obs.set("memory_bound", mem > sm and mem >= BOUND_PCT, how)
        obs.set("compute_bound", sm >= mem and sm >= BOUND_PCT, how)
        return
    intensity, dtype = obs.get("arithmetic_intensity"), obs.get("dtype")
    if intensity is None or not isinstance(dtype, str):
        for name in ("memory_bound", "compute_bound"):
            obs.mark_unavailable(name, "needs Nsight Compute throughput or arithmetic_intensity and dtype")
        return
    if spec is not None and (ridge := spec.ridge_point(dtype, tensor)) is not None:
        low = high = ridge
        basis = f"arithmetic_intensity against the {spec.key} ridge point {ridge:.1f} FLOP/byte"
    elif (bounds := ridge_bounds(dtype, tensor)) is not None:
        low, high = bounds
        basis = (f"arithmetic_intensity against every known GPU's ridge point ({low:.1f}-{high:.1f} FLOP/byte); "
                 "no GPU detected")
    else:
        for name in ("memory_bound", "compute_bound"):
            obs.mark_unavailable(name, f"the peak table has no {dtype} figure")
        return
    obs.set("memory_bound", intensity < low, basis)
    obs.set("compute_bound", intensity > high, basis)


def _derive_ratios(obs: Observations) -> None:
    if "memory_stall_share" not in obs.values and obs.get("warp_stall_long_scoreboard_pct") is not None:
        parts = [n for n in ("warp_stall_long_scoreboard_pct", "warp_stall_lg_throttle_pct") if n in obs.values]
        obs.set("memory_stall_share", sum(obs.values[n] for n in parts) / 100.0, " + ".join(parts) + ", as a fraction")
    waves = obs.get("waves_per_sm")
    if waves is not None and waves > 0:
        obs.set("wave_efficiency", waves / math.ceil(waves), "waves_per_sm / ceil(waves_per_sm)")
    if obs.get("dram_bytes") is not None and obs.get("bytes_moved"):
        obs.set("dram_traffic_excess", obs.values["dram_bytes"] / obs.values["bytes_moved"], "dram_bytes / bytes_moved")


def fused_ops(chain: int, at_row_op: int | None) -> int:
    """How many operators one fused kernel would take: a pointwise chain alone, or a row operator with
    the chain it could absorb (max_fused_ops)."""
    return max(chain, at_row_op + 1) if at_row_op else chain


def _derive_fusion(obs: Observations) -> None:
    chain, at_row = obs.get("max_pointwise_chain"), obs.get("row_op_pointwise_chain")
    if "max_fused_ops" in obs.values or chain is None:
        return
    how = "max(max_pointwise_chain, row_op_pointwise_chain + 1)" if at_row else \
        "max_pointwise_chain (no row operator that could absorb a chain)"
    obs.set("max_fused_ops", fused_ops(chain, at_row), how)
