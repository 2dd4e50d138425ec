"""Registers a thread, spills and local memory of each Triton kernel in a generated candidate, compiled for
an NVIDIA GPU without one (the CUDA backend and cuobjdump that Triton's wheel ships).

    python scripts/kernel_registers.py run/model_new.py [--arch 90]

Each kernel is compiled with the constants of its launch line in the candidate (`name_kernel[grid](...,
R=..., num_warps=...)`), pointers as fp32 (`ws_ptr` as int64) and other arguments as int32. The count
comes from the Triton imported, which may differ from the GPU machine's by a few registers (install that
version apart, `pip install --no-deps --target DIR triton==3.6.0`, and put DIR first on PYTHONPATH to read
what it compiles); it is a guide to how many programs a multiprocessor keeps resident
(eval/runs/push-h200-s38/NOTES.md, push-h200-s39/NOTES.md), not a measurement."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget


def _constant(text: str) -> bool | int | float:
    """A launch line's constant: True/False, an int or a float."""
    if text in ("True", "False"):
        return text == "True"
    return float(text) if re.search(r"[.e]", text) else int(text)


def kernel_usage(path: str, arch: int = 90) -> list[tuple[str, str]]:
    """(kernel name, cuobjdump's resource line) for every `*_kernel` in the candidate at `path`."""
    text = Path(path).read_text()
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    found = []
    for name, fn in vars(module).items():
        launch = re.search(rf"\b{name}\[[^\]]*\]\(([^)]*)\)", text)
        if not name.endswith("_kernel") or launch is None:
            continue
        consts = dict(re.findall(r"(\w+)=([\w.+-]+)", launch.group(1)))
        warps = int(consts.pop("num_warps", 4))
        signature, constexprs = {}, {}
        for arg in fn.arg_names:
            if arg in consts:
                signature[arg] = "constexpr"
                constexprs[arg] = _constant(consts[arg])
            else:
                signature[arg] = ("*i64" if arg == "ws_ptr" else "*fp32") if arg.endswith("_ptr") else "i32"
        compiled = triton.compile(triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                                  target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
        with tempfile.TemporaryDirectory() as folder:
            cubin = Path(folder, "kernel.cubin")
            cubin.write_bytes(compiled.asm["cubin"])
            out = subprocess.run([tool, "--dump-resource-usage", cubin], capture_output=True, text=True, check=True)
        usage = re.search(r"REG:\d+.*?LOCAL:\d+", out.stdout)
        found.append((name, usage.group(0) if usage else out.stdout.strip()))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", help="a generated ModelNew file")
    parser.add_argument("--arch", type=int, default=90, help="compute capability as a number (90: Hopper)")
    args = parser.parse_args()
    for name, usage in kernel_usage(args.candidate, args.arch):
        print(f"{name}: {usage}")


if __name__ == "__main__":
    main()
