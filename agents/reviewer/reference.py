"""The judge's reference: the problem loaded and built once per batch, its outputs computed once per trial.

Runs in the judge (judge.py) only, never where candidate code runs. The reference is built as the
problem builds it, its parameters created on the device; each trial's inputs are drawn on the
device from the trial's seed; the reference's outputs for a trial are kept for every candidate of
the batch while they fit in a quarter of the free memory, and recomputed otherwise. Candidates
are checked on the problem's own inputs and on the input variants (correctness.INPUT_VARIANTS)
where the reference's outputs stay finite.

On a variant, mixed signs or large inputs can make the float32 reference itself miss its exact
result by more than the tolerance (a long sum that cancels to near zero): any other summation
order then fails, however accurate. So the reference is also run in float64 on each variant, once,
and the atol it would itself need against that form (its error floor) widens the variant's
tolerance (correctness.compare_tensor). The problem's own inputs keep the plain tolerance, as
KernelBench checks them. A float64 form that does not run, or differs from the float32 one by more
than a rounding error could (randomness drawn differently, say), gives no floor.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kskill.agents.reviewer import dynamic_checks as dyn
from kskill.agents.reviewer.correctness import (
    INPUT_VARIANTS, changed_leaves, clone_tree, fingerprint, flatten_outputs, map_tensors, max_abs_difference,
    needed_atol, seeded_inputs, seeded_model, tolerance_for, weak_reference)
from kskill.agents.reviewer.protocol import TIMING_SEED, VARIANT_SEED
from kskill.agents.reviewer.runner import import_file
from kskill.agents.reviewer.timing import time_cuda


@dataclass(frozen=True)
class Trial:
    number: int
    seed: int
    variant: str | None = None


Expected = tuple[Any, list, list]  # the reference's outputs, their fingerprint, the inputs' fingerprint
# A float64 form whose error floor exceeds this share of the output's scale is not the same computation.
FLOOR_LIMIT = 1e-3


class Reference:
    """The problem's Model, built and checked once; `phase` names each step for the records."""

    def __init__(self, job: dict[str, Any], phase: Callable[[str], None]) -> None:
        self.job = job
        self.cuda = job["device"] == "cuda"
        self.device = torch.device(job["device"])
        self.seed, self.atol, self.rtol = job["seed"], job.get("atol"), job.get("rtol")
        self.cache: dict[tuple[int, str | None], Expected] = {}
        self.cached_bytes = 0
        phase("load_problem")
        self.problem = import_file(job["problem_path"], "kskill_problem")
        init_inputs = self.problem.get_init_inputs()
        if not isinstance(init_inputs, (list, tuple)):
            raise TypeError("get_init_inputs() must return a list or tuple")
        phase("build_reference")
        self.model = seeded_model(self.problem.Model, list(init_inputs), self.seed, self.device)
        phase("reference")
        self.check_once(phase)

    def check_once(self, phase: Callable[[str], None]) -> None:
        """Determinism, what the reference does to its inputs, the trial plan, the problem's facts."""
        inputs = seeded_inputs(self.problem, self.seed, self.device)
        self.input_print = fingerprint(inputs)
        ref_in = clone_tree(inputs)
        torch.manual_seed(self.seed)
        first = self.model(*ref_in)
        torch.manual_seed(self.seed)
        second = self.model(*clone_tree(inputs))
        self.sync()
        self.facts = {"mutated_inputs": changed_leaves(self.input_print, fingerprint(ref_in)),
                      "aliases_inputs": bool(dyn.aliased_outputs(first, ref_in)),
                      "output_types": dyn.output_type_names(first),
                      "output_specs": [[list(t.shape), str(t.dtype).removeprefix("torch.")]
                                       for t in flatten_outputs(first) if isinstance(t, torch.Tensor)]}
        self.cache[(self.seed, None)] = (first, fingerprint(first), self.input_print)
        diff = max_abs_difference(first, second)
        self.trials, skipped = self.plan_trials(inputs, first)
        phase("reference_float64")
        self.floors, floor_notes = self.error_floors([t for t in self.trials if t.variant is not None])
        notes = [f"the reference is not deterministic: two runs on the same inputs differ by up to {diff:.3g}"] \
            if diff > 0 else []
        notes += floor_notes
        self.flags = self.weak_output_flags(first)
        self.record = {"device": torch.cuda.get_device_name() if self.cuda else "cpu",
                       "observations": self.problem_observations(inputs, first), "notes": notes,
                       "reference_deterministic": diff == 0.0, "reference_self_max_abs_diff": diff,
                       "skipped_variants": skipped, "variant_error_floors": self.floors, "flags": self.flags,
                       "facts": self.facts}

    def plan_trials(self, inputs: list[Any], first: Any) -> tuple[list[Trial], dict[str, str]]:
        """The problem's own trials, then the input variants its reference gives finite outputs on."""
        trials = [Trial(k, self.seed + k) for k in range(self.job["trials"])]
        skipped: dict[str, str] = {}
        if not self.job.get("input_variants", True):
            return trials, {v: "input variants were turned off" for v in INPUT_VARIANTS}
        floating = any(isinstance(t, torch.Tensor) and t.dtype.is_floating_point for t in flatten_outputs(inputs))
        for j, (variant, what) in enumerate(INPUT_VARIANTS.items()):
            trial = Trial(len(trials), self.seed + VARIANT_SEED + j, variant)
            if not floating:
                skipped[variant] = "the problem has no floating-point inputs"
            elif _all_finite(first) and not _all_finite(self.expected(trial)[0]):
                skipped[variant] = f"the reference gives non-finite outputs on {what} inputs"
                self.cache.pop((trial.seed, variant), None)
            else:
                trials.append(trial)
        return trials, skipped

    def error_floors(self, trials: list[Trial]) -> tuple[dict[str, list[float]], list[str]]:
        """Per variant, per output: the atol the float32 reference needs against its float64 form."""
        if not trials:
            return {}, []
        try:
            exact_model = copy.deepcopy(self.model).double()
        except Exception as exc:  # a module that cannot be copied or cast: the variants keep the plain tolerance
            return {}, [f"no float64 form of the reference ({type(exc).__name__}: {exc}); no error floor"]
        floors: dict[str, list[float]] = {}
        notes: list[str] = []
        try:
            for trial in trials:
                floors[trial.variant], why = self._floors_of(self.expected(trial)[0], self._exact(exact_model, trial))
                if why:
                    notes.append(f"{trial.variant} inputs: {why}; no error floor")
        except Exception as exc:  # an op without a float64 kernel, or no memory for it
            return {}, [f"the reference does not run in float64 ({type(exc).__name__}: {exc}); no error floor"]
        finally:
            del exact_model
            if self.cuda:
                torch.cuda.empty_cache()  # the runner, another process, needs that memory
        return floors, notes

    def _exact(self, exact_model: torch.nn.Module, trial: Trial) -> Any:
        inputs = seeded_inputs(self.problem, trial.seed, self.device, trial.variant)
        torch.manual_seed(trial.seed)
        return exact_model(*map_tensors(inputs, lambda t: t.double() if t.dtype.is_floating_point else t))

    def _floors_of(self, outputs: Any, exact: Any) -> tuple[list[float], str]:
        floors = []
        pairs = list(zip(flatten_outputs(outputs), flatten_outputs(exact)))
        for number, (ref, ex) in enumerate(pairs):
            if not (isinstance(ref, torch.Tensor) and isinstance(ex, torch.Tensor) and ref.dtype.is_floating_point
                    and ref.dtype != torch.float64 and ref.shape == ex.shape):
                floors.append(0.0)
                continue
            floor = needed_atol(ref, ex, tolerance_for(ref.dtype, self.atol, self.rtol)[1])
            scale = float(ex.abs().nan_to_num(posinf=0.0).max()) if ex.numel() else 0.0
            if floor > FLOOR_LIMIT * scale:
                return [0.0] * len(pairs), (f"the float64 form differs from output {number} by {floor:.3g}, "
                                            f"more than rounding at scale {scale:.3g}")
            floors.append(floor)
        return floors, ""

    def expected(self, trial: Trial) -> Expected:
        """The reference's outputs for a trial and the fingerprints, computed once while memory allows."""
        key = (trial.seed, trial.variant)
        if key in self.cache:
            return self.cache[key]
        inputs = seeded_inputs(self.problem, trial.seed, self.device, trial.variant)
        before = fingerprint(inputs)
        torch.manual_seed(trial.seed)
        outputs = self.model(*inputs)
        self.sync()
        entry = (outputs, fingerprint(outputs), before)
        size = sum(t.numel() * t.element_size() for t in flatten_outputs(outputs) if isinstance(t, torch.Tensor))
        if self.cached_bytes + size <= self.cache_budget():
            self.cache[key] = entry
            self.cached_bytes += size
        return entry

    def cache_budget(self) -> float:
        """A quarter of what is free: the rest is for the runner and the comparisons."""
        if self.cuda:
            return torch.cuda.mem_get_info()[0] / 4
        return self.job["memory_limit_mb"] * 2**20 / 4

    def own_time_ms(self) -> float | None:
        """The reference timed alone in the judge: what its time beside the candidates must agree with."""
        if not self.cuda:
            return None
        inputs = seeded_inputs(self.problem, self.seed + TIMING_SEED, self.device)
        t = self.job["timing"]
        raw = time_cuda({"reference": lambda: self.model(*inputs)}, warmup_ms=t["warmup_ms"], rep_ms=t["rep_ms"],
                        min_reps=t["min_reps"], max_reps=t["max_reps"])
        return raw["stats"]["reference"]["median_ms"]

    def weak_output_flags(self, outputs: Any) -> list[dict[str, Any]]:
        flags = []
        for number, out in enumerate(flatten_outputs(outputs)):
            if not isinstance(out, torch.Tensor):
                continue
            weak = weak_reference(out, tolerance_for(out.dtype, self.atol, self.rtol)[0])
            if weak is not None:
                flags.append({"code": "weak_reference_output", "severity": "warn", "origin": "dynamic",
                              "message": f"output {number} of the reference is {weak[0]} (scale {weak[1]:.3g}); "
                                         "it is judged by relative error where it has a scale"})
        return flags

    def problem_observations(self, inputs: list[Any], outputs: Any) -> dict[str, Any]:
        tensors_in = [t for t in flatten_outputs(inputs) if isinstance(t, torch.Tensor)]
        tensors_out = [t for t in flatten_outputs(outputs) if isinstance(t, torch.Tensor)]
        floating = [t for t in tensors_in + tensors_out if t.dtype.is_floating_point]
        main = tensors_out[0].dtype if tensors_out else torch.float32
        atol, rtol = tolerance_for(main, self.atol, self.rtol)
        typical = floating or tensors_out or tensors_in
        return {
            "dtype": str(typical[0].dtype).removeprefix("torch.") if typical else "unknown",
            "atol": atol, "rtol": rtol,
            "output_numel": sum(t.numel() for t in tensors_out),
            "input_bytes": sum(t.numel() * t.element_size() for t in tensors_in),
            "batchnorm_training": any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training
                                      for m in self.model.modules()),
        }

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def _all_finite(value: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in flatten_outputs(value)
               if isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex))
