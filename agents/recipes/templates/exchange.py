"""Programs that share a row: each holds one chunk in registers, and they exchange chunk statistics.

A row too long for one program's registers (a softmax over 400K columns, an instance norm over
512 x 512) is split SPLIT ways, one chunk of BLOCK_R elements per program, with the programs of a
row adjacent in launch order. Each program loads its chunk once, reduces it to two numbers (max and
normaliser, or mean and M2), publishes them, reads its siblings' and writes its chunk from the
registers it loaded: the row is read once and written once, where a statistics pass and a
normalising pass read it twice.

Publishing is one 64-bit atomic exchange of the two fp32 numbers packed together into a slot of a
workspace the launcher fills with -1 (a NaN first number is published as the canonical NaN, so no
pair packs to all ones). A reader loads its row's slots with volatile loads, so it sees either -1 or
the whole pair, never half of one.

No program ever waits without bound, and no schedule gives a wrong result: after SPIN polls, a
program whose siblings have not all published (not resident yet, or never: a GPU shared with other
work, the Triton interpreter, which runs programs one at a time) sets the workspace's flag and writes
what it has. The launcher launches the kernel a second time as a repair (REPAIR): each of its
programs reads the flag and returns at once where it is clear; where it is set, every slot has been
published by the first launch, so the repair rewrites the whole output from the input without a wait.
Keeping the fallback out of the kernel (each waiter used to read a missing sibling's chunk itself)
keeps its registers down: the fallback's tile cost the instance norm kernel about 70 registers a
thread, and so a third of the programs a multiprocessor keeps resident (eval/runs/push-h200-s38/NOTES.md,
push-h200-s39/NOTES.md). The recipes keep SPLIT under the programs an H200 keeps resident, so that on a
GPU of its own a row's programs run together and the flag stays clear.

Where a row has many programs (PIPE_MIN_SPLIT), waiting for the slowest of them costs most (a fifth of the
one-row softmax's time on the H200), so the row norms' programs are pipelined (softmax's where asked):
LANES * SPLIT programs, as many as the GPU keeps resident, each walking the rows of its lane LANES apart and
loading and publishing its chunk of the next row before it waits for the current row's siblings, so that
one row is always loading while another waits. The launcher reckons LANES from the first launch's
registers; a reckoning too high only makes waits give up, which the repair launch puts right. Otherwise,
where the rows divide into groups of two or four, a program can take a chunk of each row of a group: it
loads and publishes them one after the other, and only then waits for the first row's siblings. Each
recipe names the grouped form it starts from (rows, chunk, warps: softmax two rows in chunks of 4096 over
4 warps, the row norms two rows in chunks of 8192 over 4 warps; eval/runs/push-h200-s37/NOTES.md to
push-h200-s40/NOTES.md); the `pipeline` and `group` parameters choose either form.

Where both this form and the two-read one apply, the search measures both: they are the
row_exchange and two_reads variants of online_softmax and fused_normalization in the skill graph.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

from kskill.agents.recipes.templates.common import indent, next_pow2, program_id

if TYPE_CHECKING:
    from kskill.agents.recipes.templates.fused_io import FusedIO
    from kskill.agents.recipes.templates.unit import KernelUnit

SIZES = ("R: tl.constexpr, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, BLOCK_R: tl.constexpr, "
         "REPAIR: tl.constexpr")
EMPTY = -1  # an unpublished slot; also the clear flag
SPIN_GPU = 4096  # polls before a waiting program gives up and sets the flag
SPIN_INTERPRETER = 2  # programs run one at a time there: nothing to wait for

MAX_SPLIT = 64  # programs a row: well under the programs an H200 keeps resident at these chunk sizes
# Longer rows, in chunks of 8192 over 4 warps (about 96 registers a thread: five programs a multiprocessor,
# 660 on an H200), up to this many programs a row. On the H200 (push-h200-s39/NOTES.md) a group norm of
# 896 rows of 2M elements (256 programs a row) ran in 5.44 ms one row a program and 5.37 two, against 5.55
# read twice; a layer norm of 16 rows of 4M (512 a row, fewer than two rows resident at once) in 0.39 ms,
# against 0.22 read twice. A GPU that holds fewer gives up waits and repairs; the search keeps two_reads.
MAX_LONG_SPLIT = 256
CHUNKS = (4096, 8192)  # fp32 elements a program holds; num_warps = chunk // 2048
MAX_GROUP_SPLIT = 256  # programs a row in the grouped form, whose chunks are smaller
# Rows are grouped only where the one-row form has this many programs a row (or the `group` parameter asks):
# a program waits for the slowest of its row's siblings, and the more there are the longer. On the H200,
# with the flag in place of the fallback (push-h200-s39/NOTES.md), two rows a program ran 6 % faster with
# 64 siblings (instance norm), 2 % with 32 (softmax after pooling), the same with 48 (softmax), 2.5 % faster
# with 27 and 9 % with 16 (group norms feeding pointwise work and pooling); fewer were not measured.
GROUP_MIN_SPLIT = 16
# Rows whose one-row form has this many programs a row are pipelined where the technique pipelines by default
# (the row norms; softmax where the `pipeline` parameter asks: it gained 1-1.3 % below, and in the eval's
# sandboxed timing a softmax after pooling ran 2.02 ms against 1.84 outside it, a loss not yet understood), in
# chunks of 2048 over one warp, or, where that would split a row more than MAX_GROUP_SPLIT ways and a row has
# PIPE_LONG_MIN_SPLIT chunks of 8192 or more, of 8192 over 4. On the H200 (push-h200-s40/NOTES.md), against two
# rows a program: instance norm 3.82 ms against 3.91 (12 lanes), softmax 3.49 against 3.53 (8), softmax after
# pooling 1.83 against 1.85 (24), group norm over 2M-element rows in chunks of 8192 4.89-4.93 against 5.35 (one
# lane, 256 chunks a row); a group norm of 66 chunks of 8192 a row ran 7.53 against 7.48, one of 32 programs a
# row in chunks of 2048 1.19 against 1.14, and an instance norm in chunks of 4096 over 2 warps 10.7 ms (its
# waits gave up); 8192 over 8 warps lost to 4 (5.11 against 4.93, 8.08 against 7.53).
PIPE_MIN_SPLIT = 32
PIPE_LONG_MIN_SPLIT = 128
PIPE_CHUNKS = (2048, 8192)


class Split(NamedTuple):
    split: int  # programs a row
    block: int  # elements of a chunk
    warps: int
    group: int  # rows a program: 1, or 2 or 4 (a chunk of each, all published before any wait)
    pipelined: bool = False  # resident programs walking rows LANES apart (group 1)


class Grouped(NamedTuple):
    """A technique's grouped form: rows a program, the chunk of each row, warps."""
    rows: int
    chunk: int
    warps: int


