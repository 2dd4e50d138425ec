"""Output comparison for the judge: every output, per-dtype tolerance, largest errors and where.

Runs inside the sandbox (imports torch only). A passing element satisfies
|candidate - reference| <= atol + rtol * |reference|, the rule of torch.allclose; NaNs must
sit at the same places; integer and bool outputs must match exactly. Outputs are compared in
chunks of 64M elements, so a 6 GB output needs a few gigabytes of temporaries, not 50.

A reference output whose values are all below the absolute tolerance (softmax over 400k
columns is about 2.5e-6 everywhere), or constant, checks nothing at that tolerance: zeros
would pass. Such outputs are judged by relative error instead (atol shrinks to rtol times
the output's scale), and the comparison says so.

Also here: cheap fingerprints of tensors (to see that two processes drew the same inputs and
that a call left its inputs alone), and the extra input variants every candidate is checked on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

# Defaults per output dtype (ARCHITECTURE 6); narrower float types (fp8) take the fp16 default.
DEFAULT_TOLERANCES = {
    torch.float64: 1e-4, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2,
}
CHUNK_ELEMENTS = 1 << 26
FINGERPRINT_SAMPLES = 512

# Inputs the problem's get_inputs does not draw, applied to floating-point inputs only: torch.rand
# gives no negative numbers, so `return x` passes a ReLU on them; these make it fail.
INPUT_VARIANTS = {"mixed_signs": "x -> 2x - 1", "scaled": "x -> 100x"}


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


def _chunks(t: torch.Tensor) -> list[torch.Tensor]:
    flat = t.detach().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    return list(flat.split(CHUNK_ELEMENTS))


def weak_reference(ref: torch.Tensor, atol: float) -> tuple[str, float] | None:
    """(why, scale) when comparing with this floating output at `atol` checks little, else None."""
    if not (ref.dtype.is_floating_point or ref.dtype.is_complex) or ref.numel() == 0:
        return None
    chunks = _chunks(ref)
    # Smallest and largest value and whether all are finite, per chunk, on the device; one synchronisation.
    per_chunk = torch.stack([torch.stack([v.double() for v in (*torch.aminmax(c), torch.isfinite(c).all())])
                             for c in chunks]).tolist()
    low, high = math.inf, -math.inf
    for chunk, (lo, hi, finite) in zip(chunks, per_chunk):
        if not finite:  # rare: only the finite values count
            mask = torch.isfinite(chunk)
            lo, hi = (float(v) for v in torch.stack([torch.where(mask, chunk, math.inf).min(),
                                                     torch.where(mask, chunk, -math.inf).max()]).tolist())
        low, high = min(low, lo), max(high, hi)
    if low > high:
        return None  # no finite value at all: NaN placement is compared exactly anyway
    scale = max(abs(low), abs(high))
    if scale == 0.0:
        return "all zeros", 0.0
    if low == high:
        return "constant", scale
    if scale < atol:
        return "below the tolerance", scale
    return None


def needed_atol(ref: torch.Tensor, exact: torch.Tensor, r_tol: float) -> float:
    """The smallest atol at which `ref` passes against `exact` (the same computation in float64) at
    `r_tol`: max(|ref - exact| - r_tol * |exact|) over the finite elements, and 0 when rtol covers all."""
    worst = torch.zeros((), dtype=torch.float64, device=ref.device)
    for got, want in zip(_chunks(ref), _chunks(exact.to(ref.device))):
        a, b = got.double(), want.double()
        excess = (a - b).abs_().sub_(b.abs().mul_(r_tol))
        worst = torch.maximum(worst, torch.where(excess.isfinite(), excess, 0.0).max())
    return float(worst)


def _chunk_errors(got: torch.Tensor, want: torch.Tensor, a_tol: float, r_tol: float,
                  exact: bool) -> torch.Tensor:
    """[mismatches, largest |error|, where, largest relative error, where] of one chunk, on the device.

    Floating outputs are compared in float32 (float64 for float64 ones), as torch.allclose compares
    them; the difference of two nearby float32 values is exact, so the verdict at the tolerance is too.
    Equal values pass (infinities included), NaN passes only against NaN.
    """
    work = torch.float64 if exact or want.dtype == torch.float64 else torch.float32
    a, b = got.to(work), want.to(work)
    diff = (a - b).abs_()
    if exact:
        bad = got != want
    elif bool(diff.isnan().any()):  # a NaN on either side, or inf - inf
        same = (a == b) | (a.isnan() & b.isnan())
        diff = torch.where(same, 0.0, diff.nan_to_num_(nan=math.inf, posinf=math.inf))
        bad = diff > b.abs().nan_to_num_(nan=0.0).mul_(r_tol).add_(a_tol)
    else:
        bad = diff > b.abs().mul_(r_tol).add_(a_tol)
    rel = diff / b.abs().clamp_min_(max(a_tol, 1e-12)).nan_to_num_(nan=max(a_tol, 1e-12))
    worst_abs, abs_at = diff.max(dim=0)
    worst_rel, rel_at = rel.max(dim=0)
    return torch.stack([bad.sum().double(), worst_abs.double(), abs_at.double(), worst_rel.double(), rel_at.double()])


def compare_tensor(out: torch.Tensor, ref: torch.Tensor, number: int,
                   atol: float | None, rtol: float | None, floor: float = 0.0) -> dict[str, Any]:
    """One output compared with its reference, as an OutputComparison dict.

    `floor`: the atol the reference itself needs against its float64 form on these inputs
    (Reference.error_floors). A candidate as close to the exact result as the reference may be twice
    that far from the reference, so atol grows by 2 * floor."""
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
    weak = weak_reference(ref, a_tol)
    if weak is not None:
        why, scale = weak
        result["reference_scale"] = scale
        if scale > 0 and r_tol > 0:
            a_tol = min(a_tol, r_tol * scale)
            result["note"] = (f"the reference's output is {why} (scale {scale:.3g}): judged by relative error, "
                              f"atol lowered to {a_tol:.3g}")
        else:
            result["note"] = f"the reference's output is {why}: at this tolerance the comparison checks little"
    if floor > 0:
        a_tol += 2 * floor
        result["reference_error_floor"] = floor
        result["note"] = (f"the reference is off its float64 form by up to atol {floor:.3g} on these inputs: "
                          f"atol raised to {a_tol:.3g}")
    exact = not (ref.dtype.is_floating_point or ref.dtype.is_complex)
    # Per chunk, on the device; the chunks' results are read back together (one synchronisation).
    rows, offset = [], 0
    for got, want in zip(_chunks(out), _chunks(ref)):
        row = _chunk_errors(got, want, a_tol, r_tol, exact)
        rows.append(row + torch.tensor([0, 0, offset, 0, offset], dtype=torch.float64, device=row.device))
        offset += got.numel()
    errors = torch.stack(rows)
    first_abs, first_rel = errors[:, 1].argmax(), errors[:, 3].argmax()  # the first chunk holding the largest
    summary = torch.stack([errors[:, 0].sum(), errors[first_abs, 1], errors[first_abs, 2],
                           errors[first_rel, 3], errors[first_rel, 4]]).tolist()
    mismatched, worst_abs, abs_at, worst_rel, rel_at = int(summary[0]), summary[1], int(summary[2]), summary[3], int(summary[4])
    shape = ref.shape if not ref.is_complex() else (*ref.shape, 2)
    result.update(
        passed=mismatched == 0, mismatched=mismatched, atol=a_tol,
        max_abs_error=worst_abs, max_abs_index=_index(abs_at, torch.Size(shape)),
        max_rel_error=worst_rel, max_rel_index=_index(rel_at, torch.Size(shape)),
    )
    if mismatched:
        result["message"] = (f"{mismatched} of {ref.numel()} elements outside atol={a_tol:g} rtol={r_tol:g}; "
                             f"largest error {worst_abs:.3g} at {result['max_abs_index']}")
    return result


def compare_outputs(candidate: Any, reference: Any, atol: float | None, rtol: float | None,
                    floors: Sequence[float] = ()) -> tuple[bool, list[dict[str, Any]], str]:
    """(passed, per-output comparisons, message) for one trial; `floors` per output, see compare_tensor."""
    outs, refs = flatten_outputs(candidate), flatten_outputs(reference)
    if len(outs) != len(refs):
        return False, [], f"the candidate returned {len(outs)} outputs, the reference {len(refs)}"
    comparisons = []
    for number, (out, ref) in enumerate(zip(outs, refs)):
        if isinstance(ref, torch.Tensor):
            if not isinstance(out, torch.Tensor):
                return False, comparisons, f"output {number} is {type(out).__name__}, the reference a tensor"
            floor = floors[number] if number < len(floors) else 0.0
            comparisons.append(compare_tensor(out, ref, number, atol, rtol, floor))
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
            for x, y in zip(_chunks(a), _chunks(b)):
                d = (x.double() - y.double()).abs()
                d = torch.where(torch.isnan(x) & torch.isnan(y), torch.zeros_like(d), d).nan_to_num(nan=float("inf"))
                worst = max(worst, float(d.max()))
        elif a != b:
            worst = float("inf")
    return worst


# --- fingerprints ------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    """A value that compares equal to itself (NaN does not)."""
    return "nan" if isinstance(value, float) and math.isnan(value) else value


def fingerprint(value: Any) -> list[Any]:
    """Per leaf: shape, dtype, float64 sum and sum of magnitudes, and evenly spaced samples.

    Cheap at any size (chunked, no full float64 copy) and equal for equal tensors; any mutation
    a candidate could profit from (an in-place ReLU, an output written into an input) changes it.
    """
    prints: list[Any] = []
    for leaf in flatten_outputs(value):
        if not isinstance(leaf, torch.Tensor):
            prints.append(repr(leaf))
            continue
        sums = torch.zeros(2, dtype=torch.float64, device=leaf.device)  # summed on the device: one sync per leaf
        for chunk in _chunks(leaf):
            c = chunk.to(torch.float64)
            sums[0] += c.nansum()
            sums[1] += c.abs().nansum()
        total, magnitude = sums.tolist()
        flat = leaf.detach().reshape(-1)
        flat = torch.view_as_real(flat).reshape(-1) if flat.is_complex() else flat
        count = min(flat.numel(), FINGERPRINT_SAMPLES)
        step = flat.numel() // count if count else 1
        samples = flat[torch.arange(count, device=flat.device) * step].tolist() if count else []
        prints.append([list(leaf.shape), str(leaf.dtype), _plain(total), _plain(magnitude),
                       [_plain(s) for s in samples]])
    return prints


def _same_sum(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))  # reductions may round differently
    return a == b


def same_fingerprint(a: Any, b: Any) -> bool:
    """Equal shapes, dtypes and samples, and sums equal up to reduction rounding."""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 5 and isinstance(a[0], list):
        return a[0] == b[0] and a[1] == b[1] and _same_sum(a[2], b[2]) and _same_sum(a[3], b[3]) and a[4] == b[4]
    return a == b


def changed_leaves(before: list[Any], after: list[Any]) -> list[int]:
    """Positions whose fingerprints differ (a mutated input, or a changed output)."""
    if len(before) != len(after):
        return list(range(max(len(before), len(after))))
    return [i for i, (a, b) in enumerate(zip(before, after)) if not same_fingerprint(a, b)]


# --- inputs ----------------------------------------------------------------------------------

def apply_variant(inputs: list[Any], variant: str | None) -> list[Any]:
    """The inputs with floating-point tensors transformed in place by INPUT_VARIANTS[variant]."""
    for value in flatten_outputs(inputs):
        if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
            if variant == "mixed_signs":
                value.mul_(2).sub_(1)
            elif variant == "scaled":
                value.mul_(100)
    return inputs


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """`fn` applied to every tensor inside nested tuples and lists; everything else kept as it is."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(map_tensors(v, fn) for v in value)
    return value


