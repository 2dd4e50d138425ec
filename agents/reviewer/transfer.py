"""Candidate outputs from the runner to the judge, so that the judge never runs candidate code.

The runner copies each output into memory the judge can open, and sends a descriptor:
- "cuda_fd": the copy stays on the GPU, in an allocation of its own (cuda_share.py) whose file
  descriptor goes to the judge over a Unix socket; the judge maps it. No bytes move, which is
  what keeps a 6 GB softmax output cheap to check. (Legacy CUDA IPC handles, which torch's
  storage sharing uses, fail inside the sandbox's PID namespace.)
- "file": the copy is written to a file in the transfer directory; the judge reads it into its
  own memory. It never maps such a file: one truncated under a mapping would crash the judge.
Only the runner's memory is ever shared, never the judge's: a kernel that reads past its buffer
finds nothing of the judge's, and the reference's outputs stay out of the candidate's reach.

The judge trusts no descriptor: dtypes come from a fixed table, file names must be plain names
in the transfer directory, a shared allocation must be as large as its output, and data is read
only for outputs whose shape matches the reference's (any other shape fails the comparison on its
shape alone).
"""

from __future__ import annotations

import math
import os
import re
import socket
from pathlib import Path
from typing import Any

import torch

from kskill.agents.reviewer import cuda_share
from kskill.agents.reviewer.correctness import flatten_outputs

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    *(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)))}
FILE_NAME = re.compile(r"out-\d+\.bin")
MAX_FDS_PER_MESSAGE = 4


class TransferError(Exception):
    """A descriptor the judge cannot accept."""


class Unsendable:
    """An output that is neither a tensor nor a plain value; it can only fail the comparison."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


class OutputSender:
    """The runner's side. Keeps the copies it shared until the next send (the judge is done by then).
    `fd_socket` carries the shared allocations' file descriptors ("cuda_fd" mode)."""

    def __init__(self, directory: Path, mode: str, fd_socket: socket.socket | None = None) -> None:
        self.directory, self.mode, self.fd_socket = directory, mode, fd_socket
        self.held: list[cuda_share.SharedBlock] = []
        self.count = 0

    def send(self, value: Any) -> list[dict[str, Any]]:
        self.release()
        descriptors = [self._describe(leaf) for leaf in flatten_outputs(value)]
        self._hand_over(descriptors)
        return descriptors

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
        self.count += 1
        if self.mode == "cuda_fd" and leaf.is_cuda:
            block = cuda_share.allocate(leaf.numel() * leaf.element_size(), leaf.device)
            block.tensor(leaf.dtype, list(leaf.shape)).copy_(leaf.detach())
            self.held.append(block)
            return {"kind": "cuda_fd", **meta, "seq": self.count}
        name = f"out-{self.count}.bin"
        storage = torch.UntypedStorage.from_file(str(self.directory / name), True, leaf.numel() * leaf.element_size())
        torch.empty(0, dtype=leaf.dtype).set_(storage, 0, leaf.shape).copy_(leaf.detach())
        return {"kind": "file", **meta, "name": name}

    def _hand_over(self, descriptors: list[dict[str, Any]]) -> None:
        """Each shared copy's file descriptor, tagged with its output's number, once the copies are done."""
        shared = [d["seq"] for d in descriptors if d["kind"] == "cuda_fd"]
        if not shared:
            return
        torch.cuda.synchronize()
        for seq, block in zip(shared, self.held):  # release() emptied it at the start of this send
            fd = block.export_fd()
            try:
                socket.send_fds(self.fd_socket, [str(seq).encode()], [fd])
            finally:
                os.close(fd)


class OutputReceiver:
    """The judge's side: descriptors in, tensors (or plain values) out, on the judge's device."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def receive(self, descriptors: Any, expected: list[Any], fd_socket: socket.socket | None = None) -> list[Any]:
        """`fd_socket`: where the runner's shared allocations arrive ("cuda_fd" descriptors)."""
        if not isinstance(descriptors, list):
            raise TransferError("the runner sent no list of outputs")
        return [self._open(d, expected[i] if i < len(expected) else None, fd_socket)
                for i, d in enumerate(descriptors)]

    def _open(self, d: Any, want: Any, fd_socket: socket.socket | None) -> Any:
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
            if kind == "cuda_fd":
                self.discard([d], fd_socket)
            return torch.empty(shape, dtype=dtype, device="meta")  # fails on its shape; no data needed
        if kind == "empty":
            return torch.empty(shape, dtype=dtype, device=want.device)
        if kind == "cuda_fd":
            return self._map_shared(fd_socket, d.get("seq"), dtype, shape, want.device)
        if kind == "file":
            return self._read_file(str(d.get("name")), dtype, shape).to(want.device)
        raise TransferError(f"unknown output kind {kind!r}")

    def discard(self, descriptors: Any, fd_socket: socket.socket | None) -> None:
        """Close the allocations sent for outputs that will not be read: each one left in the socket
        would keep its GPU memory alive."""
        for d in descriptors if isinstance(descriptors, list) and fd_socket is not None else []:
            if isinstance(d, dict) and d.get("kind") == "cuda_fd" and isinstance(d.get("seq"), int):
                try:
                    os.close(_take_fd(fd_socket, d["seq"]))
                except TransferError:
                    pass

    def _map_shared(self, fd_socket: socket.socket | None, seq: Any, dtype: torch.dtype, shape: list[int],
                    device: torch.device) -> torch.Tensor:
        if fd_socket is None or not isinstance(seq, int):
            raise TransferError("a shared CUDA output came without its allocation")
        fd = _take_fd(fd_socket, seq)
        nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        try:
            return cuda_share.import_fd(fd, nbytes, device).tensor(dtype, shape)
        except cuda_share.CudaShareError as exc:
            raise TransferError(f"cannot map the shared CUDA output: {exc}") from exc

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


def _take_fd(fd_socket: socket.socket, seq: int) -> int:
    """The file descriptor sent for output `seq`. Those of earlier outputs, never opened (a wrong
    shape) are closed on the way; the runner sends every descriptor before its reply, so nothing
    here waits."""
    fd_socket.setblocking(False)
    while True:
        try:
            tag, fds, _, _ = socket.recv_fds(fd_socket, 32, MAX_FDS_PER_MESSAGE)
        except (BlockingIOError, OSError):
            raise TransferError(f"the runner sent no allocation for output {seq}") from None
        number = int(tag) if tag.isdigit() else -1
        keep = fds[0] if number == seq and len(fds) == 1 else None
        for fd in fds:
            if fd != keep:
                os.close(fd)
        if keep is not None:
            return keep
        if number > seq or not tag:
            raise TransferError(f"the runner sent allocation {tag[:20]!r} where output {seq} was expected")
