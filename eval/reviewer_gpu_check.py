"""GPU verification of the Reviewer's timing and profiling (run on a CUDA machine).

Checks, in one run:
1. On each problem, the Reviewer's median reference time agrees with
   triton.testing.do_bench (median, same warm-up and repetition settings) within 5%.
2. The speedup of a fixed candidate varies by at most 3% across repeated reviews.
   The fixed candidate for eval/problems is the reference itself as ModelNew (speedup ~1);
   the Triton and CUDA C++ ReLU fixtures are checked the same way on a 64 MB ReLU.
3. Nsight Compute metrics are collected for a Triton kernel and for a CUDA C++ kernel,
   or the reason they are unavailable is printed.
4. Review time per candidate in a batch of --batch-size candidates (the seed as ModelNew, each
   copy its own candidate), against one review alone, on each problem (also KernelBench files:
   --batch-problems PATH ...). Targets: at most 5 s per candidate in a batch, 30 s for one alone.

    python -m kskill.eval.reviewer_gpu_check --out runs/reviewer_gpu_check

Prints a table and writes results.json (with GPU name and versions) under --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kskill.agents.reviewer import ReviewOptions, review, review_batch

# The checkout that holds eval/problems and tests/fixtures: beside this file in an editable
# install, otherwise the working directory (run it from the repository root).
ROOT = next((p for p in (Path(__file__).resolve().parents[1], Path.cwd()) if (p / "tests" / "fixtures").is_dir()),
            Path.cwd())
PROBLEMS = ROOT / "eval" / "problems"
FIXTURES = ROOT / "tests" / "fixtures" / "reviewer"
# Medium-sized problems (64-128 MB): GPU time dominates, and each review stays a few seconds.
DEFAULT_PROBLEMS = ("relu_large", "softmax_medium", "layernorm_medium", "matmul_medium", "rowsum_medium")
TIMING_TOLERANCE = 0.05
SPEEDUP_TOLERANCE = 0.03


def seed_candidate(problem: Path) -> str:
    """The reference itself as ModelNew: a fixed candidate whose speedup should sit near 1."""
    return problem.read_text() + "\n\nclass ModelNew(Model):\n    pass\n"


def do_bench_reference_ms(problem: Path, seed: int = 42) -> float:
    """triton.testing.do_bench's median for the reference forward, in this process."""
    import triton.testing

    spec = importlib.util.spec_from_file_location(f"check_{problem.stem}", problem)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).cuda()
    torch.manual_seed(seed + 100)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        return float(triton.testing.do_bench(lambda: model(*inputs), warmup=25, rep=100, return_mode="median"))


def check_timing(problem: Path, candidate: str | Path, repeats: int) -> dict[str, Any]:
    before = do_bench_reference_ms(problem)
    reviews = [review(problem, candidate, ReviewOptions(device="cuda", ncu=False, profile=False))
               for _ in range(repeats)]
    after = do_bench_reference_ms(problem)
    failed = [r for r in reviews if not r.passed]
    if failed:
        return {"problem": problem.stem, "error": f"{failed[0].failure_class}: {failed[0].failure_message}"}
    harness = statistics.median(r.timing.reference.median_ms for r in reviews)
    bench = (before + after) / 2
    speedups = [r.timing.speedup for r in reviews]
    spread = (max(speedups) - min(speedups)) / statistics.fmean(speedups)
    return {
        "problem": problem.stem, "harness_reference_ms": harness, "do_bench_ms": bench,
        "do_bench_runs_ms": [before, after], "timing_diff": abs(harness - bench) / bench,
        "speedups": speedups, "speedup_spread": spread,
        "reference_ms_per_review": [r.timing.reference.median_ms for r in reviews],
        "candidate_ms_per_review": [r.timing.candidate.median_ms for r in reviews],
    }


def check_ncu(problem: Path, candidate: Path) -> dict[str, Any]:
    result = review(problem, candidate, ReviewOptions(device="cuda"))
    ncu_names = ("sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct", "registers_per_thread",
                 "warp_stall_long_scoreboard_pct", "branch_efficiency_pct", "occupancy_limiter")
    return {
        "candidate": candidate.stem, "passed": result.passed,
        "failure": f"{result.failure_class}: {result.failure_message}" if not result.passed else "",
        "ncu": {n: result.observations.get(n) for n in ncu_names},
        "ncu_unavailable": {n: result.unavailable[n] for n in ncu_names if n in result.unavailable},
        "profiled_kernel": result.profile.get("ncu", {}).get("profiled_kernel"),
        "kernel_launches_per_forward": result.observations.get("kernel_launches_per_forward"),
        "speedup": result.timing.speedup if result.timing else None,
    }


