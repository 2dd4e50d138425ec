"""Benchmark of the recipe brain on a GPU: eager vs torch.compile vs kskill recipes, one run.

For each problem of eval/problems (KernelBench format):
1. build candidates from the techniques that apply (and their launch/precision variants),
   check each against the reference on fresh inputs (fp32 atol=rtol=1e-4);
2. select: time the reference and every correct candidate together with the Reviewer's
   method (agents/reviewer/timing.py: CUDA events, 256 MB L2 flush before each call,
   warm-up, calls interleaved, median of many) and keep the fastest, the reference included;
3. final: time eager, the chosen candidate and torch.compile together the same way; the
   chosen candidate is re-verified on the timing inputs and kept only if it beats eager by
   --min-gain in this run, otherwise the result is the reference module itself (technique
   "reference", 1.00x), as kskill returns the reference when nothing beats it.
Medians are reported with their spread (20th and 80th percentiles).

Problems run in a worker subprocess; a problem that crashes the worker (a sticky CUDA error),
hangs, or runs past --problem-timeout-s is recorded as failed and the next worker goes on
with the rest. Inputs and parameters are created on the GPU (`with torch.device("cuda")`), so
suite-sized tensors cost no CPU random-number time. Writes a table to stdout and JSON + CSV
(with GPU name and versions) under --out.

    python -m kskill.eval.recipes_bench --out runs/recipes_bench
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from kskill.agents.recipes import applicable, build_candidate, param_variants
from kskill.agents.recipes.errors import RecipeNotApplicable

PROBLEMS = Path(__file__).parent / "problems"
REGION_ORDER = ["algebraic_simplification", "flash_attention", "gemm_epilogue_fusion", "online_softmax",
                "fused_normalization", "triton_reduction", "fused_scan", "fused_pooling", "fused_loss",
                "kernel_fusion", "vectorized_access"]
ATOL = RTOL = 1e-4
SELECT = {"warmup_ms": 20.0, "rep_ms": 60.0, "min_reps": 15, "max_reps": 200}
FINAL = {"warmup_ms": 25.0, "rep_ms": 150.0, "min_reps": 30, "max_reps": 400}
CUDA_BROKEN = 3  # worker exit code: the CUDA context is unusable, start a fresh worker


# ---------------------------------------------------------------------------- one problem

def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def build_model(problem: Any, cls: type) -> torch.nn.Module:
    """Model or ModelNew built exactly as the problem builds it, parameters created on the GPU."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        return cls(*problem.get_init_inputs()).cuda()


