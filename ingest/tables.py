"""Table rows read as statements: a markdown table's row says something of its subject under its header's columns.

A row such as `| Naive Coalesced Write | 3.12054 | 640.915 | 68.4668 |` under the header `| Kernel Name | Latency (ms)
| Effective Bandwidth (GB/s) | Peak Bandwidth Percentage (%) |` is no sentence (no verb, few words), yet it states what
a sentence would: coalesced writes were measured at 640.9 GB/s, 68% of the peak. The row's first cell names its subject;
the other cells, each under its header, say what is claimed of it. When the first cell names no node (a kernel's
number, "Custom GEMM Kernel V01"), a column whose header says it describes the row ("Kernel Description") names the
subject instead. learned-13 reads one claim from such a row: evidence for the technique or bottleneck its subject cell
names, when some cell holds a figure under a header naming a measure (time, bandwidth, FLOPS, a speedup, a percentage);
a row of flags and defaults, or of yes and no, states no measured figure and gives nothing.

learned-20 reads a speedup from a row: under a header naming a speedup ("Speedup vs `fp16`", "MXFP8 speedup vs
BF16"), a cell holding a factor ("1.9x", "**2.04x**", "1.431") is the speedup of what the row's subject cell names
(`| `fp8` | `fp16` | 22.95 | 1.9x |`): of the technique it names, or of the number format it names. learned-21 reads a
percentage there too ("+20.3%" under "Speedup over BF16" is 1.203x; PERCENT_CELL).

learned-22 reads a table of timings whose columns are systems compared (`timed_gain`): where its caption or a header
says the figures are times ("execution time in millisecond:"), the column the document's title names by the name it
leads with ("ByteTransformer" in "ByteTransformer: Optimized BERT ...") gains the first other column's time over its
own, read in the last row of a sweep (`| 1024 | 53.21 | ... | 24.70 |`: 2.15x over PyTorch). A row of figures alone is
no sentence, so the table is found from its header (`last_row_below`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .lexicon import Mention

CELL = "|"
# The line under a markdown table's header: `| :---: | --- |`, or with one hyphen a cell, as GitHub allows (`|- |- |`).
SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$|^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")
# A header naming a measure: what a number under it was measured as.
MEASURE_HEADER = re.compile(r"speed-?up|latency|\btimes?\b|duration|throughput|bandwidth|flops|flop/s|\bgb/s|\btb/s|"
                            r"\bms\b|\bus\b|µs|%|percent|performance|efficiency|utili[sz]ation|tokens?/s|"
                            r"relative to|of peak|of target", re.I)
# A header saying its column describes the row: there the row's subject is named when its first cell is a mere label.
DESCRIBING_HEADER = re.compile(r"\b(?:description|technique|optimi[sz]ation|method|approach|strategy)s?\s*$", re.I)
# A cell holding one figure, maybe marked up or with its unit: "640.915", "`1986.5`", "96.1%", "1.39x", "~3 ms".
FIGURE_CELL = re.compile(r"[`*~≈<>]*\s*\d[\d,]*(?:\.\d+)?\s*(?:x|×|%|[A-Za-zµ/]{1,8})?\s*[`*]*")
# A header naming a speedup: the figure under it says how many times faster the row's subject ran.
SPEEDUP_HEADER = re.compile(r"speed-?ups?|\bx-?fold\b", re.I)
# A cell holding one factor: "1.9x", "**2.04x**", "~1.5×", or a bare "1.431" (a whole number needs its "x": a bare
# "4" under a speedup header is as often a count).
FACTOR_CELL = re.compile(r"[`*~≈]*\s*(\d+\.\d+\s*(?:x|×)?|\d+\s*(?:x|×))\s*[`*]*", re.I)
# learned-21: a cell holding a percentage, "+20.0%", "**+14%**", "41.2%": under a header naming a speedup it is the
# factor 1 + p/100 (how much faster, as the text's own timings show: 0.394 ms -> 0.346 ms is "+14%", 6.97 s -> 4.94 s
# "41.2%"); a signed minus, "-3%", is a slowdown and no match.
PERCENT_CELL = re.compile(r"[`*~≈]*\s*\+?\s*(\d{1,4}(?:\.\d+)?)\s*%\s*[`*]*")
# learned-22: what says a table's figures are times, in its caption ("execution time in millisecond:") or a header.
TIME_NAMED = re.compile(r"\b(?:latenc(?:y|ies)|(?:execution|run|wall-?clock|step|iteration|kernel) ?times?|time in|"
                        r"durations?|milli-?seconds?|micro-?seconds?|ms|us|µs|μs)\b", re.I)
# A unit in brackets after a column's name: "Old (ms)", "PyTorch [us]".
UNIT_SUFFIX = re.compile(r"\s*[(\[][^)\]]*[)\]]\s*$")
# A column that is a part or a statistic of one run, not a system: "Forward (ms)", "Total", "Median".
NO_SYSTEM = re.compile(r"\b(?:forward|backward|fwd|bwd|prefill|decode|total|mean|median|min|max|avg|average|std|"
                       r"p\d{2}|memory|peak)\b", re.I)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# A number format's name: what a quantization table's rows compare ("fp8", "int4", "MXFP8", "float8", "w8a8").
NUMBER_FORMAT = re.compile(r"\b(?:(?:mx|nv)?fp\d{1,2}|u?int\d{1,2}|bf16|float\d{1,2}|bfloat16|w\d{1,2}a\d{1,2})\b", re.I)


@dataclass(frozen=True)
class TableRow:
    """A row of a markdown table with a header: its cells and the header's, both as written, stripped; the line of text
    just above the header (the table's caption, or "") and whether the row is the table's last."""

    cells: tuple[str, ...]
    headers: tuple[str, ...]
    caption: str = ""
    last: bool = False


def split_cells(line: str) -> tuple[str, ...]:
    """A table line's cells, stripped: `| a | b |` -> ("a", "b")."""
    body = line.strip()
    body = body[1:] if body.startswith(CELL) else body
    body = body[:-1] if body.endswith(CELL) else body
    return tuple(cell.strip() for cell in body.split(CELL))


def table_row(text: str, raw: str, at: int) -> TableRow | None:
    """The table row on the line holding position `at` of the document's text, with its table's header (the line
    above the separator line the row follows); None when the line is not a body row of a table with a header. `raw` is
    the file's text before its markup was blanked (the same offsets): the loader blanks the separator line."""
    if len(raw) != len(text):
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start:end if end >= 0 else len(text)]
    if line.count(CELL) < 2:
        return None
    above = start
    while above > 0:  # up over the table's lines to its separator
        previous = raw.rfind("\n", 0, above - 1) + 1
        if SEPARATOR.match(raw[previous:above - 1]):
            header_start = raw.rfind("\n", 0, max(previous - 1, 0)) + 1 if previous else 0
            header = text[header_start:max(previous - 1, header_start)]
            if CELL not in header:
                return None
            below = text[end + 1:].split("\n", 1)[0] if end >= 0 else ""
            return TableRow(split_cells(line), split_cells(header), _caption(text, header_start), below.count(CELL) < 2)
        if raw[previous:above - 1].count(CELL) < 2:
            return None
        above = previous
    return None


