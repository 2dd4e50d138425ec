"""GPU memory one process exports as a file descriptor and another maps: the CUDA driver's virtual
memory API (cuMemCreate with POSIX file-descriptor handles), called through ctypes.

This is how candidate outputs reach the judge without a copy through host memory. The legacy
CUDA IPC handles (cudaIpcGetMemHandle, which torch's storage sharing uses) fail inside the
sandbox's PID namespace; a file descriptor handed over a Unix socket does not depend on PIDs.

Each block is its own allocation, rounded up to the driver's granularity (2 MB on current GPUs).
A block is freed when the last tensor viewing it is gone: torch.as_tensor keeps the block alive
through __cuda_array_interface__, and the block's finaliser unmaps and releases it.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import weakref
from typing import Any

import torch

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0


class CudaShareError(RuntimeError):
    """The driver refused a step of exporting or mapping shared GPU memory."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_u64, _size, _int, _ptr = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p
_SIGNATURES = {
    "cuMemGetAllocationGranularity": [ctypes.POINTER(_size), ctypes.POINTER(_AllocationProp), _int],
    "cuMemCreate": [ctypes.POINTER(_u64), _size, ctypes.POINTER(_AllocationProp), _u64],
    "cuMemAddressReserve": [ctypes.POINTER(_u64), _size, _size, _u64, _u64],
    "cuMemAddressFree": [_u64, _size],
    "cuMemMap": [_u64, _size, _size, _u64, _u64],
    "cuMemUnmap": [_u64, _size],
    "cuMemSetAccess": [_u64, _size, ctypes.POINTER(_AccessDesc), _size],
    "cuMemRelease": [_u64],
    "cuMemExportToShareableHandle": [_ptr, _u64, _int, _u64],
    "cuMemImportFromShareableHandle": [ctypes.POINTER(_u64), _ptr, _int],
}


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaShareError(f"the CUDA driver library cannot be loaded: {exc}") from exc
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            raise CudaShareError(f"the CUDA driver has no {name} (virtual memory management needs CUDA 10.2+)")
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return lib


def _check(result: int, step: str) -> None:
    if result != 0:
        raise CudaShareError(f"{step} failed with CUDA driver error {result}")


def _device_location(device: torch.device) -> _Location:
    return _Location(CU_MEM_LOCATION_TYPE_DEVICE, device.index if device.index is not None else torch.cuda.current_device())


def _exportable(location: _Location) -> _AllocationProp:
    return _AllocationProp(type=CU_MEM_ALLOCATION_TYPE_PINNED,
                           requestedHandleTypes=CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, location=location)


def _granular(nbytes: int, location: _Location) -> int:
    prop = _exportable(location)
    granularity = _size()
    _check(_driver().cuMemGetAllocationGranularity(ctypes.byref(granularity), ctypes.byref(prop),
                                                   CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity")
    g = granularity.value
    return max(g, -(-nbytes // g) * g)


def _release(address: int, size: int, handle: int) -> None:
    """Undo a mapping; runs once, from the block's finaliser. The GPU is synchronised first: a kernel
    still reading the block must not find it gone."""
    lib = _driver()
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    if address:
        lib.cuMemUnmap(address, size)
        lib.cuMemAddressFree(address, size)
    if handle:
        lib.cuMemRelease(handle)


class SharedBlock:
    """One mapped allocation; `tensor()` views it. Made by `allocate` (the exporter) or `import_fd`."""

    def __init__(self, handle: int, size: int, location: _Location) -> None:
        self.size, self.device = size, torch.device("cuda", location.id)
        lib, address = _driver(), _u64()
        try:
            _check(lib.cuMemAddressReserve(ctypes.byref(address), size, 0, 0, 0), "cuMemAddressReserve")
            _check(lib.cuMemMap(address.value, size, 0, handle, 0), "cuMemMap")
            access = _AccessDesc(location=location, flags=CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            _check(lib.cuMemSetAccess(address.value, size, ctypes.byref(access), 1), "cuMemSetAccess")
        except CudaShareError:
            _release(address.value, size, handle)
            raise
        self.handle, self.address = handle, address.value
        self._finalizer = weakref.finalize(self, _release, self.address, size, handle)
        self._finalizer.atexit = False  # the process's end frees it

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.address, False), "version": 3}

    def tensor(self, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
        """A dense tensor over the block's first bytes; it keeps the block alive."""
        nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        if nbytes > self.size:
            raise CudaShareError(f"the shared block holds {self.size} bytes, {nbytes} are needed")
        raw = torch.as_tensor(self, device=self.device)
        return raw[:nbytes].view(dtype).view(shape)

    def export_fd(self) -> int:
        """A new file descriptor for this allocation; the caller closes it once it is handed over."""
        fd = ctypes.c_int(-1)
        _check(_driver().cuMemExportToShareableHandle(ctypes.byref(fd), self.handle,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
               "cuMemExportToShareableHandle")
        return fd.value


def allocate(nbytes: int, device: torch.device) -> SharedBlock:
    """A new exportable block of at least nbytes on device."""
    location = _device_location(device)
    size = _granular(nbytes, location)
    prop = _exportable(location)
    handle = _u64()
    _check(_driver().cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), "cuMemCreate")
    return SharedBlock(handle.value, size, location)


def import_fd(fd: int, nbytes: int, device: torch.device) -> SharedBlock:
    """Map the allocation behind another process's exported fd (closed here). Fails, rather than
    mapping less, when the allocation is smaller than nbytes rounded to the granularity."""
    location = _device_location(device)
    handle = _u64()
    try:
        _check(_driver().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle")
    finally:
        os.close(fd)
    return SharedBlock(handle.value, _granular(nbytes, location), location)
