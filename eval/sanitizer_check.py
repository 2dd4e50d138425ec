"""Every template's kernels under compute-sanitizer (memcheck) on a GPU: out-of-bounds and misaligned
accesses that a correct-looking result can hide (a masked-off lane that still loads, a last tile
that reads past its row).

    python -m kskill.eval.sanitizer_check [--out DIR] [--tool memcheck] [--problems STEM ...]

The candidates are those the unit tests check in Triton's interpreter (lineage.py): for each suite
problem at its small odd sizes, the deepest lineage the recipe brain writes, in every variant of
the skill base, plus that lineage under a CUDA graph. Small odd sizes are what exercise the masks.
They are the recipe brain's own code (trusted, as in `kskill optimize` without a sandbox), so they
run in a plain child process: `compute-sanitizer --tool memcheck python -m
kskill.eval.sanitizer_check --child DIR FIRST`, which runs each candidate once, synchronises and
prints a marker, so each error the sanitizer prints falls between the markers of its candidate. An
error can leave the CUDA context unusable: the child then ends, and a new one starts after it.

Writes DIR/sanitizer.json (per candidate: problem, techniques, params, errors with the sanitizer's
own lines) and DIR/sanitizer.md, and prints the summary. Exit status 1 if any candidate had an error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BEGIN, END = "@@kskill-sanitizer begin", "@@kskill-sanitizer end"
SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
# The sanitizer's reports come from its own process: a pause before the end marker lets a report of
# the candidate's kernels reach the shared output before the marker does.
SETTLE_S = 0.3


def build(out: Path, stems: list[str] | None) -> list[dict[str, Any]]:
    """Write each candidate (and its small problem) under out/candidates; their list, in run order."""
    from kskill.agents.recipes import build_candidate
    from kskill.eval.lineage import SMALL, SUITE, lineage_candidates, shrink

    folder = out / "candidates"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    listed = []
    for stem in stems or sorted(SMALL):
        source = shrink((SUITE / f"{stem}.py").read_text(), SMALL[stem])
        problem = folder / f"{stem}.py"
        problem.write_text(source)
        lineage = lineage_candidates(source)
        for i, (techniques, params) in enumerate(lineage + [(t + ["cuda_graph"], p) for t, p in lineage[:1]]):
            path = folder / f"{stem}__{i}.py"
            path.write_text(build_candidate(source, techniques, params).source)
            listed.append({"n": len(listed), "problem": stem, "techniques": techniques, "params": params,
                           "problem_path": str(problem), "path": str(path), "errors": [], "status": "not run"})
    (out / "candidates.json").write_text(json.dumps(listed, indent=1))
    return listed


def _load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(out: Path, first: int, device: str = "cuda") -> None:
    """Run candidates from `first` on, each between two markers (inside compute-sanitizer)."""
    import torch

    listed = json.loads((out / "candidates.json").read_text())
    for entry in listed[first:]:
        print(f"{BEGIN} {entry['n']}", flush=True)
        problem = _load(entry["problem_path"], f"problem_{entry['n']}")
        torch.manual_seed(0)
        with torch.device(device):
            model = _load(entry["path"], f"candidate_{entry['n']}").ModelNew(*problem.get_init_inputs()).to(device)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        with torch.no_grad():
            for _ in range(2):  # the second call: a CUDA graph's replay, a cached kernel's steady state
                model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
            time.sleep(SETTLE_S)
        print(f"{END} {entry['n']}", flush=True)


def attribute(output: str, listed: list[dict[str, Any]]) -> int | None:
    """File the sanitizer's report lines under the candidate running when each came; the candidate that
    began and did not end (the child stopped in it), if any."""
    current: int | None = None
    for line in output.splitlines():
        if line.startswith(BEGIN):
            current = int(line.split()[-1])
            listed[current]["status"] = "ran"
        elif line.startswith(END):
            ended = listed[int(line.split()[-1])]
            ended["status"] = "errors" if ended["errors"] else "clean"
            current = None
        elif current is not None and line.startswith("=========") and not SUMMARY.search(line):
            listed[current]["errors"].append(line.strip("= ").strip())
    return current


def run(out: Path, tool: str, timeout_s: float, sanitizer: str, device: str = "cuda") -> list[dict[str, Any]]:
    """Each candidate once under `sanitizer --tool TOOL`, in as few child processes as the errors allow."""
    listed = json.loads((out / "candidates.json").read_text())
    first, log = 0, []
    while first < len(listed):
        argv = [sanitizer, "--tool", tool, "--print-limit", "20", sys.executable, "-m", "kskill.eval.sanitizer_check",
                "--child", str(out), str(first), "--device", device]
        try:
            # one stream, in the order written: the reports fall between the markers whichever they use
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
            output, returncode = done.stdout, done.returncode
        except subprocess.TimeoutExpired as exc:  # what it printed before: the candidate it was in stops it
            printed = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            output, returncode = printed + f"\ntimed out after {timeout_s:.0f} s", None
        log.append(output)
        stopped_in = attribute(output, listed)
        if stopped_in is not None:  # the child stopped inside it: its context was gone
            listed[stopped_in]["status"] = "errors" if listed[stopped_in]["errors"] else "child stopped"
            listed[stopped_in]["exit"] = returncode
            tail = [ln for ln in output.splitlines() if ln.strip()][-5:]
            listed[stopped_in]["errors"] = listed[stopped_in]["errors"] or tail
        ended = [e["n"] for e in listed if e["status"] in ("clean", "errors", "child stopped")]
        if not ended or max(ended) + 1 <= first:
            break  # the child started nothing: nothing more can be learned by starting it again
        first = max(ended) + 1
    (out / "sanitizer.log").write_text("\n".join(log))
    return listed


def report(out: Path, listed: list[dict[str, Any]], tool: str, seconds: float) -> bool:
    bad = [e for e in listed if e["status"] != "clean"]
    lines = [f"# compute-sanitizer --tool {tool} over the recipe brain's candidates", "",
             f"{len(listed)} candidates of {len({e['problem'] for e in listed})} suite problems at small sizes; "
             f"{len(listed) - len(bad)} clean, {len(bad)} not clean; {seconds:.0f} s.", "",
             "| problem | techniques | params | status | first error |", "|---|---|---|---|---|"]
    for e in listed:
        first = e["errors"][0] if e["errors"] else ""
        lines.append(f"| {e['problem']} | {'+'.join(e['techniques'])} | {json.dumps(e['params'])} | {e['status']} "
                     f"| {first[:160]} |")
    (out / "sanitizer.md").write_text("\n".join(lines) + "\n")
    (out / "sanitizer.json").write_text(json.dumps({"tool": tool, "seconds": round(seconds, 1), "candidates": listed},
                                                   indent=1))
    print("\n".join(lines[:3]))
    for e in bad:
        print(f"  {e['problem']} {'+'.join(e['techniques'])} {json.dumps(e['params'])}: {e['status']}: "
              f"{(e['errors'] or [''])[0][:200]}")
    return not bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("sanitizer-check"))
    parser.add_argument("--tool", default="memcheck", help="a compute-sanitizer tool (memcheck, racecheck, ...)")
    parser.add_argument("--problems", nargs="*", help="suite problem stems (default: all)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for each sanitizer process")
    parser.add_argument("--sanitizer", default=shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer",
                        help="the compute-sanitizer executable")
    parser.add_argument("--child", nargs=2, metavar=("DIR", "FIRST"), help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: the tests' dry run
    args = parser.parse_args(argv)
    if args.child:
        child(Path(args.child[0]), int(args.child[1]), args.device)
        return 0
    if not Path(args.sanitizer).is_file():
        parser.error(f"compute-sanitizer not found at {args.sanitizer}: give --sanitizer PATH")
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    build(args.out, args.problems)
    listed = run(args.out, args.tool, args.timeout, args.sanitizer, args.device)
    return 0 if report(args.out, listed, args.tool, time.monotonic() - started) else 1


if __name__ == "__main__":
    sys.exit(main())