def last_row_below(text: str, raw: str, at: int) -> tuple[TableRow, int] | None:
    """When the line holding position `at` is a table's header, the table's last row and where it starts (a row of
    figures alone is no sentence, so it is found from its header, which is)."""
    end = text.find("\n", at)
    if end < 0 or text[text.rfind("\n", 0, at) + 1:end].count(CELL) < 2:
        return None
    separator = raw[end + 1:].split("\n", 1)[0]
    if not SEPARATOR.match(separator):
        return None
    start, last = end + 1 + len(separator) + 1, None
    while start < len(text) and text[start:].split("\n", 1)[0].count(CELL) >= 2:
        last = start
        start += len(text[start:].split("\n", 1)[0]) + 1
    row = table_row(text, raw, last) if last is not None else None
    return (row, last) if row is not None else None


def _caption(text: str, header_start: int) -> str:
    """The non-blank line just above a table's header, when it is no table line: what the table shows."""
    lines = text[:header_start].rstrip().rsplit("\n", 1)
    line = lines[-1].strip() if lines else ""
    return "" if line.count(CELL) >= 2 or line.startswith("#") else line


def reads_whole(row: TableRow, sentence: str) -> bool:
    """The sentence is the whole row (a row cut at a full stop inside a cell is read as the sentence it is)."""
    return sentence.strip(" " + CELL).count(CELL) == len(row.cells) - 1


def cell_index(text: str, offset: int) -> int:
    """Which cell of a row's text (cells joined by "|") holds position `offset`; an opening bar is no cell's end."""
    body = text.lstrip()
    skipped = len(text) - len(body) + (1 if body.startswith(CELL) else 0)
    return text.count(CELL, skipped, max(offset, skipped))


def subject_cell(text: str, headers: Sequence[str], named: Sequence[Mention]) -> int:
    """The cell of a row's text naming the row's subject: the first, unless it names no technique or bottleneck and a
    column whose header says it describes the row does (without a header, the first)."""
    cells = {cell_index(text, m.start) for m in named if m.kind in ("Technique", "Bottleneck")}
    if 0 in cells:
        return 0
    describing = [i for i in sorted(cells) if i < len(headers) and DESCRIBING_HEADER.search(headers[i])]
    return describing[0] if describing else 0


def figures(text: str, headers: Sequence[str]) -> tuple[str, ...]:
    """The cells of a row's text holding one figure under a header naming a measure, as written."""
    cells = split_cells(text)
    return tuple(cell.strip("`* ") for i, cell in enumerate(cells)
                 if 0 < i < len(headers) and FIGURE_CELL.fullmatch(cell) and MEASURE_HEADER.search(headers[i]))


