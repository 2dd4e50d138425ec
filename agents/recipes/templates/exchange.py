"""Programs that share a row: each holds one chunk in registers, and they exchange chunk statistics.

A row too long for one program's registers (a softmax over 400K columns, an instance norm over
512 x 512) is split SPLIT ways, one chunk of BLOCK_R elements per program, with the programs of a
row adjacent in launch order. Each program loads its chunk once, reduces it to two numbers (max and
normaliser, or mean and M2), publishes them, reads its siblings' and writes its chunk from the
registers it loaded: the row is read once and written once, where a statistics pass and a
normalising pass read it twice.

Publishing is one 64-bit atomic exchange of the two fp32 numbers packed together into a slot of a
workspace the launcher fills with -1 (no fp32 pair packs to all ones but a NaN pair, which the
fallback below recomputes to the same NaN). A reader loads its row's slots with volatile loads,
so it sees either -1 or the whole pair, never half of one.

No program ever waits without bound: after SPIN polls, a sibling still unpublished (not resident
yet, or never: a GPU shared with other work, the Triton interpreter, which runs programs one at a
time) has its chunk read and reduced by the waiting program itself. The result is the same; only
time is lost. The recipes keep SPLIT well under the GPU's resident programs so that on a GPU of
its own a row's programs run together and the fallback stays idle.

Where a row has many programs, waiting for the slowest of them costs most (a fifth of the one-row
softmax's time on the H200), so the programs are pipelined instead: LANES * SPLIT programs, as many as
the GPU keeps resident, each walking the rows of its lane LANES apart and loading and publishing its chunk
of the next row before it waits for the current row's siblings, so that one row is always loading while
another waits. The launcher takes LANES from the first launch's registers (Triton's fused-softmax tutorial
reckons occupancy the same way); until then, and under the interpreter, every row is a lane of its own.
On the H200 (eval/runs/push-h200-s38/NOTES.md) an instance norm over 7168 x 262144 ran in 3.82 ms against
4.28 with one row a program and 4.14 with two, a softmax over 4096 x 393216 in 3.47 against 4.11 and 3.89.
The `pipeline` parameter chooses either form, `lanes` fixes LANES.

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

SIZES = "R: tl.constexpr, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, BLOCK_R: tl.constexpr"
EMPTY = -1  # an unpublished slot
SPIN_GPU = 4096  # polls before a waiting program reads a sibling's chunk itself
SPIN_INTERPRETER = 2  # programs run one at a time there: nothing to wait for

MAX_SPLIT = 64  # programs a row: well under the programs an H200 keeps resident at these chunk sizes
CHUNKS = (4096, 8192)  # fp32 elements a program holds; num_warps = chunk // 2048
PIPE_CHUNK = 2048  # a pipelined program's chunk of each of its two rows in flight, over one warp
PIPE_WARPS = 1
MAX_PIPE_SPLIT = 256
# Pipelined only where the one-row form has this many programs a row (or the `pipeline` parameter asks):
# the more siblings, the longer the wait for the slowest. Two rows a program, the pipeline's first form,
# ran 3-6 % faster with 48-64 siblings, the same with 27 and 4-10 % slower with 16 (push-h200-s38/NOTES.md).
PIPE_MIN_SPLIT = 32
ROWS_SIZE = "ROWS: tl.constexpr"


class Split(NamedTuple):
    split: int  # programs a row
    block: int  # elements of a chunk
    warps: int
    pipelined: bool  # resident programs walking the rows, the next row's chunk loaded before each wait


def chosen_split(rows: int, r: int, params: dict[str, Any], tuned: tuple[str, ...]) -> Split | None:
    """How rows of `r` are split: pipelined (pipe_split) where the one-row form would have PIPE_MIN_SPLIT
    programs a row or more, or the params' `pipeline` asks; else row_exchange; None when the technique's
    two_reads variant is chosen (`row_exchange` false) or the params tune the two-read form (any key of
    `tuned`)."""
    if not params.get("row_exchange", True) or any(k in params for k in tuned):
        return None
    single = row_exchange(r)
    if params.get("pipeline", single is None or single[0] >= PIPE_MIN_SPLIT) and (pipe := pipe_split(r)):
        return pipe
    return None if single is None else Split(*single, False)


def pipe_split(r: int) -> Split | None:
    """Rows of `r` in chunks of PIPE_CHUNK for the pipelined form; None for a row one chunk holds or one of
    more than MAX_PIPE_SPLIT chunks (a lane's programs must all be resident)."""
    split = -(-r // PIPE_CHUNK)
    if r <= PIPE_CHUNK or split > MAX_PIPE_SPLIT:
        return None
    return Split(split, PIPE_CHUNK, PIPE_WARPS, True)


def row_exchange(r: int) -> tuple[int, int, int] | None:
    """(SPLIT, BLOCK_R, num_warps) for rows of `r` elements, or None when a row needs more than MAX_SPLIT
    of the largest chunk, or fits in one. On the H200 (eval/runs/push-h200-s36/NOTES.md) chunks of
    4096-8192 with 2-4 warps were fastest; larger chunks, with fewer programs resident, lost to the
    two-read form."""
    block = max(CHUNKS[0], next_pow2(-(-r // MAX_SPLIT)))
    if block > CHUNKS[-1] or r <= block:
        return None
    return -(-r // block), block, max(1, block // 2048)


def exchange_unit(name: str, io: FusedIO, rows: int, r: int, split: Split, first: list[str], then: list[str],
                  doc: str, lanes: int | None = None) -> KernelUnit:
    """The kernel and its launcher (the slots filled with EMPTY, the poll bound for the device). `first`
    loads this program's chunk of `row` (`offs` = row * R + `cols`, `mask`), reduces it and publishes;
    `then` gathers the row's statistics and writes the chunk. With one row a program the kernel is
    `first` then `then`; pipelined, `first` for the lane's first row, then for each row `first` for the
    next and `then` for the current, every name `first` assigns suffixed 0 (current) or 1 (next).
    `lanes` fixes the pipeline's LANES (else the launcher reckons it)."""
    place = [f"pid = {program_id(0, io.wide)}", "c = pid % SPLIT", "cols = c * BLOCK_R + tl.arange(0, BLOCK_R)",
             "mask = cols < R"]
    locate = ["offs = row * R + cols"]
    operand = io.operand_names()[0]
    spin = f"spin = {SPIN_INTERPRETER} if {operand}.device.type == 'cpu' else {SPIN_GPU}"
    consts = f"R={r}, SPLIT={split.split}, SPLIT_P2={next_pow2(split.split)}, BLOCK_R={split.block}"
    params = {"BLOCK_R": split.block, "SPLIT": split.split, "num_warps": split.warps, "pipeline": split.pipelined}
    if not split.pipelined:
        body = place + ["row = pid // SPLIT"] + locate + first + then
        kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['ws_ptr', 'SPIN'])}, {SIZES}):\n"
                  f'    """{doc}"""\n{indent(body, 4)}\n')
        before = [f"ws = torch.full(({rows * split.split},), {EMPTY}, device={operand}.device, dtype=torch.int64)", spin]
        launcher = io.launcher(name, f"({rows * split.split},)", consts, body_before=before,
                               extra_args=["ws", "spin"], launch_opts=f"num_warps={split.warps}")
        return io.unit(name, kernel, launcher, params)
    names = {"row", "offs", "mask"} | _assigned(first)
    step = ["row = row0 + LANES", "offs = row * R + cols", "mask = mask0 & (cols * 0 + row < ROWS)"]
    body = place + ["row0 = pid // SPLIT", "offs0 = row0 * R + cols", "mask0 = mask"] + _suffixed(first, 0, names)
    loop = _suffixed(step + first, 1, names) + _suffixed(then, 0, names) + [f"{n}0 = {n}1" for n in sorted(names)]
    body += ["while row0 < ROWS:"] + ["    " + ln for ln in loop]
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args(['ws_ptr', 'SPIN', 'LANES'])}, {SIZES}, {ROWS_SIZE}):\n"
              f'    """{doc}"""\n{indent(body, 4)}\n')
    known = f"{name}_lanes"
    first_lanes = lanes or rows
    before = [f"lanes = {known}.get({operand}.device, {first_lanes})  # until reckoned: every row a lane",
              # slots for every row, and for the rows past the last that a lane's final step publishes
              f"ws = torch.full((({rows} + lanes) * {split.split},), {EMPTY}, device={operand}.device, dtype=torch.int64)",
              spin]
    after = [] if lanes else [
        f"if {operand}.device.type != 'cpu' and {operand}.device not in {known}:",
        f"    {known}[{operand}.device] = {name}_resident(launched, {split.warps}, {split.split}, {rows}, {operand}.device)"]
    launcher = io.launcher(name, f"(lanes * {split.split},)", f"{consts}, ROWS={rows}", body_before=before,
                           extra_args=["ws", "spin", "lanes"], launch_opts=f"num_warps={split.warps}", body_after=after)
    helper = f"{known} = {{}}  # device: row lanes whose programs stay resident together\n\n\n"
    helper += RESIDENT.format(name=name) + "\n\n"
    return io.unit(name, kernel, helper + launcher, params)


