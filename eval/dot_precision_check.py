"""How far a Triton fp32 GEMM's dots ("ieee", "tf32x3", "tf32") land from PyTorch's fp32 product,
by the reduction length K: the evidence for the guards of the GEMM variants' dot precisions.

The kernel has the main loop of gemm_epilogue_fusion's Triton backend, with its tiles (128x128x32,
8 warps, 3 stages for the tensor-core precisions; 64x64x32 for "ieee"), and, for 3xTF32, also a
two-level sum (see MODES; 64x64 tiles, whose unrolled group fits in shared memory). The operands
are drawn as KernelBench draws them: an input uniform in [0, 1), and either nn.Linear's weight,
uniform within 1/sqrt(K) ("linear"), or a second matrix uniform in [0, 1) as the plain matmul
problems have it ("uniform"), whose products all add up with the same sign; "mixed" draws both in
[-1, 1), as the Reviewer's mixed-sign input variant does, so that sums cancel. Each product is
compared with eager PyTorch (fp32, TF32 off: the reference the Reviewer checks against) and with
float64, and checked as the Reviewer checks it (|a - b| <= atol + rtol * |b|, atol = rtol = 1e-4 by
default), with and without the error floor the Reviewer allows on its input variants (twice the
atol eager itself needs against float64).

    python -m kskill.eval.dot_precision_check --k 1024 2048 4096 8192 16384 --out runs/dot_precision

On a machine without CUDA it runs in the Triton interpreter (small shapes only: --m 16 --n 16).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

# (dot precision, K tiles summed into a fresh accumulator before it is added to the running sum):
# 1 is gemm_epilogue_fusion's loop; 8 is a two-level sum, whose outer additions are ordinary fp32
# additions, should the tensor cores' own accumulation be what loses the accuracy over long K.
MODES = (("ieee", 1), ("tf32x3", 1), ("tf32x3", 8), ("tf32", 1))


@functools.cache  # one JIT function: Triton then compiles once per precision and tile shape
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def gemm_kernel(a_ptr, w_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_K: tl.constexpr, PRECISION: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K * GROUP_K):
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for g in tl.static_range(GROUP_K):
                kk = k0 + g * BLOCK_K + tl.arange(0, BLOCK_K)
                a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                            other=0.0)
                # nn.Linear keeps W as (N, K): the (K, N) tile is read with K contiguous.
                b = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=(kk[:, None] < K) & (rn[None, :] < N),
                            other=0.0)
                part += tl.dot(a, b, input_precision=PRECISION)
            acc += part
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    return gemm_kernel


def triton_product(x, w, precision: str, group_k: int = 1):
    import torch
    import triton

    m, k = x.shape
    n = w.shape[0]
    big = precision != "ieee" and group_k == 1 and x.device.type == "cuda"
    block = min(128 if big else 64, triton.next_power_of_2(max(m, n, 16)))
    launch = {"num_warps": 8 if big else 4, "num_stages": 3 if group_k == 1 else 2}
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    grid = (triton.cdiv(m, block), triton.cdiv(n, block))
    _kernel()[grid](x, w, out, m, n, k, BLOCK_M=block, BLOCK_N=block, BLOCK_K=32, GROUP_K=group_k,
                    PRECISION=precision, **(launch if x.device.type == "cuda" else {}))
    return out, {"block": block, **launch}


OPERANDS = ("linear", "uniform", "mixed")


def measure(m: int, n: int, k: int, device: str, atol: float, rtol: float, operands: str = "linear",
            seed: int = 0) -> list[dict[str, Any]]:
    """One row per precision: errors against eager fp32 and float64, and the Reviewer's verdict."""
    import torch

    from kskill.agents.reviewer.correctness import needed_atol

    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand((m, k), device=device, generator=generator)
    w = torch.rand((n, k), device=device, generator=generator)
    if operands == "linear":
        w = (w * 2 - 1) / k ** 0.5
    elif operands == "mixed":
        x, w = x * 2 - 1, w * 2 - 1
    eager = x @ w.T
    exact = (x.double() @ w.double().T)
    floor = needed_atol(eager, exact, rtol)
    rows = []
    for precision, group_k in MODES:
        got, tiles = triton_product(x, w, precision, group_k)
        diff = (got - eager).abs()
        allowed = atol + rtol * eager.abs()
        rows.append({
            "k": k, "m": m, "n": n, "operands": operands, "precision": precision, "k_tiles_per_partial_sum": group_k,
            **tiles, "eager_error_floor": floor,
            "max_abs_vs_eager": float(diff.max()),
            "max_abs_vs_float64": float((got.double() - exact).abs().max()),
            "eager_max_abs_vs_float64": float((eager.double() - exact).abs().max()),
            "elements_out_of_tolerance": int((diff > allowed).sum()),
            "passes": bool((diff <= allowed).all()),
            "passes_with_floor": bool((diff <= allowed + 2 * floor).all()),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--m", type=int, default=1024)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--out", type=Path, default=None, help="write results.json here")
    args = parser.parse_args(argv)
    import torch
    import triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    rows = [row for operands in OPERANDS for k in args.k
            for row in measure(args.m, args.n, k, device, args.atol, args.rtol, operands)]
    print(f"{'operands':>8} {'K':>6} {'precision':>9} {'tiles':>5} {'max |d| eager':>14} {'max |d| f64':>12} "
          f"{'eager vs f64':>12} {'floor':>9} {'out':>8}  verdict  with floor")
    for r in rows:
        print(f"{r['operands']:>8} {r['k']:>6} {r['precision']:>9} {r['k_tiles_per_partial_sum']:>5} {r['max_abs_vs_eager']:>14.3e} {r['max_abs_vs_float64']:>12.3e} "
              f"{r['eager_max_abs_vs_float64']:>12.3e} {r['eager_error_floor']:>9.2e} {r['elements_out_of_tolerance']:>8}  "
              f"{'pass' if r['passes'] else 'FAIL':>7}  {'pass' if r['passes_with_floor'] else 'FAIL'}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (Triton interpreter)",
                 "torch": torch.__version__, "triton": triton.__version__, "atol": args.atol, "rtol": args.rtol}
        (args.out / "results.json").write_text(json.dumps({**stamp, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
