"""Window loads along W as aligned vectors: the stencil templates' (pooling, depthwise convolution) vector form.

A window that slides along the innermost axis reads, for each output, KW input columns at offsets
ow * SW - PW + k * DW. Loaded one offset at a time, every load is a scalar load at an unaligned address;
at stride 1 a 4-wide window makes 4 loads per output. In the vector form a lane computes VECTOR
consecutive outputs, 4i..4i+3 of its block: it loads the aligned groups of 4 input columns that their
windows cover (each one 16-byte load where the row's start is aligned), takes each group apart into its
4 columns in registers (`tl.reshape` to [..., 2, 2] and `tl.split`, which stays within a thread), and
combines columns into its 4 outputs. The outputs are put back together with `tl.join` in the order of a
flat block, so the rest of a kernel sees [.., BLOCK_W] as before. Read offline for sm_90 (Triton 3.6): the
max pooling of L1/42 went from 56 scalar loads a step to 21 vector loads, with no layout conversion added
(eval/runs/push-h200-s41/NOTES.md).
"""

from __future__ import annotations

VECTOR = 4  # a lane's consecutive output columns, read from aligned groups of 4 input columns
MAX_GROUPS = 4  # the most aligned groups a lane's window span may cover; wider spans keep one load per offset


def column_groups(kw: int, sw: int, pw: int, dw: int) -> list[int]:
    """The aligned groups of VECTOR input columns (numbered from the group holding a lane's first output
    column's window start at offset 0) that the windows of VECTOR consecutive outputs cover; none where
    they would be more than MAX_GROUPS."""
    first, last = -pw, (VECTOR - 1) * sw - pw + (kw - 1) * dw
    groups = list(range(first // VECTOR, last // VECTOR + 1))
    return groups if len(groups) <= MAX_GROUPS else []


def group_columns(groups: list[int], sw: int, lane: str = "q") -> list[str]:
    """Statements defining `ig0`, `ig1`, ...: the input columns of each group, [lanes, VECTOR], for the
    lanes `lane` (a lane's first output column is VECTOR * lane) and `cg` = tl.arange(0, VECTOR)."""
    return [f"ig{i} = ({lane} * {VECTOR * sw} + {VECTOR * g})[:, None] + cg[None, :]" for i, g in enumerate(groups)]


def take_apart(tile: str, index: int, lead: str, suffix: str = "") -> list[str]:
    """Statements splitting group `index`'s loaded `tile` ([*lead, VECTOR]) into its columns, named
    c{VECTOR * index}{suffix} .. c{VECTOR * index + 3}{suffix} ([*lead] each); `suffix` keeps apart the columns of
    several rows held at once."""
    c = VECTOR * index
    return [f"{tile}a, {tile}b = tl.split(tl.reshape({tile}, [{lead}, 2, 2]))",
            f"c{c}{suffix}, c{c + 2}{suffix} = tl.split({tile}a)", f"c{c + 1}{suffix}, c{c + 3}{suffix} = tl.split({tile}b)"]


def column(groups: list[int], m: int, sw: int, pw: int, k: int, dw: int, suffix: str = "") -> str:
    """The column name holding window offset k of the lane's output m (of the row take_apart named by `suffix`)."""
    return f"c{m * sw - pw + k * dw - VECTOR * groups[0]}{suffix}"


def put_together(parts: list[str], shape: str) -> str:
    """The expression joining a lane's VECTOR outputs `parts` ([*lead] each) into `shape`, output m of lane i
    at flat place VECTOR * i + m."""
    a, b, c, d = parts
    return f"tl.reshape(tl.join(tl.join({a}, {c}), tl.join({b}, {d})), {shape})"