def chosen_split(rows: int, r: int, params: dict[str, Any], tuned: tuple[str, ...], grouped: Grouped,
                 pipeline: bool = False) -> Split | None:
    """How `rows` rows of `r` are split: pipelined (pipe_split) where the technique pipelines by default
    (`pipeline`), the one-row form would have PIPE_MIN_SPLIT programs a row or more and the params do not ask
    for a group, or where the params' `pipeline` asks; else `grouped` (or the params' `group` rows a program,
    in chunks that keep the elements a program holds) where the one-row form would have GROUP_MIN_SPLIT
    programs a row or more (or the params ask) and group_split allows it; else row_exchange (`group` 1).
    None when the technique's two_reads variant is chosen (`row_exchange` false) or the params tune the
    two-read form (any key of `tuned`)."""
    if not params.get("row_exchange", True) or any(k in params for k in tuned):
        return None
    single = row_exchange(r)
    many_programs = single is None or single[0] >= PIPE_MIN_SPLIT
    pipelined = params.get("pipeline", pipeline and "group" not in params and many_programs)
    if pipelined and (split := pipe_split(r, params.get("pipe_chunk"))) is not None:
        return split
    group = int(params.get("group", grouped.rows))
    if group != grouped.rows:
        grouped = Grouped(group, max(1024, grouped.chunk * grouped.rows // max(group, 1)), grouped.warps)
    many = single is None or single[0] >= GROUP_MIN_SPLIT or "group" in params
    if group > 1 and many and (split := group_split(rows, r, grouped)) is not None:
        return split
    return None if single is None else Split(*single, 1)


def group_split(rows: int, r: int, grouped: Grouped) -> Split | None:
    """`grouped.rows` rows a program, each in chunks of `grouped.chunk`: a program loads and publishes its
    chunk of each row in turn while the first row's siblings finish loading theirs, and only then waits.
    None when the rows do not divide into groups, a row fits one chunk, or needs more than MAX_GROUP_SPLIT."""
    split = -(-r // grouped.chunk)
    if rows % grouped.rows or r <= grouped.chunk or split > MAX_GROUP_SPLIT:
        return None
    return Split(split, grouped.chunk, grouped.warps, grouped.rows)


def pipe_split(r: int, chunk: int | None = None) -> Split | None:
    """Rows of `r` in chunks of `chunk` (over chunk // 2048 warps) for the pipelined form, by default the first
    of PIPE_CHUNKS that splits a row in at most MAX_GROUP_SPLIT (the larger only for rows of PIPE_LONG_MIN_SPLIT
    chunks or more); None for a row one chunk holds or one of more than MAX_GROUP_SPLIT chunks (a lane's
    programs must all be resident)."""
    if chunk is None:
        chunk = next((c for c in PIPE_CHUNKS if -(-r // c) <= MAX_GROUP_SPLIT), PIPE_CHUNKS[-1])
        if chunk == PIPE_CHUNKS[-1] and -(-r // chunk) < PIPE_LONG_MIN_SPLIT:
            return None
    split = -(-r // chunk)
    if r <= chunk or split > MAX_GROUP_SPLIT:
        return None
    return Split(split, chunk, max(1, chunk // 2048), 1, True)


def row_exchange(r: int) -> tuple[int, int, int] | None:
    """(SPLIT, BLOCK_R, num_warps) for rows of `r` elements: up to MAX_SPLIT chunks of the smallest size that
    does, longer rows in up to MAX_LONG_SPLIT of the largest; None when a row needs more, or fits in one.
    On the H200 (eval/runs/push-h200-s36/NOTES.md) chunks of 4096-8192 with 2-4 warps were fastest;
    larger chunks, with fewer programs resident, lost to the two-read form."""
    block = min(CHUNKS[-1], max(CHUNKS[0], next_pow2(-(-r // MAX_SPLIT))))
    if r > MAX_LONG_SPLIT * block or r <= block:
        return None
    return -(-r // block), block, max(1, block // 2048)


def exchange_unit(name: str, io: FusedIO, rows: int, r: int, split: Split, first: list[str], then: list[str],
                  doc: str, contiguous_rows: bool = True) -> KernelUnit:
    """The kernel and its launcher (the flag and slots filled with EMPTY, the poll bound for the device, the
    launch and its repair). `first` loads this program's chunk of `row` (`offs` = row * R + `cols`, `mask`),
    reduces it and publishes (without `contiguous_rows`, `first` and `then` locate the elements themselves);
    `then` gathers the row's statistics and writes the chunk. With one row a program the kernel is
    `first` then `then`; with a group, `first` for each row, then `then` for each, every name `first`
    assigns taking the row's place in the group as a suffix."""
    place = ["if REPAIR:", f"    if tl.load(ws_ptr) == {EMPTY}:  # every wait of the first launch was met",
             "        return",
             f"pid = {program_id(0, io.wide)}", "c = pid % SPLIT", "cols = c * BLOCK_R + tl.arange(0, BLOCK_R)",
             "mask = cols < R"]
    if contiguous_rows:
        first, then = ["offs = row * R + cols"] + scalar_base_first(first, r), scalar_base_first(then, r)
    if split.pipelined:
        return _pipelined_unit(name, io, rows, r, split, place, first, then, doc)
    if split.group > 1:
        names = {"row"} | _assigned(first)
        body = place + ["grp = pid // SPLIT"]
        for k in range(split.group):
            body += _suffixed([f"row = grp * {split.group} + {k}"] + first, k, names)
        for k in range(split.group):
            body += _suffixed(then, k, names)
    else:
        body = place + ["row = pid // SPLIT"] + first + then
    programs = rows // split.group * split.split
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['ws_ptr', 'SPIN'])}, {SIZES}):\n"
              f'    """{doc}"""\n{indent(body, 4)}\n')
    operand = io.operand_names()[0]
    before = [f"ws = torch.full(({1 + rows * split.split},), {EMPTY}, device={operand}.device, dtype=torch.int64)",
              f"spin = {SPIN_INTERPRETER} if {operand}.device.type == 'cpu' else {SPIN_GPU}"]
    consts = f"R={r}, SPLIT={split.split}, SPLIT_P2={next_pow2(split.split)}, BLOCK_R={split.block}"
    launcher = io.launcher(name, f"({programs},)", consts, body_before=before, extra_args=["ws", "spin"],
                           launch_opts=f"REPAIR=False, num_warps={split.warps}",
                           repair=f"REPAIR=True, num_warps={split.warps}")
    params = {"BLOCK_R": split.block, "SPLIT": split.split, "num_warps": split.warps, "group": split.group}
    return io.unit(name, kernel, launcher, params)


def _pipelined_unit(name: str, io: FusedIO, rows: int, r: int, split: Split, place: list[str], first: list[str],
                    then: list[str], doc: str) -> KernelUnit:
    """LANES * SPLIT programs, each walking the rows of its lane LANES apart: it loads and publishes its chunk
    of the next row (`first` suffixed 1; past the last row, the last row again: the same statistics
    republished, instead of a row mask held all loop long) before it waits for the current row's siblings
    and writes the current row (`then` suffixed 0). Only what `then` reads of `first` is carried round the
    loop (an offset or mask tensor carried costs a register per element held). The launcher takes LANES,
    the lanes whose programs the GPU keeps resident together, from the first launch's registers (as Triton's
    fused-softmax tutorial reckons occupancy); until then, and under the interpreter, every row is a lane."""
    names = {"row"} | _assigned(first)
    carried = sorted(n for n in _assigned(first) - _assigned(then)
                     if any(re.search(rf"(?<![\w.]){n}\b", ln) for ln in then))
    body = place + ["row0 = pid // SPLIT"] + _suffixed(first, 0, names)
    loop = ["row1 = tl.minimum(row0 + LANES, ROWS - 1)"] + _suffixed(first, 1, names) + _suffixed(then, 0, names)
    loop += [f"{n}0 = {n}1" for n in carried] + ["row0 = row0 + LANES"]
    body += ["while row0 < ROWS:"] + ["    " + ln for ln in loop]
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['ws_ptr', 'SPIN', 'LANES'])}, {SIZES}, "
              f"ROWS: tl.constexpr):\n    \"\"\"{doc} Pipelined.\"\"\"\n{indent(body, 4)}\n")
    operand = io.operand_names()[0]
    known = f"{name}_lanes"
    before = [f"lanes = {known}.get({operand}.device, {rows})  # until reckoned: every row a lane",
              f"ws = torch.full(({1 + rows * split.split},), {EMPTY}, device={operand}.device, dtype=torch.int64)",
              f"spin = {SPIN_INTERPRETER} if {operand}.device.type == 'cpu' else {SPIN_GPU}"]
    reckoned = f"{name}_resident_lanes(launched, props, {split.warps}, {split.split}, {rows})"
    after = [f"if {operand}.device.type != 'cpu' and {operand}.device not in {known}:",
             f"    props = triton.runtime.driver.active.utils.get_device_properties({operand}.device.index)",
             f"    {known}[{operand}.device] = {reckoned}"]
    consts = (f"R={r}, SPLIT={split.split}, SPLIT_P2={next_pow2(split.split)}, BLOCK_R={split.block}, "
              f"ROWS={rows}")
    launcher = io.launcher(name, f"(lanes * {split.split},)", consts, body_before=before,
                           extra_args=["ws", "spin", "lanes"], launch_opts=f"REPAIR=False, num_warps={split.warps}",
                           repair=f"REPAIR=True, num_warps={split.warps}", body_after=after)
    helper = f"{known} = {{}}  # device: row lanes whose programs stay resident together\n\n\n"
    helper += RESIDENT.format(name=name) + "\n\n"
    params = {"BLOCK_R": split.block, "SPLIT": split.split, "num_warps": split.warps, "pipeline": True}
    return io.unit(name, kernel, helper + launcher, params)


RESIDENT = '''def {name}_resident_lanes(kernel, props, warps, split, rows):
    """Row lanes whose programs the GPU (`props`, as Triton's driver gives them) keeps resident together (a lane's
    programs wait on one another), from the launched kernel's registers and shared memory: registers are given
    out 256 a warp, at most 64 warps and 32 programs a multiprocessor, and each program's shared memory takes
    1 KB more for the system."""
    regs = getattr(kernel, "n_regs", 0) or 255  # unknown: the most a thread can hold
    warp_regs = -(-regs * props["warpSize"] // 256) * 256
    per_sm = min(props["max_num_regs"] // (warp_regs * warps), 64 // warps, 32)
    shared = getattr(getattr(kernel, "metadata", None), "shared", 0)
    per_sm = min(per_sm, props["max_shared_mem"] // (shared + 1024))
    return max(1, min(rows, per_sm * props["multiprocessor_count"] // split))
'''


def scalar_base_first(lines: list[str], r: int) -> list[str]:
    """`lines` with each pointer plus `offs` written as the pointer plus the row's start, plus `cols`; each
    broadcast operand's index `(offs // D)` as `(row * (R // D) + cols // D)` where D divides the row length
    `r` (exact: the row's start is a multiple of D), or as the row's `row // (D // R)` where R divides D; and
    `(offs % S)` as `(cols % S)` where S divides `r`. Triton then addresses from the lane index instead of
    materialising an offset tensor: read offline for sm_90 (scripts/kernel_registers.py), the grouped
    softmax kernel went from 226 to 128 registers a thread, which doubles the programs a multiprocessor
    keeps resident (eval/runs/push-h200-s38/NOTES.md); a fused group norm's per-channel operands, indexed
    `(offs // HW) % C`, spilled 768 bytes a thread, and 504 indexed from the row (push-h200-s40/NOTES.md)."""
    def per_row(m: re.Match[str]) -> str:
        d = int(m.group(1))
        if d % r == 0:  # one value a row, as a block (a load's mask is one)
            return "(row + cols * 0)" if d == r else f"(row // {d // r} + cols * 0)"
        return f"(row * {r // d} + cols // {d})" if r % d == 0 else m.group(0)

    def within_row(m: re.Match[str]) -> str:
        return f"(cols % {m.group(1)})" if r % int(m.group(1)) == 0 else m.group(0)

    lines = [re.sub(r"(\w+_ptr) \+ offs\b", r"\1 + row * R + cols", ln) for ln in lines]
    lines = [re.sub(r"\(offs % (\d+)\)", within_row, ln) for ln in lines]
    return [re.sub(r"\(offs // (\d+)\)", per_row, ln) for ln in lines]


def _assigned(lines: list[str]) -> set[str]:
    """The names `lines` assign (`name = ...` at the start of a line)."""
    return {m.group(1) for ln in lines if (m := re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", ln))}


def _suffixed(lines: list[str], k: int, names: set[str]) -> list[str]:
    """`lines` with every name in `names` suffixed by `k` (not attributes, parts of longer names, nor keyword
    arguments: `mask=` in a call keeps its name, `mask = ` and `mask ==` do not)."""
    pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b(?!=[^=])")
    return [pattern.sub(lambda m: f"{m.group(1)}{k}", ln) for ln in lines]


def publish(a: str, b: str) -> list[str]:
    """Kernel lines packing the fp32 scalars `a` (high half, a NaN made the canonical one) and `b` into the
    slot of this program's chunk (slot 0 of the workspace is the flag)."""
    return [f"{a} = tl.where({a} == {a}, {a}, float('nan'))",
            f"packed = ({a}.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | "
            f"{b}.to(tl.uint32, bitcast=True).to(tl.uint64)",
            "tl.atomic_xchg(ws_ptr + 1 + row * SPLIT + c, packed.to(tl.int64, bitcast=True), sem='release')"]


def gather() -> list[str]:
    """Kernel lines reading the SPLIT slots of `row`, polling up to SPIN times while any is unpublished.
    Defines `ks` (chunk indices, SPLIT_P2 lanes), `ok` (published), `missing` (how many are not), and the
    unpacked `a_k`, `b_k` (garbage where not `ok`); sets the flag where the wait gave up."""
    load = "got = tl.load(ws_ptr + 1 + row * SPLIT + ks, mask=ks < SPLIT, other=0, volatile=True)"
    count = f"missing = tl.sum(((ks < SPLIT) & (got == {EMPTY})).to(tl.int32), axis=0)"
    return ["ks = tl.arange(0, SPLIT_P2)", load, count, "spins = 0",
            "while (missing > 0) & (spins < SPIN):", "    " + load, "    " + count, "    spins += 1",
            "if missing > 0:  # the repair launch rewrites the output", "    tl.store(ws_ptr, 1)",
            f"ok = (ks < SPLIT) & (got != {EMPTY})",
            "bits = got.to(tl.uint64, bitcast=True)",
            "a_k = (bits >> 32).to(tl.uint32).to(tl.float32, bitcast=True)",
            "b_k = (bits & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)"]

