"""Development timings (not product figures): the depthwise convolution's rolled form (a program walks a strip of
ROLL output rows, each input row loaded once and added into the KH output rows it belongs to) against the direct
form (the default: tiles of 2 x 256 in the vector form). Run from the checkout's root on the GPU machine after
eval/runs/setup_gpu.sh: python3 -P eval/runs/push-h200-s46/dw_dev.py [roll|unroll] (the harness: eval/runs/dev_timing.py;
calls 1 and 2 ran the same loop written out in this file)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dev_timing import time_forms  # noqa: E402

WHICH = sys.argv[1] if len(sys.argv) > 1 else "roll"
if WHICH == "roll":  # call 1: strips, tile widths, warps, the vector form or not
    ROLLED = [{"ROLL": r, "BLOCK_W": w, "num_warps": nw, "vector": v}
              for r in (8, 32) for w, nw in ((128, 1), (256, 2), (256, 4), (512, 4)) for v in (True, False)]
    ROLLED += [{"ROLL": r, "BLOCK_W": 256, "num_warps": 2} for r in (4, 16, 64, 128)]
    FORMS = {p: [{}] + ROLLED for p in ("level1/84_conv_depthwise_2D_asymmetric_input_square_kernel.py",
                                         "level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py")}
    FORMS.update({p: [{}, {"ROLL": 8}, {"ROLL": 32}, {"ROLL": 32, "BLOCK_W": 256, "num_warps": 2},
                      {"ROLL": 16, "vector": False}]
                  for p in ("level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py",
                            "level1/86_conv_depthwise_separable_2D.py")})
else:  # call 2 ("unroll"): input rows a step, over strips, 256 columns over 2 warps; the direct form beside
    FORMS = {p: [{}, {"BLOCK_H": 2}] + [{"ROLL": r, "UNROLL": u} for r in (4, 8, 16, 32) for u in (1, 2, 4)]
             + [{"ROLL": 16, "UNROLL": 2, "BLOCK_W": 128, "num_warps": 1}]
             for p in ("level1/84_conv_depthwise_2D_asymmetric_input_square_kernel.py",
                       "level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py",
                       "level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py",
                       "level1/86_conv_depthwise_separable_2D.py")}


time_forms(FORMS, ["depthwise_convolution"])
