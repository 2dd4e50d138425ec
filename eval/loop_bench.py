"""`kskill optimize` on the bundled examples, one after another, with a summary table.

For each example of kskill/examples: run `kskill optimize EXAMPLE --json` in a subprocess
with KSKILL_EXAMPLE_SCALE set, and record the best speedup (measured by the Reviewer within
the run), the techniques behind it, the candidates reviewed, why the run stopped and its wall
time. Prints a Markdown table and writes OUT/summary.json; each run's directory (candidates,
reviews, report.md, model_new.py) stays under OUT/NAME.

`--gpu N` pins the runs to one GPU (CUDA_VISIBLE_DEVICES), so two instances can share a
two-GPU host without timing each other's kernels.

    python -m kskill.eval.loop_bench --scale 32 --time-limit 60 --out runs/loop
    python -m kskill.eval.loop_bench --scale 32 --time-limit 600 --exhaustive --out runs/loop-exhaustive
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kskill

EXAMPLES = Path(kskill.__file__).parent / "examples"


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_"))


def run_example(name: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """One `kskill optimize` run; its JSON summary plus the wall time seen from outside."""
    out_dir = args.out / name
    argv = [sys.executable, "-P", "-m", "kskill", "optimize", str(EXAMPLES / f"{name}.py"), "--json",
            "--out", str(out_dir), "--time-limit", str(args.time_limit),
            "--device", args.device, "--retrieval", args.retrieval]
    argv += ["--iterations", str(args.iterations)] if args.iterations else []
    argv += ["--exhaustive"] if args.exhaustive else []
    argv += [arg for option in ("width", "beam") if getattr(args, option) is not None
             for arg in (f"--{option}", str(getattr(args, option)))]
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall_s = time.monotonic() - started
    (args.out / f"{name}.log").write_text(proc.stderr)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        return {"example": name, "error": f"exit status {proc.returncode}: " + proc.stderr.strip()[-400:],
                "wall_s": wall_s}
    return {"example": name, "speedup": result["best_speedup"], "techniques": result["best_techniques"],
            "reviewed": result["reviewed"], "stop_reason": result["stop_reason"],
            "beats_reference": result["beats_reference"], "wall_s": wall_s,
            "trajectory": [(t["n"], t["kind"], t["technique"], t["status"], t["speedup"], t["confirmed_speedup"])
                           for t in result["trajectory"]]}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| example | best speedup | techniques | reviewed | wall s | stop |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['example']} | failed | | | {r['wall_s']:.0f} | {r['error'][:80]} |")
            continue
        lines.append(f"| {r['example']} | {r['speedup']:.2f}x | {', '.join(r['techniques']) or 'reference'} "
                     f"| {r['reviewed']} | {r['wall_s']:.0f} | {r['stop_reason']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", default=",".join(example_names()),
                        help="comma-separated example names (default: all bundled examples)")
    parser.add_argument("--scale", type=int, default=32, help="KSKILL_EXAMPLE_SCALE for every example")
    parser.add_argument("--iterations", type=int, default=0, help="candidates per run (default: optimize's)")
    parser.add_argument("--width", type=int, default=None, help="optimize --width (default: optimize's)")
    parser.add_argument("--beam", type=int, default=None, help="optimize --beam (default: optimize's)")
    parser.add_argument("--exhaustive", action="store_true", help="optimize --exhaustive: the reference search")
    parser.add_argument("--time-limit", type=float, default=300.0, help="wall-time budget per example (s)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--retrieval", default="hybrid", choices=("hybrid", "lexical", "off"))
    parser.add_argument("--gpu", help="CUDA_VISIBLE_DEVICES for the runs")
    parser.add_argument("--out", type=Path, default=Path("runs/loop_bench"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.examples.split(",")) - set(example_names()))
    if unknown:
        parser.error(f"unknown example(s) {', '.join(unknown)}; bundled: {', '.join(example_names())}")
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KSKILL_EXAMPLE_SCALE": str(args.scale)}
    if args.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = args.gpu
    rows = []
    for name in args.examples.split(","):
        rows.append(run_example(name, args, env))
        print(json.dumps(rows[-1]), flush=True)
    (args.out / "summary.json").write_text(json.dumps({"scale": args.scale, "runs": rows}, indent=2))
    print(table(rows))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
