"""Development timings (not product figures): the rolled max pooling of level1/42 (78 % of its roofline in kb60) and
the rolled depthwise convolution of level1/85 (77 %) in forms around their defaults: rows a program, rows a step,
tile widths and warps. Run from the checkout's root on the GPU machine after eval/runs/setup_gpu.sh:
python3 -P eval/runs/push-h200-s48/pool_dev.py [1|2] (the harness: eval/runs/dev_timing.py).
Call 1 swept L1/42 and L1/85; call 2 measures what won there on the other rolled pooling and depthwise problems."""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dev_timing import time_forms  # noqa: E402

if sys.argv[1:] == ["1"]:
    POOL = [{}] + [{"ROWS": r} for r in (16, 64)] + [{"UNROLL": u} for u in (2, 8)]
    POOL += [{"num_warps": w} for w in (2, 8)] + [{"BLOCK_W": 256, "num_warps": w} for w in (1, 2)]
    POOL += [{"ROWS": 64, "UNROLL": 8}, {"ROWS": 16, "UNROLL": 2, "num_warps": 2}]
    DEPTHWISE = [{}] + [{"ROLL": r, "UNROLL": u} for r, u in ((2, 2), (4, 1), (4, 4), (8, 2))]
    DEPTHWISE += [{"BLOCK_W": 256, "num_warps": w} for w in (1, 4)] + [{"BLOCK_W": 128, "num_warps": 1}]
    time_forms({"level1/42_Max_Pooling_2D.py": POOL}, ["fused_pooling"])
    time_forms({"level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py": DEPTHWISE},
               ["depthwise_convolution"])
else:
    POOL = [{}, {"UNROLL": 8}, {"ROWS": 64, "UNROLL": 8}, {"UNROLL": 8, "num_warps": 2}, {"num_warps": 2}]
    time_forms({p: POOL for p in ("level1/42_Max_Pooling_2D.py", "level1/46_Average_Pooling_3D.py")}, ["fused_pooling"])
    DEPTHWISE = [{}, {"num_warps": 1}, {"ROLL": 8}, {"ROLL": 8, "num_warps": 1}, {"BLOCK_W": 512, "num_warps": 2}]
    time_forms({p: DEPTHWISE for p in ("level1/84_conv_depthwise_2D_asymmetric_input_square_kernel.py",
                                      "level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py",
                                      "level1/86_conv_depthwise_separable_2D.py")}, ["depthwise_convolution"])
