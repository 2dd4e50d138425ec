"""compute-sanitizer memcheck over the depthwise convolution's rolled form (ragged strips, steps and column tiles,
padding, dilation along W, grouped and depthwise, the vector form and the column form) on the GPU: run from the
checkout's root as `compute-sanitizer --tool memcheck python3 -P eval/runs/push-h200-s46/sani46.py`."""
import sys
import torch
sys.path.insert(0, "tests/unit")
from test_depthwise_convolution import _conv_problem  # noqa: E402
from recipe_support import load  # noqa: E402
from kskill.agents.recipes.builder import build_candidate  # noqa: E402

CASES = [((3, 3, 3, (3, 7), 1, 0, 1), (2, None, 37, 300)), ((4, 8, 4, (2, 3), 1, (1, 2), (1, 2)), (2, None, 21, 150)),
         ((8, 4, 2, 3, 1, 1, 1), (1, None, 19, 140)), ((6, 6, 6, 5, 1, 2, 1), (2, None, 40, 260))]
for (conv, shape) in CASES:
    for params in ({}, {"ROLL": 5, "UNROLL": 3}, {"ROLL": 4, "UNROLL": 2, "vector": False}):
        src = _conv_problem(*conv, shape=shape)
        cand = build_candidate(src, ["depthwise_convolution"], params)
        ref_ns, new_ns = load(src), load(cand.source)
        torch.manual_seed(0)
        ref = ref_ns["Model"]().cuda()
        torch.manual_seed(0)
        new = new_ns["ModelNew"]().cuda()
        x = [t.cuda() for t in ref_ns["get_inputs"]()]
        with torch.no_grad():
            err = (new(*x) - ref(*x)).abs().max().item()
        print(conv, shape, cand.params["_depthwise_conv_0"], f"err={err:.1e}", flush=True)
