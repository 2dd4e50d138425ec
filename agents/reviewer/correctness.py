"""Output comparison for the worker: every output, per-dtype tolerance, largest errors and where.

Runs inside the sandboxed worker (imports torch). A passing element satisfies
|candidate - reference| <= atol + rtol * |reference|, the rule of torch.allclose; NaNs must
sit at the same places; integer and bool outputs must match exactly.
"""

from __future__ import annotations

from typing import Any

import torch

# Defaults per output dtype (ARCHITECTURE 6); narrower float types (fp8) take the fp16 default.
DEFAULT_TOLERANCES = {
    torch.float64: 1e-4, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2,
}


def flatten_outputs(value: Any) -> list[Any]:
    """The leaves of a forward's result: a tensor, or nested tuples/lists of tensors and scalars."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten_outputs(item)]
    return [value]


def tolerance_for(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    """(atol, rtol) for an output dtype; options override the per-dtype default; exact for integers."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return 0.0, 0.0
    default = DEFAULT_TOLERANCES.get(dtype, 1e-2)
    return (default if atol is None else atol), (default if rtol is None else rtol)


def _index(flat_index: int, shape: torch.Size) -> list[int]:
    return [int(i) for i in torch.unravel_index(torch.tensor(flat_index), shape)] if len(shape) else []


def compare_tensor(out: torch.Tensor, ref: torch.Tensor, number: int,
                   atol: float | None, rtol: float | None) -> dict[str, Any]:
    """One output compared with its reference, as an OutputComparison dict."""
    a_tol, r_tol = tolerance_for(ref.dtype, atol, rtol)
    result: dict[str, Any] = {
        "output": number, "dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape),
        "reference_shape": list(ref.shape), "atol": a_tol, "rtol": r_tol, "numel": ref.numel(),
    }
    if out.shape != ref.shape:
        return {**result, "passed": False, "mismatched": ref.numel(),
                "message": f"shape mismatch: candidate {tuple(out.shape)}, reference {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        result["message"] = f"dtype differs: candidate {out.dtype}, reference {ref.dtype}"
        if out.dtype.is_floating_point != ref.dtype.is_floating_point:
            return {**result, "passed": False, "mismatched": ref.numel()}
    if out.device != ref.device:
        out = out.to(ref.device)
    if ref.numel() == 0:
        return {**result, "passed": True}
    a = out.detach().to(torch.float64)
    b = ref.detach().to(torch.float64)
    both_nan = torch.isnan(a) & torch.isnan(b)
    diff = torch.where(both_nan, torch.zeros_like(a), (a - b).abs())
    diff = torch.nan_to_num(diff, nan=float("inf"))  # a NaN where the reference has a number fails
    bad = diff > (a_tol + r_tol * b.abs().nan_to_num(nan=0.0))
    rel = diff / b.abs().clamp_min(max(a_tol, 1e-12))
    abs_at = int(diff.flatten().argmax())
    rel_at = int(rel.flatten().argmax())
    mismatched = int(bad.sum())
    result.update(
        passed=mismatched == 0, mismatched=mismatched,
        max_abs_error=float(diff.flatten()[abs_at]), max_abs_index=_index(abs_at, ref.shape),
        max_rel_error=float(rel.flatten()[rel_at]), max_rel_index=_index(rel_at, ref.shape),
    )
    if mismatched:
        result["message"] = (f"{mismatched} of {ref.numel()} elements outside atol={a_tol:g} rtol={r_tol:g}; "
                             f"largest error {result['max_abs_error']:.3g} at {result['max_abs_index']}")
    return result


def compare_outputs(candidate: Any, reference: Any, atol: float | None,
                    rtol: float | None) -> tuple[bool, list[dict[str, Any]], str]:
    """(passed, per-output comparisons, message) for one trial."""
    outs, refs = flatten_outputs(candidate), flatten_outputs(reference)
    if len(outs) != len(refs):
        return False, [], f"the candidate returned {len(outs)} outputs, the reference {len(refs)}"
    comparisons = []
    for number, (out, ref) in enumerate(zip(outs, refs)):
        if isinstance(ref, torch.Tensor):
            if not isinstance(out, torch.Tensor):
                return False, comparisons, f"output {number} is {type(out).__name__}, the reference a tensor"
            comparisons.append(compare_tensor(out, ref, number, atol, rtol))
        elif isinstance(ref, (int, float, bool)) and isinstance(out, (int, float, bool)):
            ok = abs(float(out) - float(ref)) <= (atol or 1e-6) + (rtol or 1e-6) * abs(float(ref))
            comparisons.append({"output": number, "dtype": type(ref).__name__, "shape": [], "reference_shape": [],
                                "atol": atol or 1e-6, "rtol": rtol or 1e-6, "passed": ok, "numel": 1,
                                "mismatched": 0 if ok else 1, "max_abs_error": abs(float(out) - float(ref))})
        elif out != ref:
            return False, comparisons, f"output {number} is {out!r}, the reference {ref!r}"
    failed = [c for c in comparisons if not c["passed"]]
    message = "; ".join(f"output {c['output']}: {c.get('message', 'mismatch')}" for c in failed)
    return not failed, comparisons, message


def max_abs_difference(first: Any, second: Any) -> float:
    """Largest elementwise difference between two results of the same function (inf if shapes differ)."""
    worst = 0.0
    for a, b in zip(flatten_outputs(first), flatten_outputs(second), strict=True):
        if isinstance(a, torch.Tensor):
            if a.shape != b.shape:
                return float("inf")
            if a.numel():
                d = (a.detach().double() - b.detach().double()).abs()
                d = torch.where(torch.isnan(a) & torch.isnan(b), torch.zeros_like(d), d).nan_to_num(nan=float("inf"))
                worst = max(worst, float(d.max()))
        elif a != b:
            worst = float("inf")
    return worst


def clone_tree(value: Any) -> Any:
    """A deep copy of tensors inside tuples/lists (inputs are cloned so each model gets its own)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(clone_tree(v) for v in value)
    return value


def to_device(value: Any, device: torch.device) -> Any:
    """Move tensors to the device keeping their dtypes (integer and bool inputs stay as they are)."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value
