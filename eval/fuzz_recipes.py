"""Random small models through the recipe brain, each candidate checked against its reference on the CPU (Triton's
interpreter): a search for combinations of producer, prologue, row operator, epilogue and techniques that the
templates get wrong or fail to build. Development tool, not a benchmark.

    TRITON_INTERPRET=1 python -m kskill.eval.fuzz_recipes [--cases 200] [--seed 0] [--out failures.txt]

Each model: an input, optionally a convolution or linear layer, a chain of pointwise ops (some reading a
parameter, a second input or the same operand as the chain after), a row operator (softmax, a norm, a pooling,
a reduction), then another pointwise chain; the techniques a random subset around the row operator's. A case
fails when building raises anything but "nothing to do" or the candidate's values differ at atol = rtol = 1e-4.
"""

from __future__ import annotations

import argparse
import os
import random
import traceback
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from kskill.agents.recipes import build_candidate  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
POINTWISE = ["torch.relu({v})", "torch.tanh({v})", "torch.sigmoid({v})", "F.gelu({v})", "{v} * 0.5", "{v} - 0.25",
             "{v} * self.scale", "{v} + self.bias", "{v} + z", "{v} * z", "torch.clamp({v}, -1.0, 1.0)",
             "F.hardswish({v})", "{v} * 1.0", "{v} / 4.0"]
# row operators: (text, technique, the input it takes: "spatial", "rows" or "any")
ROW = [("torch.softmax({v}, dim=1)", "online_softmax", "any"),
       ("torch.log_softmax({v}, dim=-1)", "online_softmax", "any"),
       ("self.gn({v})", "fused_normalization", "spatial"), ("self.inorm({v})", "fused_normalization", "spatial"),
       ("self.ln({v})", "fused_normalization", "spatial"), ("self.bn({v})", "fused_normalization", "spatial"),
       ("F.max_pool{d}d({v}, 2)", "fused_pooling", "spatial"),
       ("F.avg_pool{d}d({v}, 3, 2, 1)", "fused_pooling", "spatial"),
       ("torch.mean({v}, dim={spatial_dims}, keepdim=True)", "triton_reduction", "spatial"),
       ("torch.amax({v}, dim=1, keepdim=True)", "triton_reduction", "any"),
       ("torch.logsumexp({v}, dim=1, keepdim=True)", "triton_reduction", "any"),
       ("torch.sum({v}, dim=-1, keepdim=True)", "triton_reduction", "any"),
       ("torch.mean({v}, dim=-1)", "triton_reduction", "any"),
       ("torch.cumsum({v}, dim=-1)", "fused_scan", "any"),
       ("(lambda c: self.gn(c) + c)({v})", "fused_normalization", "spatial"),   # the product read again after the norm
       ("(lambda c: torch.softmax(c, dim=1) * c)({v})", "online_softmax", "spatial"),
       ("F.mse_loss({v}, z)", "fused_loss", "any"), ("F.smooth_l1_loss({v}, z)", "fused_loss", "any"),
       ("F.kl_div(F.log_softmax({v}, dim=1), F.softmax(z, dim=1), reduction='batchmean')", "fused_loss", "any"),
       ("torch.mean(1 - F.cosine_similarity({v}, z, dim=1))", "fused_loss", "any"),
       ("F.huber_loss({v}, z, delta=0.5)", "fused_loss", "any"), ("F.l1_loss({v}, z)", "fused_loss", "any"),
       ("F.hinge_embedding_loss({v}, torch.sign(z))", "fused_loss", "any"),
       ("F.cross_entropy({v}, torch.argmax(z, dim=1))", "fused_loss", "rows"),
       ("F.triplet_margin_loss({v}, z, z * 0.5)", "fused_loss", "rows"),
       ("torch.cumprod({v}, dim=-1)", "fused_scan", "any"),
       ("torch.flip(torch.cumsum(torch.flip({v}, [-1]), dim=-1), [-1])", "fused_scan", "any"),  # reverse
       ("torch.cumsum({v} * (z > 0), dim=-1)", "fused_scan", "any"),  # masked
       ("torch.amin({v}, dim=-1)", "triton_reduction", "any"),
       ("torch.max({v}, dim=1)[0]", "triton_reduction", "any")]