RESIDENT = '''def {name}_resident(kernel, warps, split, rows, device):
    """Row lanes whose programs the GPU keeps resident together (each lane's programs wait on one another),
    from the launched kernel's registers and shared memory, as Triton's fused-softmax tutorial reckons
    occupancy, with at most 2048 threads and 32 programs a multiprocessor."""
    props = triton.runtime.driver.active.utils.get_device_properties(device.index)
    threads = props["warpSize"] * warps
    regs = getattr(kernel, "n_regs", 0) or 255  # unknown: the most a thread can hold
    per_sm = min(props["max_num_regs"] // (regs * threads), 2048 // threads, 32)
    shared = getattr(getattr(kernel, "metadata", None), "shared", 0)
    if shared:
        per_sm = min(per_sm, props["max_shared_mem"] // shared)
    return max(1, min(rows, per_sm * props["multiprocessor_count"] // split))
'''


def _assigned(lines: list[str]) -> set[str]:
    """The names `lines` assign (`name = ...` at the start of a line)."""
    return {m.group(1) for ln in lines if (m := re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", ln))}


def _suffixed(lines: list[str], k: int, names: set[str]) -> list[str]:
    """`lines` with every name in `names` suffixed by `k` (not attributes, parts of longer names, nor keyword
    arguments such as `mask=`)."""
    pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b(?!\s*=[^=])")

    def one(line: str) -> str:
        target = re.match(r"(\s*)([A-Za-z_]\w*)(\s*=(?!=))", line)  # `name = ...`: its target is suffixed too
        if target and target.group(2) in names:
            head = f"{target.group(1)}{target.group(2)}{k}{target.group(3)}"
            return head + pattern.sub(lambda m: f"{m.group(1)}{k}", line[target.end():])
        return pattern.sub(lambda m: f"{m.group(1)}{k}", line)

    return [one(ln) for ln in lines]


def publish(a: str, b: str) -> list[str]:
    """Kernel lines packing the fp32 scalars `a` (high half) and `b` into the slot of this program's chunk."""
    return [f"packed = ({a}.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | "
            f"{b}.to(tl.uint32, bitcast=True).to(tl.uint64)",
            "tl.atomic_xchg(ws_ptr + row * SPLIT + c, packed.to(tl.int64, bitcast=True), sem='release')"]


def gather() -> list[str]:
    """Kernel lines reading the SPLIT slots of `row`, polling up to SPIN times while any is unpublished.
    Defines `ks` (chunk indices, SPLIT_P2 lanes), `ok` (published), `lost` (still unpublished), `missing`
    (how many), and the unpacked `a_k`, `b_k` (garbage where not `ok`)."""
    load = "got = tl.load(ws_ptr + row * SPLIT + ks, mask=ks < SPLIT, other=0, volatile=True)"
    count = f"missing = tl.sum(((ks < SPLIT) & (got == {EMPTY})).to(tl.int32), axis=0)"
    return ["ks = tl.arange(0, SPLIT_P2)", load, count, "spins = 0",
            "while (missing > 0) & (spins < SPIN):", "    " + load, "    " + count, "    spins += 1",
            f"lost = (ks < SPLIT) & (got == {EMPTY})", f"ok = (ks < SPLIT) & (got != {EMPTY})",
            "bits = got.to(tl.uint64, bitcast=True)",
            "a_k = (bits >> 32).to(tl.uint32).to(tl.float32, bitcast=True)",
            "b_k = (bits & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)"]


def fallback(reduce_chunk: list[str]) -> list[str]:
    """Kernel lines running `reduce_chunk` (which loads chunk `j` of the row at `offs_j`, `mask_j` and merges
    it into the running statistics) for every sibling that never published."""
    place = ["cols_j = j * BLOCK_R + tl.arange(0, BLOCK_R)", "offs_j = row * R + cols_j", "mask_j = cols_j < R"]
    return ["if missing > 0:", "    for j in range(0, SPLIT):",
            "        if tl.sum(((ks == j) & lost).to(tl.int32), axis=0) > 0:"] + [
        "            " + line for line in place + reduce_chunk]
