"""fused_scan: cumsum / cumprod along one dim as a blocked associative scan with a running carry.

Each program owns one row (Q == 1) or a block of columns (Q > 1, scanned along axis 0 of a
(BLOCK_R, BLOCK_Q) tile); tiles are scanned with `tl.cumsum` / `tl.associative_scan` and the
carry of all earlier tiles is combined in, so long rows need no second pass. A reverse scan
walks the tiles from the end, each read back to front; an exclusive scan reads every element
one step back along the scan (the identity where there is none). Both forms come from
scan_folding, which the recipe's rewrite runs.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Graph, Node
from kskill.agents.recipes.matching import first_operand, prq
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.scan_folding import fold_scans, scan_dim
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit


def scan_region(node: Node, graph: Graph) -> Region | None:
    dim = scan_dim(node)
    if dim is None:
        return None
    view = prq(node.shape, (dim,))
    return Region("scan", "fused_scan", node, extra={"view": view, "prologue_operand": first_operand(node)})


MULTIPLY_HELPER = '''
@triton.jit
def _scan_multiply(a, b):
    return a * b
'''


def default_params(view: tuple[int, int, int]) -> dict[str, Any]:
    _, r, q = view
    if q == 1:
        return {"BLOCK_R": min(next_pow2(r), 1024), "BLOCK_Q": 1, "num_warps": 4}
    block_q = min(next_pow2(q), 32)
    return {"BLOCK_R": max(1, min(next_pow2(r), 1024 // block_q)), "BLOCK_Q": block_q, "num_warps": 4}


def scan_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    p_, r_, q_ = region.extra["view"]
    prod = region.anchor.op == "cumprod"
    p = {**default_params(region.extra["view"]), **{k: v for k, v in params.items() if k in ("BLOCK_R", "BLOCK_Q", "num_warps")}}
    io = FusedIO(region, graph)
    ident = "1.0" if prod else "0.0"
    reverse, exclusive = (bool(region.anchor.attrs.get(k)) for k in ("reverse", "exclusive"))
    read_offs, read_mask = ("src_offs", "src_mask") if exclusive else ("offs", "mask")
    load, x = io.load_input(read_offs, read_mask, ident)
    rows = q_ == 1
    op = "*" if prod else "+"
    if rows:  # the carry is a 1-element vector: fold it to a scalar before combining
        carry_term = "tl.reduce(carry, 0, _scan_multiply)" if prod else "tl.sum(carry, 0)"
    else:
        carry_term = "carry[None, :]"
    scan = (f"tl.associative_scan(x, 0, _scan_multiply)" if prod else "tl.cumsum(x, 0)")
    last = "tl.reduce(x, 0, _scan_multiply)" if prod else "tl.sum(x, 0)"
    # a reverse scan loads each tile back to front (rows, ...) and scans it forward
    first_row, in_range = ("R - 1 - start - ", "rs >= 0") if reverse else ("start + ", "rs < R")
    body = [f"pid_p = {program_id(0, io.wide)}", f"pid_q = {program_id(1, io.wide)}",
            ("qs = tl.arange(0, 1)" if rows else "qs = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)[None, :]"),
            f"carry = tl.full([{'1' if rows else 'BLOCK_Q'}], {ident}, tl.float32)",
            "for start in range(0, R, BLOCK_R):",
            f"    rs = {first_row}tl.arange(0, BLOCK_R)" + ("" if rows else "[:, None]"),
            "    offs = pid_p * R * Q + rs * Q + qs" if not rows else "    offs = pid_p * R + rs",
            f"    mask = ({in_range})" + ("" if rows else " & (qs < Q)")]
    if exclusive:  # the element one step back along the scan, the identity at the scan's start
        body += [f"    src_offs = offs {'+' if reverse else '-'} Q",
                 f"    src_mask = mask & ({'rs < R - 1' if reverse else 'rs > 0'})"]
    body += ["    " + ln for ln in load] + [
        f"    x = tl.where({read_mask}, {x}, {ident})",
        f"    y = {scan} {op} {carry_term}",
        f"    carry = carry {op} {last}"]
    body += ["    " + ln for ln in io.store_result("y", "offs", "mask")]
    form = ("reverse " if reverse else "") + ("exclusive " if exclusive else "") + region.anchor.op
    order = "from the end" if reverse else "in order"
    kernel = ((MULTIPLY_HELPER + "\n" if prod else "") +
              f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, R: tl.constexpr, Q: tl.constexpr, "
              "BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):\n"
              f'    """{form}: tiles scanned {order}, each offset by the carry of the ones before."""\n'
              f"{indent(body, 4)}\n")
    grid = f"({p_}, {-(-q_ // p['BLOCK_Q'])})"
    launcher = io.launcher(name, grid, f"R={r_}, Q={q_}",
                           launch_opts=f"BLOCK_R={p['BLOCK_R']}, BLOCK_Q={p['BLOCK_Q']}, num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {k: p[k] for k in ("BLOCK_R", "BLOCK_Q", "num_warps")})


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return scan_unit(name, region, how.graph, how.params)


class FusedScan(AnchorRecipe):
    id = "fused_scan"
    summary = "cumsum / cumprod as a blocked associative scan with a running carry"
    templates = {"scan": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return scan_region(node, graph)

    def rewrite(self, ctx: Any) -> None:
        ctx.notes.extend(f"folded: {d}" for d in fold_scans(ctx.graph))

    def absent_reason(self) -> str:
        return "no cumsum / cumprod"


RECIPE = FusedScan()
