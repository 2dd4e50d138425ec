"""L2/38's kept module timed by the eval's baseline worker inside its sandbox (run_baselines), twice."""
import sys
from pathlib import Path
from kskill.eval.baselines import BaselineSettings, run_baselines
R = Path(sys.argv[1])
for run in range(1):
    d = run_baselines(R / ".kb/level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py", R / ".gpu/mn38d.py",
                      BaselineSettings(device="cuda"), Path(f"/tmp/s38/{run}"))
    print(d.get("error", ""), {k: round(v["median_ms"], 3) for k, v in d.get("timing", {}).get("stats", {}).items()}, flush=True)
import glob
log = open(glob.glob("/tmp/s38/0/**/worker*.log", recursive=True)[0]).read().splitlines()
print("\n".join([l for l in log if "RECKON" in l][:2]))
calls = [l for l in log if l.startswith("CALL")]
from collections import Counter
print(len(calls), Counter(calls).most_common(6))
