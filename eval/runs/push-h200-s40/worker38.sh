# The eval's baseline worker run by hand (no sandbox) on L2/38's kept module, twice.
R=$PWD; S=/tmp/w38; mkdir -p $S
source $R/eval/runs/setup_gpu.sh
for run in 0 1; do
python3 -P - <<PY
import json
from kskill.eval.baselines import BaselineSettings, _job
from pathlib import Path
w = Path("/tmp/w38/$run"); w.mkdir(parents=True, exist_ok=True)
job, result, nonce = _job(w, Path("$R/.kb/level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py"), Path("$R/.gpu/mn38.py"), BaselineSettings(device="cuda"), [], $run)
print(job)
PY
(cd /tmp && timeout 120 python3 -P -m kskill.eval.baseline_worker /tmp/w38/$run/job-$run.json cuda > /tmp/w38/log$run.txt 2>&1)
python3 -P .gpu/show38.py /tmp/w38/$run
done
