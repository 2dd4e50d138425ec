"""Why L2/38's kept module (pipelined softmax, `sand41_module.py`) ran 10 % slower in `kskill eval` (session 40):
the eval's baseline worker on the same job (a) by hand with the full environment, (b) by hand with exactly the
environment its sandbox gives it (the allow-list plus fresh per-workdir HOME, temp and cache folders), twice in
one workdir (cold caches, then warm), (c) through run_baselines, in its sandbox. Development timings.
Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh: python3 -P .../sand41.py"""
import json, os, subprocess, sys
from pathlib import Path
from kskill.agents.reviewer.sandbox_layout import allowed_environment, workspace_environment
from kskill.eval.baselines import BaselineSettings, _environment, _job, run_baselines

R = Path.cwd()
PROBLEM = R / ".kb/level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py"
MODULE = R / "eval/runs/push-h200-s41/sand41_module.py"
SETTINGS = BaselineSettings(device="cuda")


def medians(data):
    return data.get("error", "")[:200], {k: round(v["median_ms"], 3) for k, v in
                                         data.get("timing", {}).get("stats", {}).items()}


def by_hand(work: Path, run: int, env: dict) -> None:
    job, result, _ = _job(work, PROBLEM, MODULE, SETTINGS, [], run)
    subprocess.run([sys.executable, "-P", "-m", "kskill.eval.baseline_worker", str(job), "cuda"], cwd=work, env=env,
                   stdout=open(work / f"log{run}.txt", "w"), stderr=subprocess.STDOUT, timeout=150)
    print(f"  run {run}:", *medians(json.load(open(result))), flush=True)


full = Path("/tmp/s41/full"); full.mkdir(parents=True, exist_ok=True)
print("(a) by hand, full environment", flush=True)
by_hand(full, 0, dict(os.environ))
sand = Path("/tmp/s41/sandenv"); sand.mkdir(parents=True, exist_ok=True)
env, passed, dropped = allowed_environment(os.environ, {**workspace_environment(sand), **_environment(SETTINGS, None)})
print("(b) by hand, the sandbox's environment; dropped:", dropped, flush=True)
by_hand(sand, 0, env)
by_hand(sand, 1, env)
print("(c) run_baselines (sandboxed)", flush=True)
print("  ", *medians(run_baselines(PROBLEM, MODULE, SETTINGS, Path("/tmp/s41/sandboxed"))), flush=True)
