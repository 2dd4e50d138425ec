"""Rows that come back from L2: long rows split into items, one program per SM, a barrier per row.

A softmax or a norm over rows longer than registers hold reads each row twice (its statistics, then
the normalising pass). When the rows are large the second read goes to DRAM again: three passes of
traffic where the roofline counts two. Here a row is split into SPLIT items of CHUNK elements; a
persistent grid of one program per multiprocessor walks the items in order. A program computes its
item's partial statistics, stores them, arrives at its row's counter, waits until all SPLIT items of
the row have arrived, merges the partials and normalises its item, which it read a moment ago, so the
second read is served from L2: all programs together hold programs x CHUNK elements at a time, sized
to stay inside the L2 cache.

No deadlock: a program waits only for items of the row it is in, and items are taken in order, so
the lowest unfinished row always has all its items taken by programs that finished every earlier
item; this needs every program resident at once (one per multiprocessor, at most SPLIT of which a row
needs), which `_resident_launch` checks on the device it runs on. Where it cannot hold (the CPU
interpreter runs programs one after another; a GPU with fewer multiprocessors than SPLIT) the same
kernel runs as two launches, statistics then normalisation (PHASES 1 and 2), with the same arithmetic.
"""

from __future__ import annotations

from kskill.agents.recipes.templates.common import TARGET_SMS, program_id

RESIDENT_CHUNK = 32768  # elements an item holds: 132 programs x 128 KB = 17 MB in flight, inside an H200's 50 MB L2
RESIDENT_BLOCK = 8192  # a tile of an item; 16 warps: 32 KB of loads in flight per multiprocessor
RESIDENT_WARPS = 16


def resident_split(r: int) -> int | None:
    """Items per row when rows of `r` elements are worth the resident form: longer than one item, and
    split into no more items than a GPU of the target's size runs programs at once."""
    split = -(-r // RESIDENT_CHUNK)
    return split if 2 <= split <= TARGET_SMS else None


def item_loop(wide: bool) -> list[str]:
    """The head of the persistent loop: `row` and its item `s`, items taken in order."""
    return [f"for item in range({program_id(0, wide)}, ITEMS, tl.num_programs(0)):",
            "    row = item // SPLIT", "    s = item % SPLIT"]


# After an item's partials are stored: every thread's stores are ordered before the release.
ARRIVE = ["tl.debug_barrier()", "tl.atomic_add(cnt_ptr + row, 1, sem='release')"]
# Before the partials are read back: wait for all SPLIT items of the row (the fused form only).
WAIT = ["if PHASES == 3:",
        "    arrived = tl.atomic_add(cnt_ptr + row, 0, sem='acquire')",
        "    while arrived < SPLIT:",
        "        arrived = tl.atomic_add(cnt_ptr + row, 0, sem='acquire')",
        "    tl.debug_barrier()"]

SIZES = "ITEMS: tl.constexpr, SPLIT: tl.constexpr, CHUNK: tl.constexpr, PHASES: tl.constexpr"


def launch_lines(name: str, like: str, rows: int, split: int, partials: int, args: str) -> list[str]:
    """Launcher statements before the final launch: the partials and counters, the grid and phases, and
    the statistics launch of the two-launch form. The final launch reads `programs` and `phases`."""
    return [f"ws = torch.empty(({rows * split * partials},), device={like}.device, dtype=torch.float32)",
            f"cnt = torch.zeros(({rows},), device={like}.device, dtype=torch.int32)",
            f"programs, phases = _resident_launch({like}, {rows * split}, {split})",
            "if phases == 2:",
            f"    {name}_kernel[({rows * split},)]({args}, PHASES=1)"]


RESIDENT_HELPER = '''
def _resident_launch(like, items, split):
    """(programs, PHASES) for a resident-rows kernel: one program per multiprocessor, each waiting at its
    row's barrier (3), when every program needed can be resident at once; otherwise one program per item
    in two launches, statistics (1) then normalisation (2), as under the CPU interpreter."""
    import os

    if like.is_cuda and os.environ.get("TRITON_INTERPRET", "0") != "1":
        sms = torch.cuda.get_device_properties(like.device).multi_processor_count
        if sms >= split:
            return min(items, sms), 3
    return items, 2
'''
