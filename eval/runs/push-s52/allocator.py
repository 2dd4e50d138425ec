"""#15, session 52, call 5: the eval's worker (eval/baselines.run_baselines, as `kskill eval` runs it) on L3/26
ShuffleNet with the kernel-fusion candidate call 1 kept, twice: each contender's timing and the caching allocator's
counts over the timing (d83210e). Run from the checkout's root on the GPU machine (push_run.sh's DEV)."""

import json
import tempfile
from pathlib import Path

from kskill.eval.baselines import BaselineSettings, run_baselines

HERE = Path(__file__).parent
for attempt in range(2):
    result = run_baselines(Path(".kb/level3/26_ShuffleNet.py"), HERE / "shufflenet_kernel_fusion.py",
                           BaselineSettings(device="cuda", compile_modes=("default",)), Path(tempfile.mkdtemp()))
    timing = result.get("timing") or {}
    for name, s in (timing.get("stats") or {}).items():
        print(f"{name:16s} median {s['median_ms']:.3f} min {s['min_ms']:.3f} p20 {s['p20_ms']:.3f} "
              f"p80 {s['p80_ms']:.3f} max {s['max_ms']:.3f} (n={s['n']})", flush=True)
    print("allocator over the timing:", json.dumps(timing.get("allocator")), "| error:", result.get("error", ""), flush=True)
