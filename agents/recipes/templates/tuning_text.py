"""Launch-parameter text for emitted kernels: fixed choices, or a small `triton.autotune` sweep.

With autotune_launch the kernel carries a handful of configurations that Triton times on the
GPU at the first call for each key (the sizes); under the CPU interpreter only the first
configuration is kept, since timing there means nothing.
"""

from __future__ import annotations

from typing import Any

# name -> list of (meta-parameters, num_warps); small on purpose: every entry is one compile
SPACES: dict[str, list[tuple[dict[str, int], int]]] = {
    "pointwise": [({"BLOCK": 1024}, 4), ({"BLOCK": 2048}, 8), ({"BLOCK": 4096}, 8), ({"BLOCK": 512}, 4)],
    "rows": [({"BLOCK_P": 1}, 4), ({"BLOCK_P": 1}, 8), ({"BLOCK_P": 2}, 8), ({"BLOCK_P": 4}, 8)],
}


def autotune_decorator(space: str, key: list[str]) -> str:
    configs = ", ".join(f"triton.Config({meta!r}, num_warps={warps})" for meta, warps in SPACES[space])
    return (f"@triton.autotune(configs=_configs([{configs}]), key={key!r})\n")


AUTOTUNE_HELPER = '''
def _configs(configs):
    """Autotuning candidates: all of them on a GPU, the first under the CPU interpreter."""
    return configs if torch.cuda.is_available() else configs[:1]
'''


def launch_options(params: dict[str, Any], autotune: bool, tuned: list[str], fixed: list[str]) -> str:
    """Keyword arguments for a kernel launch: sizes always, tuned meta-parameters unless autotuned."""
    parts = list(fixed)
    if not autotune:
        parts += [f"{k}={params[k]}" for k in tuned]
        parts.append(f"num_warps={params['num_warps']}")
        if "num_stages" in params:
            parts.append(f"num_stages={params['num_stages']}")
    return ", ".join(parts)
