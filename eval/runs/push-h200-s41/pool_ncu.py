"""For the next GPU session: where max pooling 4 x 4 / stride 1 over 32 x 64 x 512 x 512 spends its time (64 % of
the roofline). Builds the product's candidate and calls it three times; run under Nsight Compute from the
checkout's root after eval/runs/setup_gpu.sh:
  ncu --kernel-name regex:_pool --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
      python3 -P eval/runs/push-h200-s40/pool_ncu.py"""
import importlib.util, tempfile
import torch
from kskill.agents.recipes.builder import build_candidate

src = open(".kb/level1/42_Max_Pooling_2D.py").read()
cand = build_candidate(src, ["fused_pooling"], {})
f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False); f.write(cand.source); f.close()
spec = importlib.util.spec_from_file_location("c", f.name); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
ns = {}; exec(compile(src, "problem", "exec"), ns)
model = m.ModelNew(*ns["get_init_inputs"]()).cuda()
x = [t.cuda() for t in ns["get_inputs"]()]
print(cand.params)
with torch.no_grad():
    for _ in range(3):
        model(*x)
torch.cuda.synchronize()
