"""Judged extractions: a person's verdict on claims `kskill ingest` read, each with its supporting sentence.

A run of `python -m kskill.eval.ingest_eval` prints numbered items ("N. [document] item (confidence c)"
and "> sentence  (location)", eval/ingest/runs/*-run*.txt); a judgement file beside it
(*-judgement.md) gives each number a verdict, right or wrong, in a Markdown table. A claim row an
extractor produces today is matched to a judged item by document, item text and sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .ingest_scoring import Row, describe

RUNS = Path(__file__).resolve().parent / "ingest" / "runs"
# Each judgement file and the run that printed the items it judges.
JUDGED_RUNS = (("heldout2-first-run-judgement.md", "heldout2-first-run.txt"),
               ("heldout3-first-run-judgement.md", "heldout3-first-run.txt"),
               ("tune-learned1-judgement.md", "tune-learned1-items.txt"))
_ITEM = re.compile(r"^(\d+)\. \[(?P<doc>[^\]]+)\] (?P<item>.*) \(confidence [\d.]+\)\n\s+> (?P<quote>.*?)  \(",
                   re.M)
_KIND_SUFFIX = re.compile(r" \((?:remedy|cause|definition|precondition|detection|gain|measurement)\)$")


@dataclass(frozen=True)
class JudgedItem:
    document: str
    item: str  # as describe() words it, without the evidence kind
    quote: str
    right: bool
    why: str = ""


def load_judged(runs: Path = RUNS) -> list[JudgedItem]:
    """Every judged item of the committed runs."""
    out = []
    for judgement, run in JUDGED_RUNS:
        printed = {int(m.group(1)): m for m in _ITEM.finditer((runs / run).read_text(encoding="utf-8"))}
        for number, verdict, why in _verdicts((runs / judgement).read_text(encoding="utf-8")):
            m = printed[number]
            out.append(JudgedItem(m.group("doc"), _plain(m.group("item")), m.group("quote").strip(),
                                  verdict.startswith("right"), why))
    return out


def _verdicts(text: str) -> list[tuple[int, str, str]]:
    """(number, verdict, why) from the rows of a judgement table, whatever columns sit between."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            verdict = next(c for c in cells[1:] if c.startswith(("right", "wrong")))
            rows.append((int(cells[0]), verdict, cells[-1]))
    return rows


def verdict_for(document: str, row: Row, judged: dict[tuple[str, str, str], bool]) -> bool | None:
    """The verdict a person gave this claim row (document, item and sentence alike), or None."""
    return judged.get((document, _plain(describe(row)), row["quote"].strip()))


def judged_index(items: list[JudgedItem]) -> dict[tuple[str, str, str], bool]:
    return {(i.document, i.item, i.quote): i.right for i in items}


def _plain(item: str) -> str:
    return _KIND_SUFFIX.sub("", item.strip())