def fresh_inputs(problem: Any, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    with torch.device("cuda"):
        inputs = problem.get_inputs()
    return [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]


def outputs_match(a: Any, b: Any) -> tuple[bool, float]:
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False, math.inf
        if not a.dtype.is_floating_point:
            return bool(torch.equal(a, b)), 0.0
        if not bool(torch.isfinite(b).all()) and bool(torch.isfinite(a).all()):
            return False, math.inf
        err = (a.float() - b.float()).abs().max().item() if a.numel() else 0.0
        return bool(torch.allclose(a.float(), b.float(), atol=ATOL, rtol=RTOL)), err
    results = [outputs_match(x, y) for x, y in zip(a, b)]
    return all(r[0] for r in results) and len(a) == len(b), max((r[1] for r in results), default=0.0)


def cuda_healthy() -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:  # an illegal address or launch failure poisons the whole context
        return False


def reviewer_timing() -> Any:
    """agents/reviewer/timing.py, loaded by path: it needs torch only, while importing the
    reviewer package would pull its own dependencies (pydantic, yaml) onto the GPU machine."""
    import kskill.agents

    if "_kskill_reviewer_timing" not in sys.modules:
        path = Path(kskill.agents.__file__).parent / "reviewer" / "timing.py"
        sys.modules["_kskill_reviewer_timing"] = load_module(path, "_kskill_reviewer_timing")
    return sys.modules["_kskill_reviewer_timing"]


def time_together(fns: dict[str, Callable[[], Any]], settings: dict[str, float]) -> dict[str, dict[str, float]]:
    """The Reviewer's interleaved CUDA-event timing (one method for selection and report)."""
    with torch.no_grad():
        return reviewer_timing().time_cuda(fns, **settings)["stats"]


def technique_sequence(source: str) -> list[str]:
    return [t for t in REGION_ORDER if applicable(source, t).ok]


def variants(source: str, sweep: bool) -> list[tuple[list[str], dict[str, Any]]]:
    """(techniques, params) to build: the full sequence, its variants, with and without a CUDA graph."""
    base = technique_sequence(source)
    graphable = applicable(source, "cuda_graph").ok
    out: list[tuple[list[str], dict[str, Any]]] = [(["cuda_graph"], {})] if graphable else []
    if base:
        for params in [{}] + param_variants(source, base):
            out.append((base, params))
            if graphable:
                out.append((base + ["cuda_graph"], params))
        if sweep and "kernel_fusion" in base:
            out.append((base + ["autotune_launch"] + (["cuda_graph"] if graphable else []), {}))
    return out


def label_of(techniques: list[str], params: dict[str, Any]) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return "+".join(techniques) + (f" [{extra}]" if extra else "")


def check_candidate(problem: Any, ref: torch.nn.Module, path: Path, name: str) -> tuple[bool, float, Any]:
    module = load_module(path, name)
    new = build_model(problem, module.ModelNew)
    ok, worst = True, 0.0
    with torch.no_grad():
        for seed in (11, 12):
            inputs = fresh_inputs(problem, seed)
            match, err = outputs_match(ref(*inputs), new(*inputs))
            ok, worst = ok and match, max(worst, err)
    return ok, worst, module


def build_and_check(path: Path, problem: Any, ref: torch.nn.Module, workdir: Path, sweep: bool
                    ) -> tuple[list[dict[str, Any]], list[tuple[str, Any, dict[str, Any]]]]:
    """Every variant built and checked; returns the log entries and the correct (label, module, entry)."""
    source = path.read_text()
    tried: list[dict[str, Any]] = []
    correct: list[tuple[str, Any, dict[str, Any]]] = []
    for techniques, params in variants(source, sweep):
        label = label_of(techniques, params)
        entry: dict[str, Any] = {"label": label, "requested": techniques, "request_params": params}
        tried.append(entry)
        try:
            cand = build_candidate(source, techniques, params)
            entry.update(techniques=cand.applied, params=cand.params)
            cpath = workdir / f"{path.stem}__{len(tried)}.py"
            cpath.write_text(cand.source)  # triton.jit needs the kernels in a real file
            ok, err, module = check_candidate(problem, ref, cpath, f"cand_{path.stem}_{len(tried)}")
            entry.update(correct=ok, max_abs_err=err)
            if ok:
                correct.append((f"c{len(tried)}", module, entry))
        except RecipeNotApplicable as exc:
            entry["error"] = f"not applicable: {exc}"[:300]
        except Exception as exc:  # a failing candidate is recorded, the benchmark goes on
            entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
            if not cuda_healthy():
                print(f"    {label}: CUDA context broken ({entry['error']}); restarting the worker", flush=True)
                raise SystemExit(CUDA_BROKEN)
        print(f"    {label:<90} {'ok' if entry.get('correct') else 'FAIL'} "
              f"err={entry.get('max_abs_err', float('nan')):.1e} {entry.get('error', '')[:120]}", flush=True)
    return tried, correct


def stats_row(prefix: str, s: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}_ms": s["median_ms"], f"{prefix}_p20_ms": s["p20_ms"], f"{prefix}_p80_ms": s["p80_ms"]}


def select(problem: Any, ref: torch.nn.Module, correct: list[tuple[str, Any, dict[str, Any]]],
           inputs: list[Any]) -> tuple[str, Any | None, dict[str, Any]]:
    """Fastest of the reference and every correct candidate, timed together."""
    models = {key: build_model(problem, module.ModelNew) for key, module, _ in correct}
    fns: dict[str, Callable[[], Any]] = {"reference": lambda: ref(*inputs)}
    for key, model in models.items():
        fns[key] = lambda m=model: m(*inputs)
    stats = time_together(fns, SELECT)
    for key, _, entry in correct:
        entry.update(select_ms=stats[key]["median_ms"], select_p20_ms=stats[key]["p20_ms"],
                     select_p80_ms=stats[key]["p80_ms"],
                     select_speedup=stats["reference"]["median_ms"] / stats[key]["median_ms"])
    best = min(stats, key=lambda k: stats[k]["median_ms"])
    info = {"select_reference_ms": stats["reference"]["median_ms"], "selected": best}
    if best == "reference":
        return best, None, info
    module, entry = next((m, e) for k, m, e in correct if k == best)
    return best, module, {**info, "entry": entry}


def compiled_fns(problem: Any, inputs: list[Any], modes: list[str], row: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    fns: dict[str, Callable[[], Any]] = {}
    for mode in modes:
        try:
            torch._dynamo.reset()
            compiled = torch.compile(build_model(problem, problem.Model), mode=None if mode == "default" else mode)
            with torch.no_grad():
                compiled(*inputs)
            fns[f"compile_{mode}"] = lambda c=compiled: c(*inputs)
        except Exception as exc:  # torch.compile failing on a problem is reported, not fatal
            row[f"compile_{mode}_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return fns


def bench_problem(path: Path, workdir: Path, args: argparse.Namespace, compile_ok: bool) -> dict[str, Any]:
    problem = load_module(path, f"problem_{path.stem}")
    row: dict[str, Any] = {"problem": path.stem}
    ref = build_model(problem, problem.Model)
    tried, correct = build_and_check(path, problem, ref, workdir, args.sweep)
    row["candidates"] = tried
    inputs = fresh_inputs(problem, 1)
    chosen, module, info = select(problem, ref, correct, inputs) if correct else ("reference", None, {"selected": "reference"})
    row["select_reference_ms"] = info.get("select_reference_ms")
    fns: dict[str, Callable[[], Any]] = {"eager": lambda: ref(*inputs)}
    new = None
    if module is not None:
        new = build_model(problem, module.ModelNew)
        with torch.no_grad():
            match, err = outputs_match(ref(*inputs), new(*inputs))
        if match:
            fns["kskill"] = lambda: new(*inputs)
        else:
            row["final_check_error"] = f"chosen candidate disagrees on the timing inputs (max err {err:.2e})"
    modes = ["default"] + (["max-autotune-no-cudagraphs"] if args.max_autotune else [])
    if args.compile and compile_ok:
        fns.update(compiled_fns(problem, inputs, modes, row))
    elif args.compile:
        row["compile_default_error"] = "skipped: time budget spent"
    stats = time_together(fns, FINAL)
    row.update(correct=True, **stats_row("eager", stats["eager"]))
    for key in fns:
        if key.startswith("compile_"):
            row.update(stats_row(key, stats[key]))
            row[f"{key}_speedup"] = stats["eager"]["median_ms"] / stats[key]["median_ms"]
    if "kskill" in fns:
        entry = info["entry"]
        gain = stats["eager"]["median_ms"] / stats["kskill"]["median_ms"]
        row["candidate_final_speedup"] = gain
        if gain >= 1.0 + args.min_gain:
            row.update(techniques=entry["techniques"], params=entry.get("params", {}),
                       max_abs_err=entry.get("max_abs_err"), speedup=gain, **stats_row("kskill", stats["kskill"]))
            return row
        row["declined"] = (f"{label_of(entry['techniques'], entry['request_params'])} measured {gain:.3f}x eager "
                           f"in the final run (< {1 + args.min_gain:.2f}x): returning the reference")
    elif module is None:
        row["declined"] = "no correct candidate beat the reference in selection: returning the reference"
    # the returned module is the reference itself: its time is eager's, by construction
    row.update(techniques=["reference"], params={}, max_abs_err=0.0, speedup=1.0,
               kskill_ms=row["eager_ms"], kskill_p20_ms=row["eager_p20_ms"], kskill_p80_ms=row["eager_p80_ms"])
    return row


def run_worker(args: argparse.Namespace) -> int:
    """Bench the named problems in order, appending one JSON row per problem to rows.jsonl."""
    try:
        import torch._inductor.config as inductor_config
        inductor_config.compile_threads = 1  # no compile-worker pool competing for the CPU while timing
    except Exception:  # older or newer torch without the knob: compile as it will
        pass
    out = Path(args.out)
    deadline = float(args.compile_deadline)
    names = [n for n in args.worker.split(",") if n]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            (out / "current.txt").write_text(f"{name} {time.time()}")
            print(f"== {name}", flush=True)
            try:
                row = bench_problem(PROBLEMS / f"{name}.py", Path(tmp), args, time.time() < deadline)
            except SystemExit:
                raise
            except Exception as exc:  # one broken problem must not lose the others' results
                row = {"problem": name, "correct": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
            with open(out / "rows.jsonl", "a") as f:
                f.write(json.dumps(row, default=str) + "\n")
            print_row_line(row)
            gc.collect()
            torch.cuda.empty_cache()
            if not cuda_healthy():
                return CUDA_BROKEN
    return 0


def print_row_line(r: dict[str, Any]) -> None:
    if not r.get("correct"):
        print(f"   -> FAILED {r.get('error', '')}", flush=True)
        return
    print(f"   -> {r['speedup']:.2f}x eager ({r['eager_ms']:.4f} -> {r['kskill_ms']:.4f} ms), compile "
          f"{r.get('compile_default_speedup', float('nan')):.2f}x, {'+'.join(r['techniques'])}"
          + (f"  [{r['declined']}]" if r.get("declined") else ""), flush=True)


# ---------------------------------------------------------------------------- the run

def read_rows(out: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    path = out / "rows.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["problem"]] = row
    return rows


def worker_command(args: argparse.Namespace, names: list[str], compile_deadline: float) -> list[str]:
    cmd = [sys.executable, "-m", "kskill.eval.recipes_bench", "--out", str(args.out), "--worker", ",".join(names),
           "--compile-deadline", str(compile_deadline), "--min-gain", str(args.min_gain)]
    cmd += [] if args.compile else ["--no-compile"]
    cmd += ["--max-autotune"] if args.max_autotune else []
    cmd += ["--sweep"] if args.sweep else []
    return cmd


def run_all(args: argparse.Namespace, names: list[str]) -> tuple[list[dict[str, Any]], float]:
    """Workers over the problems until each has a row; a crashed or hung problem gets a failure row."""
    out = Path(args.out)
    start = time.time()
    compile_deadline = start + args.budget_s * 0.7
    failures: dict[str, dict[str, Any]] = {}
    while True:
        done = read_rows(out)
        remaining = [n for n in names if n not in done and n not in failures]
        if not remaining:
            break
        if time.time() - start > args.budget_s:
            for n in remaining:
                failures[n] = {"problem": n, "correct": False, "error": f"skipped: --budget-s {args.budget_s:.0f} s spent"}
            break
        (out / "current.txt").unlink(missing_ok=True)
        proc = subprocess.Popen(worker_command(args, remaining, compile_deadline), start_new_session=True)
        reason = ""
        while proc.poll() is None:
            time.sleep(0.5)
            current = (out / "current.txt").read_text().split() if (out / "current.txt").exists() else []
            if current and time.time() - float(current[1]) > args.problem_timeout_s:
                reason = f"timeout: over --problem-timeout-s {args.problem_timeout_s:.0f} s"
            elif time.time() - start > args.budget_s + args.problem_timeout_s:
                reason = "timeout: the run's budget is spent"
            if reason:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
        done = read_rows(out)
        current = (out / "current.txt").read_text().split() if (out / "current.txt").exists() else []
        if current and current[0] not in done:
            failures[current[0]] = {"problem": current[0], "correct": False,
                                    "error": reason or f"worker exited with code {proc.returncode} during this problem"}
        elif not any(n in done for n in remaining):  # no progress at all: never loop on a broken worker
            for n in remaining:
                failures[n] = {"problem": n, "correct": False, "error": f"worker made no progress (code {proc.returncode})"}
    done = read_rows(out)
    return [done.get(n) or failures[n] for n in names], time.time() - start


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r.get("correct")]
    compiled = [r for r in ok if "compile_default_speedup" in r]
    return {
        "problems": len(rows), "correct": len(ok),
        "geomean_speedup_kskill": geomean([r["speedup"] for r in ok]),
        "geomean_speedup_compile": geomean([r["compile_default_speedup"] for r in compiled]),
        "geomean_speedup_kskill_on_compiled_set": geomean([r["speedup"] for r in compiled]),
        "wins": sum(1 for r in ok if r["techniques"] != ["reference"]),
        "returned_reference": [r["problem"] for r in ok if r["techniques"] == ["reference"]],
        "slower_than_eager": [r["problem"] for r in ok if r["speedup"] < 1.0],
        "failed": [r["problem"] for r in rows if not r.get("correct")],
    }


def write_outputs(out: Path, rows: list[dict[str, Any]], meta: dict[str, Any], summary: dict[str, Any]) -> None:
    (out / "results.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2, default=str))
    fields = ["problem", "correct", "eager_ms", "eager_p20_ms", "eager_p80_ms", "kskill_ms", "kskill_p20_ms",
              "kskill_p80_ms", "speedup", "candidate_final_speedup", "compile_default_ms", "compile_default_speedup",
              "compile_max-autotune-no-cudagraphs_speedup", "techniques", "params", "max_abs_err", "declined", "error"]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "techniques": "+".join(r.get("techniques", [])), "params": json.dumps(r.get("params", {}))})


def print_table(rows: list[dict[str, Any]], meta: dict[str, Any], summary: dict[str, Any]) -> None:
    print(f"\n{meta['gpu']}  torch {meta['torch']}  triton {meta['triton']}  ({meta['wall_s']} s)")
    print("times: median [p20-p80] ms")
    print(f"{'problem':<32}{'eager':>24}{'kskill':>24}{'speedup':>9}{'compile':>9}  techniques")
    for r in rows:
        if not r.get("correct"):
            print(f"{r['problem']:<32}  FAILED {r.get('error', '')}")
            continue
        e = f"{r['eager_ms']:.4f} [{r['eager_p20_ms']:.4f}-{r['eager_p80_ms']:.4f}]"
        k = f"{r['kskill_ms']:.4f} [{r['kskill_p20_ms']:.4f}-{r['kskill_p80_ms']:.4f}]"
        print(f"{r['problem']:<32}{e:>24}{k:>24}{r['speedup']:>8.2f}x"
              f"{r.get('compile_default_speedup', float('nan')):>8.2f}x  {'+'.join(r['techniques'])}")
    print(json.dumps(summary, indent=2))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/recipes_bench", help="folder for results.json and results.csv")
    parser.add_argument("--problems", default="", help="comma-separated name prefixes (default: all)")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    parser.add_argument("--max-autotune", action="store_true", help="also time mode=max-autotune-no-cudagraphs")
    parser.add_argument("--sweep", action="store_true", help="also try autotune_launch variants (slower)")
    parser.add_argument("--min-gain", type=float, default=0.02,
                        help="a candidate must beat eager by this fraction in the final run, else the reference is returned")
    parser.add_argument("--budget-s", type=float, default=330,
                        help="wall-clock budget: torch.compile stops after 70%% of it, no problem starts after it")
    parser.add_argument("--problem-timeout-s", type=float, default=90, help="a problem running longer is recorded as failed")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--compile-deadline", default="inf", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("recipes_bench needs a CUDA GPU (timings on the CPU interpreter mean nothing)", file=sys.stderr)
        return 2
    if args.worker:
        return run_worker(args)
    import triton
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.jsonl").unlink(missing_ok=True)
    names = [p.stem for p in sorted(PROBLEMS.glob("[0-9]*.py"))]
    if args.problems:
        prefixes = args.problems.split(",")
        names = [n for n in names if any(n.startswith(x) for x in prefixes)]
    rows, wall = run_all(args, names)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "python": sys.version.split()[0], "wall_s": round(wall, 1), "atol": ATOL, "rtol": RTOL,
            "min_gain": args.min_gain, "timing": {"select": SELECT, "final": FINAL,
                                                  "method": "agents/reviewer/timing.py time_cuda"}}
    summary = summarize_rows(rows)
    write_outputs(out, rows, meta, summary)
    print_table(rows, meta, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
