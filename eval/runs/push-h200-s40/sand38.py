"""L2/38's kept module timed by the eval's baseline worker inside its sandbox (run_baselines), twice."""
import sys
from pathlib import Path
from kskill.eval.baselines import BaselineSettings, run_baselines
R = Path(sys.argv[1])
for run in range(2):
    d = run_baselines(R / ".kb/level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py", R / ".gpu/mn38.py",
                      BaselineSettings(device="cuda"), Path(f"/tmp/s38/{run}"))
    print(d.get("error", ""), {k: round(v["median_ms"], 3) for k, v in d.get("timing", {}).get("stats", {}).items()}, flush=True)
