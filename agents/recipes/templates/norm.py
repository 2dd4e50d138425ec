"""Template: layer, group and instance norm over rows of a (P, R) view.

y = (x - mean) / sqrt(var + eps) * w[c] + b[c], biased variance as PyTorch computes it. A row
that fits in registers is read once (mean, then the centred variance, exactly two-pass in
registers); a longer row merges per-tile statistics with Chan's formula in one read, then
normalises in a second read. The affine channel of an element depends on the norm: the
column (layer norm), the group's channel (group norm) or the row's channel (instance norm).
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit

MAX_PERSISTENT = 8192


def default_params(r: int) -> dict[str, Any]:
    block = min(next_pow2(r), MAX_PERSISTENT)
    return {"BLOCK_R": block, "num_warps": 4 if block <= 1024 else (8 if block <= 4096 else 16)}


def channel_expr(affine_index: str) -> str:
    """Index into weight/bias for element `cols` of row `row`."""
    if affine_index == "r":
        return "cols"
    kind, *rest = affine_index.split(":")
    if kind == "channel":
        per_group, inner, groups = (int(v) for v in rest)
        return f"(row % {groups}) * {per_group} + cols // {inner}"
    return f"(row % {int(rest[0])}) + cols * 0"


def _affine(io: FusedIO, region: Region, y: str) -> list[str]:
    lines = []
    ch = channel_expr(region.extra["affine_index"])
    for key, op in (("weight", "*"), ("bias", "+")):
        operand = region.extra.get(key)
        if operand is not None:
            ptr = io.add(operand)
            lines.append(f"{y} = {y} {op} tl.load({ptr} + {ch}, mask=mask, other=0.0).to(tl.float32)")
    return lines


def norm_unit(name: str, region: Region, graph: Graph, params: dict[str, Any], autotune: bool = False) -> KernelUnit:
    p_, r_, _ = region.extra["view"]
    eps = region.extra["eps"]
    p = {**default_params(r_), **{k: v for k, v in params.items() if k in ("BLOCK_R", "num_warps")}}
    io = FusedIO(region, graph)
    for key in ("weight", "bias"):
        if region.extra.get(key) is not None:
            io.add(region.extra[key])
    pid = program_id(0, io.wide)
    if r_ <= p["BLOCK_R"]:
        load, x = io.load_input("offs", "mask")
        body = [f"row = {pid}", "cols = tl.arange(0, BLOCK_R)", "offs = row * R + cols", "mask = cols < R"] + load + [
            f"x = tl.where(mask, {x}, 0.0)", "mean = tl.sum(x, axis=0) / R",
            "xc = tl.where(mask, x - mean, 0.0)", "var = tl.sum(xc * xc, axis=0) / R",
            f"y = xc * tl.math.rsqrt(var + {eps!r})"] + _affine(io, region, "y")
        body += io.store_result("y", "offs", "mask")
        doc = "row in registers: the mean, then the centred variance, from one read; one write"
    else:
        load1, x1 = io.load_input("offs", "mask")
        load2, x2 = io.load_input("offs", "mask")
        body = [f"row = {pid}", "count = 0.0", "mean = 0.0", "m2 = 0.0",
                "for start in range(0, R, BLOCK_R):",
                "    cols = start + tl.arange(0, BLOCK_R)", "    offs = row * R + cols", "    mask = cols < R"]
        body += ["    " + ln for ln in load1] + [
            f"    x = tl.where(mask, {x1}, 0.0)",
            "    n_t = tl.sum(mask.to(tl.float32), axis=0)",
            "    mean_t = tl.sum(x, axis=0) / n_t",
            "    m2_t = tl.sum(tl.where(mask, (x - mean_t) * (x - mean_t), 0.0), axis=0)",
            "    total = count + n_t", "    delta = mean_t - mean",
            "    mean = mean + delta * (n_t / total)",
            "    m2 = m2 + m2_t + delta * delta * (count * n_t / total)", "    count = total",
            f"rstd = tl.math.rsqrt(m2 / R + {eps!r})",
            "for start in range(0, R, BLOCK_R):",
            "    cols = start + tl.arange(0, BLOCK_R)", "    offs = row * R + cols", "    mask = cols < R"]
        body += ["    " + ln for ln in load2] + [f"    y = ({x2} - mean) * rstd"]
        body += ["    " + ln for ln in _affine(io, region, "y")]
        body += ["    " + ln for ln in io.store_result("y", "offs", "mask")]
        doc = "long rows: Chan-merged tile statistics in one read, then a normalising read"
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, R: tl.constexpr, BLOCK_R: tl.constexpr):\n"
              f'    """{region.anchor.op}: {doc}."""\n{indent(body, 4)}\n')
    launcher = io.launcher(name, f"({p_},)", f"R={r_}", launch_opts=f"BLOCK_R={p['BLOCK_R']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {"BLOCK_R": p["BLOCK_R"], "num_warps": p["num_warps"]})
