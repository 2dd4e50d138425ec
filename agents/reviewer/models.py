"""Typed results of a review: options in, Review out, both serialisable to JSON.

The sandboxed judge answers with signed plain JSON records; these models validate that answer
at the boundary, so a malformed result is refused rather than trusted. Fields added since the
first version have defaults, so review.json files written before still load.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FailureClass = Literal["compile", "runtime", "numeric", "timeout", "cheating", "memory", "other"]
Severity = Literal["reject", "warn", "info"]
ObservationValue = float | int | bool | str


class ReviewOptions(BaseModel):
    """How to review. Defaults follow ARCHITECTURE section 6."""

    model_config = ConfigDict(extra="forbid")

    trials: int = Field(5, ge=1, description="correctness trials on fresh random inputs")
    input_variants: bool = Field(True, description="also check on mixed-sign and scaled inputs (2x-1, 100x) "
                                 "where the reference's outputs stay finite")
    atol: float | None = Field(None, ge=0, description="absolute tolerance for every output (default per dtype)")
    rtol: float | None = Field(None, ge=0, description="relative tolerance for every output (default per dtype)")
    seed: int = 42
    device: Literal["auto", "cpu", "cuda"] = "auto"
    timing: bool = True
    warmup_ms: float = Field(25.0, gt=0, description="GPU warm-up per function, as triton.testing.do_bench")
    rep_ms: float = Field(100.0, gt=0, description="GPU measuring time per function, as do_bench")
    min_reps: int = Field(20, ge=2)
    max_reps: int = Field(1000, ge=2)
    cpu_timing_reps: int = Field(3, ge=2, description="timed calls per function on the CPU (not representative)")
    compile_reference: bool = Field(False, description="also time torch.compile of the reference")
    profile: bool = True
    ncu: bool = Field(True, description="collect Nsight Compute metrics when ncu and the counters are usable")
    max_speedup: float = Field(10.0, gt=1, description="speedups above this are re-verified and flagged")
    static_checks: bool = Field(True, description="reject candidates whose source fails the anti-cheat checks")
    timeout_s: float = Field(300.0, gt=0, description="wall-clock limit for each candidate's checks "
                             "(and for each timing run)")
    ncu_timeout_s: float = Field(300.0, gt=0)
    profile_cache_dir: str | None = Field(None, description="where the reference's Nsight Compute profile is "
                                          "kept by problem hash across runs; None profiles no reference")
    memory_limit_mb: int = Field(16384, ge=256, description="host memory limit of the worker")
    gpu_memory_fraction: float = Field(0.9, gt=0, le=1)
    isolate_network: bool = True
    unsandboxed_ok: bool = Field(False, description="where no sandbox works, run without one (trusted code only)")
    hidden_paths: list[str] = Field(default_factory=list, description="private paths the sandbox must never show")
    keep_workdir: bool = False
    kernel_cache: str | None = Field(None, description="a folder that carries compiled Triton kernels from one "
                                     "batch to the next (kernel_cache.py); for trusted code only")


class Flag(BaseModel):
    """One finding of the anti-cheat checks."""

    code: str
    severity: Severity
    message: str
    origin: Literal["static", "dynamic"]
    line: int | None = None


class OutputComparison(BaseModel):
    """One output of one trial compared with the reference."""

    output: int
    dtype: str
    shape: list[int]
    reference_shape: list[int]
    atol: float
    rtol: float
    passed: bool
    numel: int = 0
    mismatched: int = 0
    max_abs_error: float = 0.0
    max_abs_index: list[int] = Field(default_factory=list)
    max_rel_error: float = 0.0  # |a - b| / max(|b|, atol): finite where the reference is zero
    max_rel_index: list[int] = Field(default_factory=list)
    reference_scale: float | None = None  # set when the reference's output is weak (zeros, constant, tiny)
    note: str = ""
    message: str = ""


class TrialResult(BaseModel):
    trial: int
    seed: int
    passed: bool
    variant: str | None = None  # None: the problem's own get_inputs; else a key of correctness.INPUT_VARIANTS
    outputs: list[OutputComparison] = Field(default_factory=list)
    message: str = ""


class Correctness(BaseModel):
    trials_run: int = 0
    trials_passed: int = 0
    trials: list[TrialResult] = Field(default_factory=list)
    reference_deterministic: bool | None = None
    reference_self_max_abs_diff: float | None = None
    parameters_copied: int = 0
    skipped_variants: dict[str, str] = Field(default_factory=dict)
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0


class TimingStats(BaseModel):
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    p20_ms: float
    p80_ms: float
    n: int


class Timing(BaseModel):
    method: Literal["cuda_events", "perf_counter"]
    representative: bool
    note: str = ""
    reference: TimingStats
    candidate: TimingStats
    compiled_reference: TimingStats | None = None
    speedup: float
    speedup_vs_compiled: float | None = None
    l2_flush_bytes: int = 0
    warmup_reps: int = 0
    functions_timed: int = 2  # the reference and every candidate of the batch, interleaved
    candidate_device_ms: float | None = None  # GPU time per call that torch.profiler saw
    reference_device_ms: float | None = None
    judge_reference_ms: float | None = None  # the reference timed alone in the judge's own process


class Isolation(BaseModel):
    """What the sandbox could enforce for this run, as the worker saw it from inside, so a reader knows
    what to trust."""

    network_isolated: bool
    network_note: str = ""
    memory_limit_mb: int
    memory_strategy: str
    timeout_s: float
    dropped_env: list[str] = Field(default_factory=list)
    sandbox: Literal["bwrap", "unshare", "none"] = "none"
    sandbox_note: str = Field("", description="why a stronger sandbox was not used")
    namespaces: list[str] = Field(default_factory=list, description="user, mount, pid, ipc, uts, net: those made")
    read_only: list[str] = Field(default_factory=list, description="host paths the worker sees, read-only")
    writable: list[str] = Field(default_factory=list, description="the only paths the worker can write")
    hidden: list[str] = Field(default_factory=list, description="private paths inside read-only ones, covered")
    devices: list[str] = Field(default_factory=list)
    env_passed: list[str] = Field(default_factory=list, description="names passed from kskill's environment")
    process_limit: int = 0
    limits_note: str = ""
    peak_memory_mb: float | None = Field(None, description="the whole sandbox's highest memory seen: the sum of "
                                         "resident sizes, or of PSS where that sum neared the limit")
    peak_processes: int | None = None


class Review(BaseModel):
    """The Reviewer's verdict on one candidate for one problem."""

    problem: str
    candidate_hash: str
    device: str = "unknown"
    compiled: bool = False
    correct: bool = False
    failure_class: FailureClass | None = None
    failure_message: str = ""
    failure_phase: str = ""
    log: str = ""
    correctness: Correctness | None = None
    timing: Timing | None = None
    observations: dict[str, ObservationValue] = Field(default_factory=dict)
    unavailable: dict[str, str] = Field(default_factory=dict)
    flags: list[Flag] = Field(default_factory=list)
    profile: dict[str, Any] = Field(default_factory=dict)
    # The reference's own profile (torch.profiler, and Nsight Compute from the cache or a run), on the
    # reviews completed after it was taken: every passing one.
    reference_observations: dict[str, ObservationValue] = Field(default_factory=dict)
    reference_unavailable: dict[str, str] = Field(default_factory=dict)
    isolation: Isolation | None = None
    wall_time_s: float = 0.0  # from the start of its batch to this verdict

    @property
    def passed(self) -> bool:
        """Compiled, correct and not rejected by any check."""
        return self.compiled and self.correct and self.failure_class is None

    def rejecting_flags(self) -> list[Flag]:
        return [f for f in self.flags if f.severity == "reject"]

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)