def clone_tree(value: Any) -> Any:
    """A deep copy of tensors inside tuples/lists (inputs are cloned so each model gets its own)."""
    return map_tensors(value, torch.Tensor.clone)


def to_device(value: Any, device: torch.device) -> Any:
    """Move tensors to the device keeping their dtypes (integer and bool inputs stay as they are)."""
    return map_tensors(value, lambda t: t.to(device))


def seeded_inputs(problem: Any, seed: int, device: torch.device, variant: str | None = None) -> list[Any]:
    """get_inputs() drawn on the device under one seed (so 4 GB of inputs cost no CPU RNG time).

    The judge and the runner call this with the same arguments and get the same tensors; Python's
    own random module is seeded too, for problems that use it.
    """
    import random

    random.seed(seed)
    torch.manual_seed(seed)
    with torch.device(device):
        values = problem.get_inputs()
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"get_inputs() must return a list or tuple, not {type(values).__name__}")
    return apply_variant(list(to_device(list(values), device)), variant)


def seeded_model(cls: type, init_inputs: list[Any], seed: int, device: torch.device) -> torch.nn.Module:
    """Model or ModelNew built as the problem builds it, its parameters created on the device."""
    import random

    random.seed(seed)
    torch.manual_seed(seed)
    with torch.device(device):
        return cls(*init_inputs).to(device)
