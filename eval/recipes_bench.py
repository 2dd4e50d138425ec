"""Benchmark of the recipe brain on the H200: eager vs torch.compile vs kskill recipes, one run.

For each problem of eval/problems (KernelBench format): build candidates with a fixed,
deterministic sequence of the techniques that apply (plus CUDA-graph and autotune variants and
the faithful seed), check each against the reference on fresh inputs (fp32 atol=rtol=1e-4),
keep the fastest correct one (the seed when nothing beats eager), then time eager,
torch.compile and that candidate interleaved with CUDA events, the L2 flushed before each call.
Writes a table to stdout and JSON + CSV (with GPU name and versions) under --out.

    python -m kskill.eval.recipes_bench --out runs/recipes_bench
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from kskill.agents.recipes import RECIPES, applicable, build_candidate
from kskill.agents.recipes.errors import RecipeNotApplicable

PROBLEMS = Path(__file__).parent / "problems"
REGION_ORDER = ["algebraic_simplification", "flash_attention", "gemm_epilogue_fusion", "online_softmax",
                "fused_normalization", "triton_reduction", "fused_scan", "fused_pooling", "fused_loss",
                "kernel_fusion", "vectorized_access"]
ATOL = RTOL = 1e-4


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def build_models(problem: Any, candidate: Any | None) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    new = None
    if candidate is not None:
        torch.manual_seed(0)
        new = candidate.ModelNew(*problem.get_init_inputs()).cuda()
    return ref, new


def fresh_inputs(problem: Any, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]


def outputs_match(a: Any, b: Any) -> tuple[bool, float]:
    if isinstance(a, torch.Tensor):
        if a.shape != b.shape:
            return False, math.inf
        if not a.dtype.is_floating_point:
            return bool(torch.equal(a, b)), 0.0
        err = (a.float() - b.float()).abs().max().item() if a.numel() else 0.0
        return bool(torch.allclose(a.float(), b.float(), atol=ATOL, rtol=RTOL)), err
    results = [outputs_match(x, y) for x, y in zip(a, b)]
    return all(r[0] for r in results), max(r[1] for r in results)


class Timer:
    """CUDA-event timing of several callables, interleaved, with an L2 flush before each call."""

    def __init__(self) -> None:
        self.flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")

    def run(self, fns: dict[str, Callable[[], Any]], reps: int, warmup: int = 3) -> dict[str, float]:
        with torch.no_grad():
            for fn in fns.values():
                for _ in range(warmup):
                    fn()
            torch.cuda.synchronize()
            times: dict[str, list[float]] = {k: [] for k in fns}
            for _ in range(reps):
                for key, fn in fns.items():
                    self.flush.zero_()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    end.record()
                    end.synchronize()
                    times[key].append(start.elapsed_time(end))
        return {k: statistics.median(v) for k, v in times.items()}


def technique_sequence(source: str) -> list[str]:
    return [t for t in REGION_ORDER if applicable(source, t).ok]


def variants(source: str, sweep: bool) -> list[list[str]]:
    base = technique_sequence(source)
    graphable = applicable(source, "cuda_graph").ok
    out = [[]]
    if graphable:
        out.append(["cuda_graph"])
    if base:
        out.append(base)
        if graphable:
            out.append(base + ["cuda_graph"])
        if sweep and "kernel_fusion" in base:
            out.append(base + ["autotune_launch"] + (["cuda_graph"] if graphable else []))
    return out


def check_candidate(problem: Any, path: Path, name: str) -> tuple[bool, float, Any]:
    module = load_module(path, name)
    ref, new = build_models(problem, module)
    ok, worst = True, 0.0
    with torch.no_grad():
        for seed in (11, 12):
            inputs = fresh_inputs(problem, seed)
            match, err = outputs_match(ref(*inputs), new(*inputs))
            ok, worst = ok and match, max(worst, err)
    return ok, worst, module


def bench_problem(path: Path, timer: Timer, workdir: Path, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    source = path.read_text()
    problem = load_module(path, f"problem_{path.stem}")
    row: dict[str, Any] = {"problem": path.stem}
    tried = []
    best: tuple[float, list[str], Any, dict[str, Any]] | None = None
    ref, _ = build_models(problem, None)
    inputs = fresh_inputs(problem, 1)
    eager_ms = timer.run({"eager": lambda: ref(*inputs)}, reps=5)["eager"]
    for techniques in variants(source, args.sweep):
        label = "+".join(techniques) or "seed"
        try:
            cand = build_candidate(source, techniques)
        except RecipeNotApplicable as exc:
            tried.append({"techniques": techniques, "error": str(exc)})
            continue
        cpath = workdir / f"{path.stem}__{len(tried)}.py"
        cpath.write_text(cand.source)
        try:
            ok, err, module = check_candidate(problem, cpath, f"cand_{path.stem}_{len(tried)}")
        except Exception as exc:  # a failing candidate is recorded, the benchmark goes on
            tried.append({"techniques": techniques, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        entry = {"techniques": cand.applied, "requested": techniques, "correct": ok, "max_abs_err": err,
                 "params": cand.params}
        if ok:
            _, new = build_models(problem, module)
            ms = timer.run({"eager": lambda: ref(*inputs), "cand": lambda: new(*inputs)}, reps=10)
            entry["ms"], entry["eager_ms"] = ms["cand"], ms["eager"]
            ratio = ms["eager"] / ms["cand"]
            if best is None or ratio > best[0]:
                best = (ratio, cand.applied, module, entry)
        tried.append(entry)
        print(f"    {label:<80} ok={ok} err={err:.1e} {entry.get('ms', float('nan')):.4f} ms", flush=True)
    row["candidates"] = tried
    if best is None:
        row.update(correct=False, error="no correct candidate")
        return row
    _, techniques, module, entry = best
    ref, new = build_models(problem, module)
    fns: dict[str, Callable[[], Any]] = {"eager": lambda: ref(*inputs), "kskill": lambda: new(*inputs)}
    compiled_modes = ["default"] + (["max-autotune-no-cudagraphs"] if args.max_autotune else [])
    if args.compile and time.time() < deadline:
        for mode in compiled_modes:
            try:
                torch._dynamo.reset()
                cref, _ = build_models(problem, None)
                compiled = torch.compile(cref, mode=None if mode == "default" else mode)
                with torch.no_grad():
                    compiled(*inputs)
                fns[f"compile_{mode}"] = lambda c=compiled: c(*inputs)
            except Exception as exc:  # torch.compile failing on a problem is reported, not fatal
                row[f"compile_{mode}_error"] = f"{type(exc).__name__}: {exc}"[:300]
    elif args.compile:
        row["compile_default_error"] = "skipped: time budget spent"
    ms = timer.run(fns, reps=args.reps)
    row.update(correct=True, techniques=techniques, params=entry["params"], max_abs_err=entry["max_abs_err"],
               eager_ms=ms["eager"], kskill_ms=ms["kskill"], speedup=ms["eager"] / ms["kskill"])
    for mode in compiled_modes:
        key = f"compile_{mode}"
        if key in ms:
            row[f"{key}_ms"] = ms[key]
            row[f"{key}_speedup"] = ms["eager"] / ms[key]
    return row


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/recipes_bench", help="folder for results.json and results.csv")
    parser.add_argument("--problems", default="", help="comma-separated name prefixes (default: all)")
    parser.add_argument("--reps", type=int, default=30, help="timed calls per variant in the final comparison")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    parser.add_argument("--max-autotune", action="store_true", help="also time mode=max-autotune-no-cudagraphs")
    parser.add_argument("--sweep", action="store_true", help="also try autotune_launch variants (slower)")
    parser.add_argument("--budget-s", type=float, default=420, help="after this, torch.compile is skipped")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("recipes_bench needs a CUDA GPU (timings on the CPU interpreter mean nothing)", file=sys.stderr)
        return 2
    import triton
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = sorted(PROBLEMS.glob("[0-9]*.py"))
    if args.problems:
        prefixes = args.problems.split(",")
        paths = [p for p in paths if any(p.stem.startswith(x) for x in prefixes)]
    timer = Timer()
    start = time.time()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            print(f"== {path.stem}", flush=True)
            try:
                rows.append(bench_problem(path, timer, Path(tmp), args, start + args.budget_s))
            except Exception as exc:  # one broken problem must not lose the others' results
                rows.append({"problem": path.stem, "correct": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
            r = rows[-1]
            print(f"   -> {r.get('speedup', float('nan')):.2f}x eager, compile {r.get('compile_default_speedup', float('nan')):.2f}x, "
                  f"{'+'.join(r.get('techniques', [])) or 'seed'}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "python": sys.version.split()[0], "wall_s": round(time.time() - start, 1), "atol": ATOL, "rtol": RTOL}
    ok = [r for r in rows if r.get("correct")]
    summary = {
        "problems": len(rows), "correct": len(ok),
        "geomean_speedup_kskill": geomean([r["speedup"] for r in ok]),
        "geomean_speedup_compile": geomean([r["compile_default_speedup"] for r in ok if "compile_default_speedup" in r]),
        "geomean_speedup_kskill_on_compiled_set": geomean([r["speedup"] for r in ok if "compile_default_speedup" in r]),
        "slower_than_eager": [r["problem"] for r in ok if r["speedup"] < 1.0],
    }
    (out / "results.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2, default=str))
    fields = ["problem", "correct", "eager_ms", "kskill_ms", "speedup", "compile_default_ms", "compile_default_speedup",
              "compile_max-autotune-no-cudagraphs_speedup", "techniques", "max_abs_err", "error"]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "techniques": "+".join(r.get("techniques", []))})
    print(f"\n{meta['gpu']}  torch {meta['torch']}  triton {meta['triton']}  ({meta['wall_s']} s)")
    print(f"{'problem':<36}{'eager ms':>10}{'kskill ms':>11}{'speedup':>9}{'compile':>9}  techniques")
    for r in rows:
        if not r.get("correct"):
            print(f"{r['problem']:<36}  FAILED {r.get('error', '')}")
            continue
        print(f"{r['problem']:<36}{r['eager_ms']:>10.4f}{r['kskill_ms']:>11.4f}{r['speedup']:>8.2f}x"
              f"{r.get('compile_default_speedup', float('nan')):>8.2f}x  {'+'.join(r['techniques']) or 'seed'}")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
