"""Peak throughput of the GPUs kskill knows, for roofline arithmetic.

Figures are the vendors' datasheet values for dense maths (no structured sparsity) at boost
clock; tensor-core figures for fp16/bf16 are with fp32 accumulation, which is what PyTorch and
Triton use. The GPU is detected at run time by its device name; a name not in the table, or a
machine without CUDA, gives no spec and a reason, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kskill.agents.errors import AgentError

class UnknownGpu(AgentError):
    """A GPU named by the user is not in the peak table, or the name fits several entries."""


TERA = 1e12
GIGA = 1e9
MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet peaks of one GPU model."""

    key: str
    name: str
    arch: str  # ampere | ada | hopper | blackwell
    sm_count: int
    fp32_flops: float  # FLOP/s on the CUDA cores
    tf32_tensor_flops: float  # FLOP/s, dense
    fp16_tensor_flops: float  # FLOP/s, dense, fp32 accumulate (bf16 is the same on these parts)
    dram_bandwidth: float  # bytes/s
    l2_bytes: int

    def peak_flops(self, dtype: str, tensor_cores: bool) -> float | None:
        """The compute roof for `dtype`; None where the table has no figure (fp64, int types)."""
        if dtype == "float32":
            return self.tf32_tensor_flops if tensor_cores else self.fp32_flops
        if dtype in ("float16", "bfloat16"):
            return self.fp16_tensor_flops if tensor_cores else self.fp32_flops
        return None

    def ridge_point(self, dtype: str, tensor_cores: bool) -> float | None:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory to compute."""
        peak = self.peak_flops(dtype, tensor_cores)
        return None if peak is None else peak / self.dram_bandwidth


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("h100-sxm", "NVIDIA H100 SXM5 80GB", "hopper", 132, 67 * TERA, 494.7 * TERA, 989.4 * TERA,
            3350 * GIGA, 50 * MIB),
    GpuSpec("h100-pcie", "NVIDIA H100 PCIe 80GB", "hopper", 114, 51 * TERA, 378 * TERA, 756 * TERA,
            2000 * GIGA, 50 * MIB),
    GpuSpec("h200-sxm", "NVIDIA H200 SXM 141GB", "hopper", 132, 67 * TERA, 494.7 * TERA, 989.4 * TERA,
            4800 * GIGA, 50 * MIB),
    GpuSpec("a100-sxm4-40gb", "NVIDIA A100 SXM4 40GB", "ampere", 108, 19.5 * TERA, 156 * TERA, 312 * TERA,
            1555 * GIGA, 40 * MIB),
    GpuSpec("a100-pcie-40gb", "NVIDIA A100 PCIe 40GB", "ampere", 108, 19.5 * TERA, 156 * TERA, 312 * TERA,
            1555 * GIGA, 40 * MIB),
    GpuSpec("a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", "ampere", 108, 19.5 * TERA, 156 * TERA, 312 * TERA,
            2039 * GIGA, 40 * MIB),
    GpuSpec("a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", "ampere", 108, 19.5 * TERA, 156 * TERA, 312 * TERA,
            1935 * GIGA, 40 * MIB),
    GpuSpec("l40s", "NVIDIA L40S", "ada", 142, 91.6 * TERA, 183 * TERA, 362 * TERA, 864 * GIGA, 96 * MIB),
    GpuSpec("rtx-4090", "NVIDIA GeForce RTX 4090", "ada", 128, 82.6 * TERA, 82.6 * TERA, 165.2 * TERA,
            1008 * GIGA, 72 * MIB),
)
BY_KEY = {g.key: g for g in GPUS}

# Device names as torch.cuda.get_device_name reports them -> table key. Variants with other
# clocks or memory (H100 NVL, H200 NVL, RTX 4090 D) are deliberately absent: their peaks differ.
_NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), k) for p, k in (
    (r"\bH100\b.*\b(SXM|HBM3)\b", "h100-sxm"),
    (r"\bH100\b.*\bPCIe\b", "h100-pcie"),
    (r"\bH200\b(?!.*\bNVL\b)", "h200-sxm"),
    (r"\bA100\b.*\bSXM4?\b.*\b40\s?GB\b", "a100-sxm4-40gb"),
    (r"\bA100\b.*\bPCIE\b.*\b40\s?GB\b", "a100-pcie-40gb"),
    (r"\bA100\b.*\b40\s?GB\b.*\bPCIE\b", "a100-pcie-40gb"),
    (r"\bA100\b.*\bSXM4?\b.*\b80\s?GB\b", "a100-sxm4-80gb"),
    (r"\bA100\b.*\b80\s?GB\b.*\bPCIE\b", "a100-pcie-80gb"),
    (r"\bA100\b.*\bPCIE\b.*\b80\s?GB\b", "a100-pcie-80gb"),
    (r"\bL40S\b", "l40s"),
    (r"\bRTX 4090\b(?!\s*D\b)", "rtx-4090"),
))


def lookup(device_name: str) -> GpuSpec | None:
    """The spec for a device name, or None when the name is not in the table."""
    for pattern, key in _NAME_RULES:
        if pattern.search(device_name):
            return BY_KEY[key]
    return None


def resolve(name: str) -> GpuSpec:
    """The spec a user names: a table key (`h200-sxm`), a unique key prefix (`h200`, `a100-sxm4-80`),
    or a device name as torch reports it. Unknown or ambiguous names raise UnknownGpu listing the keys."""
    wanted = name.strip().lower()
    if wanted in BY_KEY:
        return BY_KEY[wanted]
    prefixed = [g for g in GPUS if g.key.startswith(wanted)]
    if len(prefixed) == 1:
        return prefixed[0]
    by_name = lookup(name)
    if by_name is not None:
        return by_name
    known = ", ".join(BY_KEY)
    if len(prefixed) > 1:
        raise UnknownGpu(f"GPU {name!r} is ambiguous: it could be {', '.join(g.key for g in prefixed)}")
    raise UnknownGpu(f"GPU {name!r} is not in the peak table (agents/gpus.py); known: {known}")


def detect() -> tuple[GpuSpec | None, str]:
    """(spec, reason): the spec of CUDA device 0, or None with why it is unavailable."""
    try:
        import torch
    except ImportError:  # torch is a dependency; say so plainly if it is missing
        return None, "torch is not importable, so no GPU can be detected"
    if not torch.cuda.is_available():
        return None, "no CUDA device is available on this machine"
    name = torch.cuda.get_device_name(0)
    spec = lookup(name)
    if spec is None:
        return None, f"GPU {name!r} is not in the peak table (agents/gpus.py); its peaks are not guessed"
    return spec, ""


def ridge_bounds(dtype: str, tensor_cores: bool) -> tuple[float, float] | None:
    """Lowest and highest ridge point over the whole table, for when no GPU is detected.

    An arithmetic intensity below the lowest is memory-bound on every GPU listed; above the
    highest it is compute-bound on every one.
    """
    ridges = [r for g in GPUS if (r := g.ridge_point(dtype, tensor_cores)) is not None]
    return (min(ridges), max(ridges)) if ridges else None

