"""The roofline's lower bound on a problem's forward time: `python -m kskill.eval.roofline PROBLEM GPU`.

FLOPs and bytes come from the reference's static features (agents/features.py: the model built on
the meta device and captured with torch.fx), the peaks from the GPU table (agents/gpus.py), the
derivation from Observations (max(flops / peak, bytes / bandwidth)), so the figure is the one the
Planner's roofline_fraction uses. Run in a subprocess of its own: capturing the reference runs the
problem's code, and a problem that crashes must not take the evaluation with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kskill.eval.processes import CHILDREN

TIMEOUT_S = 300
LAUNCH_FACTS = ("est_kernel_launches", "est_launch_work_us")


def roofline(problem_path: Path, device_name: str) -> dict[str, Any]:
    """{"roofline_ms", "flops", "bytes_moved", "dtype", "roofline_note"} for this problem on this GPU, with the
    static launch estimate ("est_kernel_launches", "est_launch_work_us") that tells a launch-bound forward."""
    from kskill.agents.features import reference_features
    from kskill.agents.gpus import lookup
    from kskill.agents.observations import Observations, roofline_seconds

    spec = lookup(device_name)
    features = reference_features(problem_path.read_text(encoding="utf-8"))
    obs = Observations.merge(features=features, profile={}, gpu=spec)
    roof_s = roofline_seconds(obs, spec) if spec is not None else None
    facts = {"flops": obs.get("flops"), "bytes_moved": obs.get("bytes_moved"), "dtype": obs.get("dtype"),
             "roofline_ms": roof_s * 1e3 if roof_s is not None else None, "roofline_note": "",
             **{k: obs.get(k) for k in LAUNCH_FACTS}}
    if spec is None:
        facts["roofline_note"] = f"{device_name!r} is not in the GPU peak table (agents/gpus.py)"
    elif roof_s is None:
        facts["roofline_note"] = "needs flops, bytes_moved and a peak for this dtype"
    return facts


def roofline_in_subprocess(problem_path: Path, device_name: str) -> tuple[float | None, dict[str, Any]]:
    """(the roofline time in ms or None, the facts behind it); a failure is a note, never an exception."""
    argv = [sys.executable, "-P", "-m", "kskill.eval.roofline", str(problem_path), device_name]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                text=True, start_new_session=True)
    except OSError:
        return None, {"roofline_note": "the feature pass could not start"}
    CHILDREN.add(proc)  # an interrupted evaluation stops it too
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
        facts = json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        proc.kill()
        proc.wait()
        return None, {"roofline_note": "the feature pass did not finish (the reference crashed or ran too long)"}
    finally:
        CHILDREN.discard(proc)
    return facts.get("roofline_ms"), facts


if __name__ == "__main__":
    print(json.dumps(roofline(Path(sys.argv[1]), sys.argv[2])))
