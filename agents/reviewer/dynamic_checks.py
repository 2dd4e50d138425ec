"""Anti-cheat checks made while the candidate runs (inside the worker).

Static checks read the source; these watch behaviour: inputs written to, outputs that
alias inputs, outputs that only match when freed memory still holds the answer, outputs
that ignore their inputs, and runtime functions (timers, events, comparisons) replaced
after the candidate was imported.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kskill.agents.reviewer.correctness import flatten_outputs


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in flatten_outputs(value) if isinstance(t, torch.Tensor)]


# --- runtime integrity --------------------------------------------------------------------

def _watched() -> dict[str, Any]:
    """The functions the harness relies on to time and to compare."""
    watched: dict[str, Any] = {
        "time.perf_counter": time.perf_counter, "time.time": time.time, "time.monotonic": time.monotonic,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.current_stream": torch.cuda.current_stream,
        "torch.allclose": torch.allclose, "torch.equal": torch.equal, "torch.isclose": torch.isclose,
        "torch.Tensor.clone": torch.Tensor.clone, "torch.Tensor.to": torch.Tensor.to,
        "torch.Tensor.__sub__": torch.Tensor.__sub__, "torch.Tensor.abs": torch.Tensor.abs,
        "torch.Tensor.__gt__": torch.Tensor.__gt__, "torch.Tensor.sum": torch.Tensor.sum,
        "torch.manual_seed": torch.manual_seed, "torch.no_grad": torch.no_grad,
    }
    for name in ("record", "elapsed_time", "synchronize", "query", "wait"):
        watched[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name, None)
    return watched


def runtime_snapshot() -> dict[str, Any]:
    """Taken before the candidate is imported; compared later with patched_runtime."""
    return _watched()


def patched_runtime(snapshot: dict[str, Any]) -> list[str]:
    """Names of watched functions that are no longer the objects they were."""
    now = _watched()
    return [name for name, obj in snapshot.items() if now.get(name) is not obj]


# --- per-call checks ------------------------------------------------------------------------

def mutated_inputs(before: Any, after: Any) -> list[int]:
    """Positions of tensor inputs whose values changed during a call (NaNs equal to NaNs)."""
    changed = []
    for position, (a, b) in enumerate(zip(flatten_outputs(before), flatten_outputs(after))):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)):
                changed.append(position)
    return changed


def _storage_range(t: torch.Tensor) -> tuple[int, int] | None:
    if t.numel() == 0:
        return None
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def aliased_outputs(outputs: Any, inputs: Any) -> list[int]:
    """Positions of outputs that share memory with any input tensor."""
    ranges = [r for r in (_storage_range(t) for t in _tensors(inputs)) if r]
    aliased = []
    for position, out in enumerate(flatten_outputs(outputs)):
        if isinstance(out, torch.Tensor) and (r := _storage_range(out)):
            if any(r[0] < hi and lo < r[1] for lo, hi in ranges):
                aliased.append(position)
    return aliased


def _filler(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return torch.full_like(t, float("nan"))
    if t.dtype == torch.bool:
        return torch.ones_like(t)
    return torch.full_like(t, -12345)


def _release_cached_blocks(like: list[torch.Tensor]) -> None:
    """Return CUDA's cached free blocks to the driver, so the blocks allocated next are the free ones."""
    if any(t.is_cuda for t in like):
        torch.cuda.empty_cache()


def poison_freed_memory(like: Any, copies: int = 4) -> None:
    """Fill memory of the outputs' sizes with NaN (or sentinels) and free it.

    A candidate that returns uninitialised memory (torch.empty) then reads NaN instead of
    whatever the reference left behind. CUDA's caching allocator hands out the best-fitting
    free block, so after releasing the cache these poisoned blocks are the ones it finds. On
    the CPU freed blocks are often returned to the system; the decoy probe below decides.
    """
    tensors = _tensors(like)
    _release_cached_blocks(tensors)
    garbage = [_filler(t) for t in tensors for _ in range(copies)]
    del garbage


def leave_answer_in_freed_memory(expected: Any) -> None:
    """The decoy: copies of the right answer, freed, for a stale-memory cheat to pick up."""
    tensors = _tensors(expected)
    _release_cached_blocks(tensors)
    decoys = [t.clone() for t in tensors]
    del decoys


def outputs_equal(first: Any, second: Any) -> bool:
    """Bitwise equality of two results (used to catch outputs that ignore their inputs)."""
    a, b = flatten_outputs(first), flatten_outputs(second)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)):
                return False
        elif x != y:
            return False
    return True


# --- process-wide settings ---------------------------------------------------------------------

class BackendSettings:
    """The TF32 and cuDNN switches, captured so the reference always runs with the problem's own.

    A candidate may turn TF32 on (a real technique); it must not silently change how the
    reference it is compared and timed against behaves.
    """

    def __init__(self) -> None:
        self.values = self._read()

    @staticmethod
    def _read() -> dict[str, Any]:
        return {
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }

    @staticmethod
    def _apply(values: dict[str, Any]) -> None:
        # The precision call also sets matmul.allow_tf32, so it goes first.
        torch.set_float32_matmul_precision(values["float32_matmul_precision"])
        torch.backends.cuda.matmul.allow_tf32 = values["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = values["cudnn_tf32"]
        torch.backends.cudnn.benchmark = values["cudnn_benchmark"]

    def __enter__(self) -> BackendSettings:
        self._saved = self._read()
        self._apply(self.values)
        return self

    def __exit__(self, *exc: object) -> None:
        self._apply(self._saved)

    def changed_by_candidate(self) -> dict[str, Any]:
        now = self._read()
        return {k: v for k, v in now.items() if v != self.values[k]}
