"""Pieces every Triton template shares: fused pointwise bodies, broadcast indexing, kernel text.

A `Body` is a chain (a DAG) of pointwise nodes evaluated over one iteration domain. Templates
place it as a whole kernel (kernel_fusion), as the prologue that computes a reduction's input,
or as the epilogue applied to a GEMM, convolution, normalisation or reduction result, so the
intermediates never go through device memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.pointwise_ops import data_operands, lit, triton_expr

CHANNELS_LAST = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}  # NCHW -> NHWC and NCDHW -> NDHWC memory order
MEMORY_FORMATS = {4: "torch.channels_last", 5: "torch.channels_last_3d"}


def channels_last_order(rank: int, nhwc: bool = True) -> tuple[int, ...] | None:
    """The memory order of a channels-last tensor of this rank, or None (no such format, or nhwc off)."""
    return CHANNELS_LAST.get(rank) if nhwc else None


def to_channels_last(tensor: str) -> str:
    """Launcher text giving an activation in channels-last memory, through TO_CHANNELS_LAST."""
    return f"_to_channels_last({tensor})"


# Emitted once into a generated file that converts an activation (emit.render). PyTorch's strided copy
# from NCHW to NHWC ran at about half the DRAM bandwidth on an H200 (a 1 GiB input: 1.1 ms, where
# torch.compile's tiled transpose took 0.5 ms; eval/runs/kb40-h200, level2/54's kernel table). This one
# reads tiles along the spatial axis and writes them along C, so both sides stay coalesced: on the H200
# (eval/runs/push-h200-s42/NOTES.md) 1.05 ms for 2 GiB where PyTorch's copy took 2.26, 0.27 against 0.57 ms
# for a 5-d input of 0.5 GiB, the same for an input of 3 channels.
TO_CHANNELS_LAST = '''
@triton.jit
def _nchw_to_nhwc_kernel(x_ptr, out_ptr, C, S, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    """One [BLOCK_C, BLOCK_S] tile of one image: read along S (contiguous in NCHW), written along C.
    64-bit offsets throughout: a copy kernel's address arithmetic is free beside its memory traffic."""
    base = tl.program_id(2).to(tl.int64) * C * S
    cs = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    ss = tl.program_id(0).to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = (cs[:, None] < C) & (ss[None, :] < S)
    tile = tl.load(x_ptr + base + cs[:, None] * S + ss[None, :], mask=mask)
    tl.store(out_ptr + base + ss[None, :] * C + cs[:, None], tile, mask=mask)


def _to_channels_last(x):
    """x in channels-last memory (NHWC, NDHWC), the same values; one tiled transpose when it is NCHW."""
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    if x.is_contiguous(memory_format=fmt):
        return x
    x = x.contiguous()
    n, c, s = x.shape[0], x.shape[1], x[0, 0].numel()
    out = torch.empty((n, *x.shape[2:], c), device=x.device, dtype=x.dtype)
    out = out.permute(0, x.dim() - 1, *range(1, x.dim() - 1))
    block_c = min(64, triton.next_power_of_2(c))
    _nchw_to_nhwc_kernel[(triton.cdiv(s, 64), triton.cdiv(c, block_c), n)](x, out, c, s, BLOCK_C=block_c, BLOCK_S=64)
    return out