def model_source(rng: random.Random) -> tuple[str, str, dict]:
    """A random model's source, the techniques to build it with and the build's params (a row form asked for)."""
    c = rng.choice([4, 6, 8, 12])
    spatial = rng.random() < 0.8
    producer = rng.choice(["conv", "convt", "convt2", "dw", "none"] if spatial else ["linear", "none"])
    cin = 3
    d = 3 if spatial and rng.random() < 0.25 else 2  # 3-d: Conv3d and the NDHWC forms
    if spatial:
        big = d == 2 and rng.random() < 0.25  # rows past one program's registers: the exchange and two-read forms
        sizes = [rng.randint(40, 56) if big else rng.randint(5, 11) for _ in range(d)]
        x_shape = (2, cin if producer not in ("none", "dw") else c, *sizes)
        grow = {"conv": lambda n: n - 2, "convt": lambda n: n + 2, "convt2": lambda n: 2 * n + 1, "dw": lambda n: n,
                "none": lambda n: n}
        out_shape = (2, c, *(grow[producer](n) for n in sizes))
        param = f"{c}" + ", 1" * d
    else:
        x_shape = (5, 9 if producer == "linear" else c)
        out_shape = (5, c)
        param = f"{c}"
    init = [f"self.scale = nn.Parameter(torch.randn({param}))", f"self.bias = nn.Parameter(torch.randn({param}))",
            f"self.gn = nn.GroupNorm({rng.choice([g for g in (1, 2, c // 2, c) if c % g == 0])}, {c})",
            f"self.inorm = nn.InstanceNorm{d}d({c}, affine={rng.random() < 0.5})",
            f"self.ln = nn.LayerNorm({list(out_shape[1:]) if rng.random() < 0.5 else [out_shape[-1]]})",
            f"self.bn = nn.BatchNorm{d}d({c})",
            f"self.conv = nn.Conv{d}d(3, {c}, 3)",
            f"self.convt = nn.ConvTranspose{d}d(3, {c}, 3)",
            f"self.convt2 = nn.ConvTranspose{d}d(3, {c}, 3, stride=2)",
            f"self.dw = nn.Conv{d}d({c}, {c}, 3, padding=1, groups={c})",  # depthwise
            f"self.linear = nn.Linear(9, {c})"]
    v = {"conv": "self.conv(x)", "convt": "self.convt(x)", "convt2": "self.convt2(x)", "dw": "self.dw(x)",
         "linear": "self.linear(x)", "none": "x"}[producer]
    used = [rng.choice(POINTWISE) for _ in range(rng.randint(0, 3))]
    for op in used:
        v = op.format(v=v)
    rows = [r for r in ROW if r[2] in ("any", "spatial" if spatial else "rows")]
    row, technique, _ = rng.choice(rows)
    v = row.format(v=v, d=d, spatial_dims=tuple(range(2, 2 + d)))
    shape_kept = technique in ("online_softmax", "fused_normalization", "fused_scan")
    for _ in range(rng.randint(0, 2)):
        op = rng.choice(used) if used and rng.random() < 0.5 else rng.choice(POINTWISE)  # an operand read twice
        if not shape_kept and ("z" in op or "self." in op):
            op = "{v} * 2.0"
        v = op.format(v=v)
    body = "\n        ".join(init)
    source = (HEADER + f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        {body}\n\n"
              f"    def forward(self, x, z):\n        return {v}\n\n\n"
              f"def get_inputs():\n    return [torch.randn{x_shape}, torch.randn{out_shape}]\n\n\n"
              "def get_init_inputs():\n    return []\n")
    extra = rng.sample(["channels_last", "gemm_epilogue_fusion", "vectorized_access", "algebraic_simplification",
                        "depthwise_convolution"], rng.randint(0, 2))
    extra += ["kernel_fusion"] if rng.random() < 0.7 else []  # prologues and epilogues need it
    params = rng.choice([{}, {}, {}, {"group": 2}, {"pipeline": True, "pipe_chunk": 1024}, {"row_exchange": False},
                         {"gemm_backend": "triton", "dot_precision": "tf32x3"}])
    return source, "+".join([technique] + extra), params


def check(source: str, techniques: str, params: dict) -> tuple[str | None, str]:
    """(None when the candidate matches its reference on two input sets, else what went wrong; what it applied)."""
    namespace: dict = {}
    exec(compile(source, "<model>", "exec"), namespace)
    cand = build_candidate(source, techniques.split("+"), params)
    new_ns: dict = {}
    exec(compile(cand.source, "<candidate>", "exec"), new_ns)
    torch.manual_seed(0)
    ref = namespace["Model"]()
    torch.manual_seed(0)
    new = new_ns["ModelNew"]()
    for trial in range(2):
        torch.manual_seed(10 + trial)
        inputs = namespace["get_inputs"]()
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        if got.shape != want.shape or not torch.allclose(got, want, atol=1e-4, rtol=1e-4, equal_nan=True):
            diff = (got - want).abs().max().item() if got.shape == want.shape else f"shape {tuple(got.shape)}"
            return f"WRONG (max |diff| {diff})", "+".join(cand.applied)
    return None, "+".join(cand.applied)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("fuzz_failures.txt"))
    args = parser.parse_args()
    failures = 0
    with args.out.open("w") as out:
        for case in range(args.cases):
            rng = random.Random(args.seed * 100003 + case)
            source, techniques, params = model_source(rng)
            applied = "?"
            try:
                problem, applied = check(source, techniques, params)
            except Exception as exc:  # a build or run error is a finding too
                problem = f"{type(exc).__name__}: {str(exc)[:300]}\n{traceback.format_exc()[-1500:]}"
            print(f"case {case}: {techniques} {params} (applied {applied or 'nothing'}): {problem or 'ok'}", flush=True)
            if problem:
                failures += 1
                out.write(f"## case {case} (seed {args.seed}): {techniques} {params}\n{problem}\n\n{source}\n\n")
                out.flush()
    print(f"{failures} of {args.cases} failed; details in {args.out}")


if __name__ == "__main__":
    main()