def measured_subjects(text: str, headers: Sequence[str], named: Sequence[Mention]) -> list[Mention]:
    """The techniques and bottlenecks a row (its text, under `headers`) states a measured figure of: those its subject
    cell names, when a cell under a header naming a measure holds a figure."""
    if not headers or not figures(text, headers):
        return []
    where = subject_cell(text, headers, named)
    return [m for m in named if m.kind in ("Technique", "Bottleneck") and cell_index(text, m.start) == where]


def speedups(text: str, headers: Sequence[str]) -> tuple[float, ...]:
    """The factors a row's text states under headers naming a speedup, once each: "1.9x", or a percentage read as
    1 + p/100 ("+20.0%" is 1.2, learned-21); only those above 1 (the baseline's "1.0x" and "~0%" gain nothing) and at
    most 100 (beyond, a count more likely than a speedup)."""
    cells = split_cells(text)
    found = []
    for i, cell in enumerate(cells):
        under = i < len(headers) and SPEEDUP_HEADER.search(headers[i])
        m = FACTOR_CELL.fullmatch(cell) if under else None
        percent = PERCENT_CELL.fullmatch(cell) if under and not m else None
        factor = (float(m.group(1).rstrip("x× ")) if m
                  else round(1 + float(percent.group(1)) / 100, 3) if percent else 0.0)
        if 1.0 < factor <= 100 and factor not in found:
            found.append(factor)
    return tuple(found)


def speedup_owner(headers: Sequence[str]) -> str:
    """What the first speedup header names before its word for speedup, as what was sped up ("Async TP speedup" ->
    "Async TP", "MXFP8 speedup vs BF16" -> "MXFP8"); "" when it names nothing ("Speedup vs `fp16`"): then the row's
    subject is what was sped up, and otherwise the row's subject is only the configuration it was measured in."""
    for header in headers:
        found = SPEEDUP_HEADER.search(header)
        if found:
            return header[:found.start()].strip(" `*_-:()")
    return ""


def subject_text(text: str, headers: Sequence[str], named: Sequence[Mention]) -> str:
    """The text of the cell naming a row's subject (subject_cell), its markup stripped: "`fp8`" -> "fp8"."""
    cells = split_cells(text)
    where = subject_cell(text, headers, named)
    return cells[where].strip("`*_ ") if where < len(cells) else ""


def format_named(text: str) -> str:
    """The number format a cell or header names ("MXFP8 for Grouped GEMMs only" -> "MXFP8"), or ""."""
    found = NUMBER_FORMAT.search(text)
    return found.group(0) if found else ""


def timed_gain(row: TableRow, title: str) -> tuple[str, float] | None:
    """The gain a table of timings states for the document's subject (learned-22): where the caption or a header says
    the figures are times, every cell past the row's label is a time, each column is a system or variant (its header,
    its unit in brackets aside, names no measure, no part of a run nor a statistic, and all have one unit) and one
    column's header is the name the title leads with
    ("ByteTransformer" in "ByteTransformer: Optimized BERT ..."), that system's gain is the first other column's time
    (the baseline the table sets first, "PyTorch") over its own. Only the last row of a sweep (its label a number, the
    largest size last) gives it: the figure the table leads to, where every row would repeat the claim at each size. A
    table that states its own speedups (a speedup header) is read by `speedups`. Returns the subject's header and the
    factor, or None."""
    cells, headers = row.cells, row.headers
    subject = _lead_name(title).lower()
    if not (row.last and subject and len(cells) == len(headers) >= 3 and FIGURE_CELL.fullmatch(cells[0])):
        return None
    if not (TIME_NAMED.search(row.caption) or any(TIME_NAMED.search(h) for h in headers)):
        return None
    names = [UNIT_SUFFIX.sub("", h).strip("`*_ ") for h in headers[1:]]
    units = {h[len(UNIT_SUFFIX.sub("", h)):].strip().lower() for h in headers[1:]}  # one unit: one measure
    if any(SPEEDUP_HEADER.search(h) for h in headers) or len(units) > 1 or not all(
            name and not (MEASURE_HEADER.search(name) or NO_SYSTEM.search(name)) and FIGURE_CELL.fullmatch(cell)
            for name, cell in zip(names, cells[1:])):
        return None
    ours = [i for i, name in enumerate(names) if name.lower() == subject]
    if len(ours) != 1:
        return None
    base = 0 if ours[0] else 1
    times = [float(NUMBER.search(cell).group(0).replace(",", "")) for cell in cells[1:]]
    factor = round(times[base] / times[ours[0]], 3) if times[ours[0]] else 0.0
    return (names[ours[0]], factor) if 1.0 < factor <= 100 else None


def _lead_name(title: str) -> str:
    """The name a title leads with, before its colon or dash ("ByteTransformer: Optimized BERT ..."), or "": one to
    three words."""
    parts = re.split(r"\s*(?::|—|–|\s-\s)\s*", title.strip(), maxsplit=1)
    return parts[0] if len(parts) == 2 and 1 <= len(parts[0].split()) <= 3 else ""