'''

TL_DTYPES = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
             torch.int64: "tl.int64", torch.int32: "tl.int32"}


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


# Offsets are int32 unless a tensor the kernel addresses comes within 2^24 elements of 2^31: the
# margin covers a last block that runs past the end (its lanes are masked, but an int32 offset that
# wrapped negative would pass the `offs < NUMEL` mask and address memory before the tensor).
INT32_SAFE_ELEMENTS = 2**31 - 2**24


def wide_index(*shapes: tuple[int, ...] | None) -> bool:
    """Whether a kernel addressing tensors of these shapes needs 64-bit offsets."""
    return any(numel(tuple(s)) > INT32_SAFE_ELEMENTS for s in shapes if s is not None)


def program_id(axis: int, wide: bool) -> str:
    """Kernel text for a program id; int64 in wide kernels, so every offset derived from it is too."""
    return f"tl.program_id({axis}).to(tl.int64)" if wide else f"tl.program_id({axis})"


def operand_key(operand: Any) -> str:
    return operand.name if isinstance(operand, Ref) else f"self.{operand.path}"


def aligned(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)


def broadcast_index(shape: tuple[int, ...], domain: tuple[int, ...], offs: str,
                    perm: tuple[int, ...] | None = None) -> str:
    """Offset into a contiguous operand of `shape` broadcast over `domain`, from the flat
    domain offset `offs`. With `perm` (channels_last) both are walked in that memory order."""
    s = aligned(shape, len(domain))
    d = tuple(domain)
    if perm is not None and len(d) == len(perm):
        s, d = tuple(s[i] for i in perm), tuple(d[i] for i in perm)
    if numel(s) == 1:
        return "0"
    if s == d:
        return offs
    offs = offs if offs.isidentifier() else f"({offs})"  # an expression keeps its own precedence below
    # group consecutive dims that are all kept or all broadcast; size-1 domain dims join any group
    groups: list[list[int]] = []
    kinds: list[bool] = []
    for i, (si, di) in enumerate(zip(s, d)):
        if di == 1:
            continue
        kept = si == di
        if groups and kinds[-1] == kept:
            groups[-1].append(i)
        else:
            groups.append([i])
            kinds.append(kept)
    terms = []
    for dims, kept in zip(groups, kinds):
        if not kept:
            continue
        inner_d = numel(d[dims[-1] + 1:])
        inner_s = numel(s[dims[-1] + 1:])
        size = numel(tuple(d[i] for i in dims))
        term = offs if inner_d == 1 else f"({offs} // {inner_d})"
        if numel(d[:dims[0]]) > 1:
            term = f"({term} % {size})"
        terms.append(term if inner_s == 1 else f"{term} * {inner_s}")
    return " + ".join(terms) if terms else "0"


@dataclass
class Body:
    """Pointwise nodes evaluated over `domain`; `outputs` are the values stored or handed on."""

    nodes: list[Node]
    domain: tuple[int, ...]
    outputs: list[str] = field(default_factory=list)

    def names(self) -> set[str]:
        return {n.name for n in self.nodes}

    def external(self, graph: Graph) -> list[Any]:
        """Tensor operands read from outside the body, in first-use order."""
        inside = self.names()
        seen: dict[str, Any] = {}
        for node in self.nodes:
            for operand in data_operands(node):
                if isinstance(operand, Ref) and operand.name in inside:
                    continue
                if isinstance(operand, (Ref, Attr)):
                    seen.setdefault(operand_key(operand), operand)
        return list(seen.values())

    def operand_shape(self, graph: Graph, node: Node, index: int, operand: Any) -> tuple[int, ...]:
        override = node.attrs.get("arg_shapes", {}).get(index)
        return tuple(override) if override is not None else tuple(graph.shape_of(operand) or ())


@dataclass
class Emitted:
    """Kernel lines for a body: the statements and the variable holding each node's value."""

    lines: list[str]
    var_of: dict[str, str]


def emit_body(body: Body, graph: Graph, ptr_of: dict[str, str], offs: str, mask: str,
              provided: dict[str, str] | None = None, perm: tuple[int, ...] | None = None,
              prefix: str = "v") -> Emitted:
    """Triton statements computing every node of `body` at flat domain offsets `offs`.

    `ptr_of` maps an external operand's key to its pointer argument; `provided` maps operand
    keys already held in registers (the GEMM accumulator, a normalised row) to variables.
    """
    lines: list[str] = []
    var_of: dict[str, str] = dict(provided or {})
    loaded: dict[tuple[str, tuple[int, ...]], str] = {}
    counter = 0
    inside = body.names()
    for node in body.nodes:
        texts, raw = [], []
        for index, operand in enumerate(data_operands(node)):
            raw.append(operand)
            if isinstance(operand, Ref) and operand.name in inside:
                texts.append(var_of[operand.name])
            elif isinstance(operand, (Ref, Attr)):
                key = operand_key(operand)
                if key in var_of:
                    texts.append(var_of[key])
                    continue
                shape = body.operand_shape(graph, node, index, operand)
                cache_key = (key, shape)
                if cache_key not in loaded:
                    name = f"{prefix}_in{len(loaded)}"
                    index_expr = broadcast_index(shape, body.domain, offs, perm)
                    if index_expr == "0":
                        lines.append(f"{name} = tl.load({ptr_of[key]}).to(tl.float32)")
                    else:
                        lines.append(f"{name} = tl.load({ptr_of[key]} + {index_expr}, mask={mask}, "
                                     f"other=0.0).to(tl.float32)")
                    loaded[cache_key] = name
                texts.append(loaded[cache_key])
            elif isinstance(operand, bool) or not isinstance(operand, (int, float)):
                raise ValueError(f"operand {operand!r} of {node.name} is not a number or tensor")
            else:
                texts.append(lit(operand))
        expr = triton_expr(node, texts, raw)
        if expr is None:
            raise ValueError(f"{node.op} ({node.name}) has no Triton form")
        var = f"{prefix}{counter}"
        counter += 1
        lines.append(f"{var} = {expr}  # {node.name}: {node.op}")
        var_of[node.name] = var
    return Emitted(lines, var_of)


def body_comment(body: Body) -> str:
    return " -> ".join(f"{n.op}" for n in body.nodes)


def indent(lines: list[str], spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line else "" for line in lines)


TARGET_SMS = 132  # H200 multiprocessors: enough programs to fill them is the split target


def split_chunk(n: int, split: int, block: int) -> int:
    """Elements per program when `n` is split `split` ways, rounded up to whole blocks."""
    return -(-(-(-n // split)) // block) * block


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())