def check_batch(problem: Path, size: int) -> dict[str, Any]:
    """Wall time of one review alone and of a batch of `size`, with the product's default options."""
    seed = seed_candidate(problem)
    started = time.monotonic()
    alone = review(problem, seed, ReviewOptions(device="cuda"))
    alone_s = time.monotonic() - started
    batch = [f"{seed}\n# copy {k}\n" for k in range(size)]
    started = time.monotonic()
    reviews = review_batch(problem, batch, ReviewOptions(device="cuda"))
    batch_s = time.monotonic() - started
    failed = [r for r in [alone, *reviews] if not r.passed]
    return {"problem": problem.stem, "alone_s": alone_s, "batch_s": batch_s, "batch_size": size,
            "per_candidate_s": batch_s / size, "passed": not failed,
            "failure": f"{failed[0].failure_class}: {failed[0].failure_message}" if failed else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/reviewer_gpu_check"))
    parser.add_argument("--problems", nargs="*", default=list(DEFAULT_PROBLEMS),
                        help="names in tests/fixtures/reviewer/gpu or eval/problems")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-problems", nargs="*", type=Path, default=[],
                        help="problem files (KernelBench ones too) for the review-time check; default: --problems")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    import triton

    started = time.time()
    relu = FIXTURES / "gpu" / "relu_large.py"
    rows = []
    for name in args.problems:
        path = FIXTURES / "gpu" / f"{name}.py"
        path = path if path.exists() else PROBLEMS / f"{name}.py"
        rows.append(check_timing(path, seed_candidate(path), args.repeats))
        print(json.dumps(rows[-1], default=str), flush=True)  # a partial run still reports what it measured
    for candidate, label in ((FIXTURES / "candidates" / "honest" / "relu_triton.py", "relu_large+triton"),
                             (FIXTURES / "gpu" / "relu_cuda.py", "relu_large+cuda")):
        rows.append({**check_timing(relu, candidate, args.repeats), "problem": label})
        print(json.dumps(rows[-1], default=str), flush=True)
    ncu = []
    for candidate in (FIXTURES / "candidates" / "honest" / "relu_triton.py", FIXTURES / "gpu" / "relu_cuda.py"):
        ncu.append(check_ncu(relu, candidate))
        print(json.dumps(ncu[-1], default=str), flush=True)

    batches = []
    for path in args.batch_problems or [FIXTURES / "gpu" / f"{n}.py" for n in args.problems
                                        if (FIXTURES / "gpu" / f"{n}.py").exists()]:
        batches.append(check_batch(path, args.batch_size))
        print(json.dumps(batches[-1], default=str), flush=True)

    print(f"{'problem':28s} {'harness ms':>11s} {'do_bench ms':>11s} {'diff':>7s} {'speedups':>26s} {'spread':>7s}")
    for r in rows:
        if "error" in r:
            print(f"{r['problem']:28s} ERROR {r['error'][:90]}")
            continue
        speedups = " ".join(f"{s:.3f}" for s in r["speedups"])
        print(f"{r['problem']:28s} {r['harness_reference_ms']:11.4f} {r['do_bench_ms']:11.4f} "
              f"{r['timing_diff']:7.1%} {speedups:>26s} {r['speedup_spread']:7.1%}")
    for n in ncu:
        measured = sum(v is not None for v in n["ncu"].values())
        print(f"ncu {n['candidate']:20s} passed={n['passed']} metrics={measured}/{len(n['ncu'])} "
              f"kernel={n['profiled_kernel']} {n['failure']}")
        for name, reason in n["ncu_unavailable"].items():
            print(f"    unavailable {name}: {reason}")
    for b in batches:
        print(f"review time {b['problem']:24s} alone {b['alone_s']:6.1f} s, batch of {b['batch_size']} "
              f"{b['batch_s']:6.1f} s = {b['per_candidate_s']:5.1f} s per candidate {b['failure']}")
    timed = [r for r in rows if "error" not in r]
    verdict = {
        "timing_within_5pct": sum(r["timing_diff"] <= TIMING_TOLERANCE for r in timed),
        "speedup_within_3pct": sum(r["speedup_spread"] <= SPEEDUP_TOLERANCE for r in timed),
        "problems_timed": len(timed), "ncu_triton": any(v is not None for v in ncu[0]["ncu"].values()),
        "ncu_cuda": any(v is not None for v in ncu[1]["ncu"].values()),
        "per_candidate_within_5s": sum(b["per_candidate_s"] <= 5 for b in batches),
        "alone_within_30s": sum(b["alone_s"] <= 30 for b in batches), "batches": len(batches),
    }
    print(json.dumps(verdict))
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "cuda": torch.version.cuda, "wall_s": time.time() - started, "timing": rows, "ncu": ncu, "batches": batches,
              "verdict": verdict}
    (args.out / "results.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
