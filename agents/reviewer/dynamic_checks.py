"""Anti-cheat checks made while the candidate runs (inside the runner process).

Static checks read the source; these watch behaviour: outputs that alias inputs or are not
plain tensors, outputs that only match when freed memory still holds the answer, results
served again instead of computed, Triton kernels that are claimed but not launched (or
launched for show), and the harness's own functions replaced after the candidate was
imported. Whatever they find is reported to the judge as flags; the judge alone decides.
"""

from __future__ import annotations

import contextlib
import functools
import time
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from kskill.agents.reviewer.correctness import changed_leaves, fingerprint, flatten_outputs


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in flatten_outputs(value) if isinstance(t, torch.Tensor)]


# --- harness integrity ----------------------------------------------------------------------

def _watched() -> dict[str, Any]:
    """Functions the harness relies on to time, to synchronise and to seed, by name."""
    watched: dict[str, Any] = {
        "time.perf_counter": time.perf_counter, "time.time": time.time, "time.monotonic": time.monotonic,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.current_stream": torch.cuda.current_stream, "torch.manual_seed": torch.manual_seed,
        "torch.Tensor.clone": torch.Tensor.clone, "torch.Tensor.copy_": torch.Tensor.copy_,
        "torch.Tensor.to": torch.Tensor.to, "torch.no_grad": torch.no_grad,
        "torch.UntypedStorage._share_cuda_": getattr(torch.UntypedStorage, "_share_cuda_", None),
    }
    for name in ("record", "elapsed_time", "synchronize", "query", "wait"):
        watched[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name, None)
    return watched


def _public(namespace: dict[str, Any]) -> dict[str, Any]:
    """Names torch does not rebind itself: public ones and dunders (torch sets _initialized and the like)."""
    return {k: v for k, v in namespace.items() if not k.startswith("_") or k.startswith("__")}


def _frozen_namespaces(modules: Iterable[types.ModuleType]) -> dict[str, dict[str, Any]]:
    """The harness modules' globals and the namespaces of the classes they define."""
    spaces: dict[str, dict[str, Any]] = {}
    for module in modules:
        spaces[module.__name__] = vars(module)
        for name, obj in vars(module).items():
            if isinstance(obj, type) and obj.__module__ == module.__name__:
                spaces[f"{module.__name__}.{name}"] = obj.__dict__  # type: ignore[assignment]
    return spaces


def _functions(spaces: dict[str, dict[str, Any]]) -> dict[str, types.FunctionType]:
    found = {}
    for where, space in spaces.items():
        for name, obj in space.items():
            obj = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
            if isinstance(obj, types.FunctionType):
                found[f"{where}.{name}"] = obj
    return found


class Integrity:
    """What the harness relies on, by identity, taken before any candidate code is imported.

    - the harness modules' globals and their classes' namespaces: every name still bound to the
      same object and none added (a new global can shadow a builtin);
    - the code, defaults and closures of the harness's functions (a function patched in place
      keeps its identity but not its __code__);
    - the public names of torch's namespaces, the builtins and the timing functions.
    A candidate that changes any of them is rejected, and the runner that imported it is
    replaced before the next candidate runs.
    """

    def __init__(self, harness: Iterable[types.ModuleType], watched: Iterable[Any]) -> None:
        self.frozen = {name: (space, dict(space)) for name, space in _frozen_namespaces(harness).items()}
        self.watched = {getattr(ns, "__name__", repr(ns)): (vars(ns), _public(dict(vars(ns)))) for ns in watched}
        self.functions = {name: (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__, fn.__closure__)
                          for name, fn in _functions({n: s for n, (s, _) in self.frozen.items()}).items()}
        self.runtime = _watched()

    def changed(self) -> list[str]:
        """Names of everything that is no longer what it was; [] when the harness is intact."""
        missing = object()
        names = [f"{where}.{k}" for where, (live, saved) in self.frozen.items()
                 for k in {*saved, *live} if live.get(k, missing) is not saved.get(k, missing)]
        names += [f"{where}.{k}" for where, (live, saved) in self.watched.items()
                  for k, v in saved.items() if live.get(k, missing) is not v]
        names += [f"{name} (code)" for name, (fn, code, defaults, kwdefaults, closure) in self.functions.items()
                  if fn.__code__ is not code or fn.__defaults__ is not defaults
                  or fn.__kwdefaults__ is not kwdefaults or fn.__closure__ is not closure]
        now = _watched()
        names += [name for name, obj in self.runtime.items() if now.get(name) is not obj]
        return sorted(set(names))


def runtime_snapshot() -> Integrity:
    """The timing and synchronising functions only, for harnesses that import trusted code (kskill eval)."""
    return Integrity(harness=[], watched=[])


def patched_runtime(snapshot: Integrity) -> list[str]:
    return snapshot.changed()


# --- Triton launches ----------------------------------------------------------------------------

def triton_kernel_classes() -> list[type]:
    """The classes whose `run` launches a Triton kernel: compiled and interpreted."""
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


def kernel_name(kernel: Any) -> str:
    fn = getattr(kernel, "fn", None)
    return getattr(fn, "__name__", None) or getattr(kernel, "__name__", type(kernel).__name__)


