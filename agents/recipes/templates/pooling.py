"""Template: 2-d max / average pooling (and global average pooling) with fused prologue/epilogue.

One program computes BLOCK outputs; the KH x KW window is unrolled at compile time, padding
is handled by masks (-inf for max, zero for average, divisor KH*KW as PyTorch's default
count_include_pad does). A pointwise producer of the input (e.g. the activation after a conv)
is recomputed on the loads, so its output never goes through device memory.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import indent
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit


def pool_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    n, c, oh, ow = region.anchor.shape
    _, _, h, w = graph.shape_of(region.extra["prologue_operand"])
    (kh, kw), (sh, sw), (ph, pw) = region.extra["kernel"], region.extra["stride"], region.extra["pad"]
    is_max = region.extra["mode"] == "max"
    block = params.get("BLOCK", 256)
    warps = params.get("num_warps", 4)
    io = FusedIO(region, graph)
    fill = "float('-inf')" if is_max else "0.0"
    load, x = io.load_input("offs", "valid", fill)
    total = n * c * oh * ow
    body = ["o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "omask = o < NUMEL",
            "ow = o % OW", "oh = (o // OW) % OH", "plane = o // (OW * OH)",
            f"acc = tl.full([BLOCK], {fill}, tl.float32)",
            "for kh in tl.static_range(KH):", "    for kw in tl.static_range(KW):",
            "        ih = oh * SH - PH + kh", "        iw = ow * SW - PW + kw",
            "        valid = omask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)",
            "        offs = plane * (H * W) + ih * W + iw"]
    body += ["        " + ln for ln in load]
    if is_max:
        body.append(f"        acc = tl.maximum(acc, tl.where(valid, {x}, float('-inf')))")
    else:
        body.append(f"        acc = acc + tl.where(valid, {x}, 0.0)")
    if not is_max:
        body.append(f"acc = acc * {1.0 / (kh * kw)!r}")
    body += io.store_result("acc", "o", "omask")
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, H: tl.constexpr, W: tl.constexpr, "
              "OH: tl.constexpr, OW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, "
              "SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, NUMEL: tl.constexpr, BLOCK: tl.constexpr):\n"
              f'    """{region.extra["mode"]} pooling, window unrolled, padding by masks."""\n{indent(body, 4)}\n')
    sizes = f"H={h}, W={w}, OH={oh}, OW={ow}, KH={kh}, KW={kw}, SH={sh}, SW={sw}, PH={ph}, PW={pw}, NUMEL={total}"
    launcher = io.launcher(name, f"(triton.cdiv({total}, {block}),)", sizes,
                           launch_opts=f"BLOCK={block}, num_warps={warps}")
    return io.unit(name, kernel, launcher, {"BLOCK": block, "num_warps": warps})


__all__ = ["pool_unit"]
