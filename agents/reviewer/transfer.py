"""Candidate outputs from the runner to the judge, so that the judge never runs candidate code.

The runner copies each output into memory the judge can open, and sends a descriptor:
- "cuda_ipc": the copy stays on the GPU and the judge maps it (cudaIpcOpenMemHandle, through
  torch's own storage sharing, UntypedStorage._share_cuda_ and _new_shared_cuda). No bytes move,
  which is what keeps a 6 GB softmax output cheap to check.
- "file": the copy is written to a file in the transfer directory; the judge reads it into its
  own memory. It never maps such a file: one truncated under a mapping would crash the judge.
Only the runner's memory is ever shared, never the judge's: a kernel that reads past its buffer
finds nothing of the judge's, and the reference's outputs stay out of the candidate's reach.

The judge trusts no descriptor: dtypes come from a fixed table, file names must be plain names
in the transfer directory, and data is read only for outputs whose shape matches the
reference's (any other shape fails the comparison on its shape alone).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import torch

from kskill.agents.reviewer.correctness import flatten_outputs

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    *(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)))}
FILE_NAME = re.compile(r"out-\d+\.bin")


class TransferError(Exception):
    """A descriptor the judge cannot accept."""


class Unsendable:
    """An output that is neither a tensor nor a plain value; it can only fail the comparison."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def _encode(value: Any) -> Any:
    return {"hex": value.hex()} if isinstance(value, bytes) else value


def _decode(value: Any) -> Any:
    return bytes.fromhex(value["hex"]) if isinstance(value, dict) else value


class OutputSender:
    """The runner's side. Keeps the copies it shared until the next send (the judge is done by then)."""

    def __init__(self, directory: Path, mode: str) -> None:
        self.directory, self.mode = directory, mode
        self.held: list[torch.Tensor] = []
        self.count = 0

    def send(self, value: Any) -> list[dict[str, Any]]:
        self.release()
        return [self._describe(leaf) for leaf in flatten_outputs(value)]

    def release(self) -> None:
        self.held.clear()

    def _describe(self, leaf: Any) -> dict[str, Any]:
        if not isinstance(leaf, torch.Tensor):
            if leaf is None or isinstance(leaf, (bool, int, float, str)):
                return {"kind": "value", "value": leaf}
            return {"kind": "object", "type": type(leaf).__name__}
        meta = {"dtype": str(leaf.dtype).removeprefix("torch."), "shape": list(leaf.shape)}
        if leaf.numel() == 0:
            return {"kind": "empty", **meta}
        if self.mode == "cuda_ipc" and leaf.is_cuda:
            copy = torch.empty(leaf.shape, dtype=leaf.dtype, device=leaf.device)  # plain, dense, its own storage
            copy.copy_(leaf.detach())
            args = copy.untyped_storage()._share_cuda_()
            self.held.append(copy)
            return {"kind": "cuda_ipc", **meta, "args": [_encode(a) for a in args]}
        self.count += 1
        name = f"out-{self.count}.bin"
        storage = torch.UntypedStorage.from_file(str(self.directory / name), True, leaf.numel() * leaf.element_size())
        torch.empty(0, dtype=leaf.dtype).set_(storage, 0, leaf.shape).copy_(leaf.detach())
        return {"kind": "file", **meta, "name": name}


class OutputReceiver:
    """The judge's side: descriptors in, tensors (or plain values) out, on the judge's device."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def receive(self, descriptors: Any, expected: list[Any]) -> list[Any]:
        if not isinstance(descriptors, list):
            raise TransferError("the runner sent no list of outputs")
        return [self._open(d, expected[i] if i < len(expected) else None) for i, d in enumerate(descriptors)]

    def _open(self, d: Any, want: Any) -> Any:
        if not isinstance(d, dict):
            raise TransferError(f"an output descriptor is {type(d).__name__}, not a mapping")
        kind = d.get("kind")
        if kind == "value":
            value = d.get("value")
            return value if value is None or isinstance(value, (bool, int, float, str)) else Unsendable("value")
        if kind == "object":
            return Unsendable(str(d.get("type"))[:100])
        dtype = DTYPES.get(str(d.get("dtype")))
        shape = d.get("shape")
        if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise TransferError(f"malformed output descriptor {str(d)[:200]}")
        if not isinstance(want, torch.Tensor) or list(want.shape) != shape:
            return torch.empty(shape, dtype=dtype, device="meta")  # fails on its shape; no data needed
        if kind == "empty":
            return torch.empty(shape, dtype=dtype, device=want.device)
        if kind == "cuda_ipc":
            return self._open_ipc(d.get("args"), dtype, shape)
        if kind == "file":
            return self._read_file(str(d.get("name")), dtype, shape).to(want.device)
        raise TransferError(f"unknown output kind {kind!r}")

    def _open_ipc(self, args: Any, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
        try:
            storage = torch.UntypedStorage._new_shared_cuda(*[_decode(a) for a in args])
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TransferError(f"cannot open the shared CUDA output: {exc}") from exc
        needed = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        if needed > storage.nbytes():
            raise TransferError(f"the shared CUDA output holds {storage.nbytes()} bytes, {needed} are needed")
        return torch.empty(0, dtype=dtype, device=storage.device).set_(storage, 0, shape)

    def _read_file(self, name: str, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
        if not FILE_NAME.fullmatch(name):
            raise TransferError(f"output file name {name[:100]!r} is not one the runner may use")
        path = self.directory / name
        nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        buffer = bytearray(nbytes)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise TransferError(f"cannot open output file {name}: {exc}") from exc
        try:
            with os.fdopen(fd, "rb", buffering=0) as f:
                view, got = memoryview(buffer), 0
                while got < nbytes and (n := f.readinto(view[got:])):
                    got += n
        finally:
            path.unlink(missing_ok=True)
        if got < nbytes:
            raise TransferError(f"output file {name} holds {got} bytes, {nbytes} are needed")
        return torch.frombuffer(buffer, dtype=dtype).view(shape)