class KernelLaunches:
    """Counts Triton kernel launches by kernel name, and skips them on request (the decoy probe).

    A candidate whose outputs stay right with every launch skipped had kernels that did no
    needed work: the work was left in torch.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.skip = False
        self.skipped = 0
        for cls in triton_kernel_classes():
            cls.run = self._counted(cls.run)

    def _counted(self, run: Callable[..., Any]) -> Callable[..., Any]:
        launches = self

        @functools.wraps(run)
        def counted(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup"):
                return run(kernel, *args, **kwargs)
            if launches.skip:
                launches.skipped += 1
                return None
            name = kernel_name(kernel)
            launches.counts[name] = launches.counts.get(name, 0) + 1
            return run(kernel, *args, **kwargs)

        return counted

    def total(self) -> int:
        return sum(self.counts.values())


# --- per-call checks ------------------------------------------------------------------------

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


def mutated_inputs(before: Any, after: Any) -> list[int]:
    """Positions of tensors that differ between two copies of the inputs (NaN equal to NaN)."""
    return changed_leaves(fingerprint(before), fingerprint(after))


def reused_outputs(first: Any, second: Any) -> list[int]:
    """Positions of the second call's outputs that sit in memory an output of the first call still holds.

    Two calls of an honest forward return fresh results; the same memory twice means a result
    computed once and served again.
    """
    return aliased_outputs(second, first)


def non_plain_outputs(outputs: Any, allowed: list[str]) -> list[str]:
    """'position: type' of tensor outputs that are subclasses (lazy or wrapped tensors) the reference does not return."""
    found = []
    for position, out in enumerate(flatten_outputs(outputs)):
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            name = f"{type(out).__module__}.{type(out).__qualname__}"
            if position >= len(allowed) or allowed[position] != name:
                found.append(f"{position}: {name}")
    return found


def output_type_names(outputs: Any) -> list[str]:
    return [f"{type(o).__module__}.{type(o).__qualname__}" for o in flatten_outputs(outputs)]


def _poison(t: torch.Tensor) -> torch.Tensor:
    """`t` filled with NaN, or a sentinel where its dtype has no NaN (True, -12345)."""
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return t.fill_(float("nan"))
    return t.fill_(True if t.dtype == torch.bool else -12345)


def _filler(shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return _poison(torch.empty(shape, dtype=dtype, device=device))


def _release_cached_blocks(device: torch.device) -> None:
    """Return CUDA's cached free blocks to the driver, so the blocks allocated next are the free ones."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def poison_freed_memory(specs: list[tuple[list[int], torch.dtype]], device: torch.device, copies: int = 4) -> None:
    """Fill memory of the outputs' sizes with NaN (or sentinels) and free it.

    A candidate that returns uninitialised memory (torch.empty) then reads NaN instead of
    whatever an earlier call left behind. CUDA's caching allocator hands out the best-fitting
    free block, so after releasing the cache these poisoned blocks are the ones it finds. On
    the CPU freed blocks are often returned to the system; the decoy probe decides.
    """
    _release_cached_blocks(device)
    big = sum(torch.Size(s).numel() * torch.empty(0, dtype=d).element_size() for s, d in specs) > 1 << 30
    garbage = [_filler(shape, dtype, device) for shape, dtype in specs for _ in range(1 if big else copies)]
    del garbage


@contextlib.contextmanager
def empty_memory_poisoned() -> Iterator[None]:
    """torch.empty and its kin give NaN-filled (or sentinel-filled) tensors while the block runs.

    The ablation probe skips every Triton launch; the output buffers those kernels should have filled
    then hold NaN, instead of whatever an earlier call left in the memory the allocator reuses, which
    can be the very values they would have written (the same forward, moments before)."""
    originals = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}
    new_empty = torch.Tensor.new_empty

    def poisoned(make: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        @functools.wraps(make)
        def make_poisoned(*args: Any, **kwargs: Any) -> torch.Tensor:
            return _poison(make(*args, **kwargs))
        return make_poisoned

    for name, make in originals.items():
        setattr(torch, name, poisoned(make))
    torch.Tensor.new_empty = poisoned(new_empty)
    try:
        yield
    finally:
        for name, make in originals.items():
            setattr(torch, name, make)
        torch.Tensor.new_empty = new_empty


def leave_answer_in_freed_memory(expected: Any) -> None:
    """The decoy: copies of the right answer, freed, for a stale-memory cheat to pick up."""
    tensors = _tensors(expected)
    if tensors:
        _release_cached_blocks(tensors[0].device)
    decoys = [t.clone() for t in tensors]
    del decoys


# --- process-wide settings ---------------------------------------------------------------------

class BackendSettings:
    """The TF32 and cuDNN switches, captured so the reference always runs with the problem's own.

    A candidate may turn TF32 on (a real technique); it must not silently change how the
    reference it is timed against, or the next candidate, behaves.
    """

    def __init__(self) -> None:
        self.values = self.read()

    @staticmethod
    def read() -> dict[str, Any]:
        return {
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }

    @staticmethod
    def apply(values: dict[str, Any]) -> None:
        # The precision call also sets matmul.allow_tf32, so it goes first.
        torch.set_float32_matmul_precision(values["float32_matmul_precision"])
        torch.backends.cuda.matmul.allow_tf32 = values["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = values["cudnn_tf32"]
        torch.backends.cudnn.benchmark = values["cudnn_benchmark"]

    def __enter__(self) -> BackendSettings:
        self._saved = self.read()
        self.apply(self.values)
        return self

    def __exit__(self, *exc: object) -> None:
        self.apply(self._saved)

    def differences(self, values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if v != self.values[k]}

    def changed_by_candidate(self) -> dict[str, Any]:
        return self.differences(self.read())
