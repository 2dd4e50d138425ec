"""Which problems an evaluation runs: a suite folder read, filtered and sampled.

A suite is a folder of KernelBench-format problem files (each defines `Model`, `get_inputs` and
`get_init_inputs`). Three shapes are read as they are:
- a folder with `level1/`, `level2/`, ... subfolders (a KernelBench checkout's `KernelBench/`);
- one level folder (`.../level2`), whose level is read from its name;
- any other folder of problem files, level 0.
Files that are not problems (no `Model`, `get_inputs` or `get_init_inputs`) are left out and named.
"""

from __future__ import annotations

import fnmatch
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from kskill.agents.errors import ProblemError
from kskill.agents.problem import PROBLEM_NAMES, load_problem
from kskill.eval.errors import EvalError

LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class SuiteProblem:
    """One problem of a suite: its id (`level1/20_LeakyReLU`), level and file."""

    id: str
    level: int
    path: Path

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def slug(self) -> str:
        """The id as one file name (rows and run folders are named by it)."""
        return self.id.replace("/", "__")


@dataclass
class Suite:
    root: Path
    problems: list[SuiteProblem]
    skipped: list[str]  # files that are not problems, with why


def _is_problem(path: Path) -> str:
    """Empty when the file is a problem; otherwise why it is not."""
    try:
        load_problem(path)
    except ProblemError as exc:
        return str(exc)
    return ""


def _level_folders(root: Path) -> list[tuple[int, Path]]:
    return sorted((int(m.group(1)), d) for d in root.iterdir() if d.is_dir() and (m := LEVEL_DIR.match(d.name)))


def read_suite(root: Path) -> Suite:
    """Every problem under `root`, ordered by level and then by the number its name starts with."""
    if not root.is_dir():
        raise EvalError(f"suite {root} is not a folder")
    levels = _level_folders(root)
    if not levels:
        match = LEVEL_DIR.match(root.name)
        levels = [(int(match.group(1)) if match else 0, root)]
    problems, skipped = [], []
    for level, folder in levels:
        prefix = f"{folder.name}/" if folder != root else (f"{root.name}/" if LEVEL_DIR.match(root.name) else "")
        for path in sorted(folder.glob("*.py"), key=_order):
            if path.name.startswith("_"):
                continue
            why = _is_problem(path)
            if why:
                skipped.append(why)
            else:
                problems.append(SuiteProblem(f"{prefix}{path.stem}", level, path.resolve()))
    if not problems:
        raise EvalError(f"suite {root} holds no KernelBench-format problem (a .py file defining "
                        f"{', '.join(PROBLEM_NAMES)}, directly or in level1/, level2/, ... folders)")
    return Suite(root.resolve(), problems, skipped)


def _order(path: Path) -> tuple[int, str]:
    """KernelBench names start with their number: 2_... before 10_..."""
    match = re.match(r"(\d+)", path.stem)
    return (int(match.group(1)) if match else 1 << 30, path.stem)


def select(problems: list[SuiteProblem], levels: tuple[int, ...] = (), patterns: tuple[str, ...] = (),
           sample: int | None = None, seed: int = 0) -> list[SuiteProblem]:
    """Problems of the given levels whose id or file name matches a pattern, then a sample."""
    chosen = [p for p in problems if not levels or p.level in levels]
    if patterns:
        chosen = [p for p in chosen if any(fnmatch.fnmatch(p.id, g) or fnmatch.fnmatch(p.name, g) for g in patterns)]
    if not chosen:
        raise EvalError("no problem of the suite matches --level / --filter")
    if sample is not None and sample < len(chosen):
        chosen = stratified_sample(chosen, sample, seed)
    return chosen


def stratified_sample(problems: list[SuiteProblem], n: int, seed: int) -> list[SuiteProblem]:
    """n problems drawn per level in proportion to the level's size (largest remainders get the
    rounding), each level's draw seeded by `seed`; the result keeps the suite's order.

    Each level's draw is the head of one seeded order of that level, so a larger sample with the same
    seed holds the smaller one wherever no level's share shrinks (largest remainders almost never shrink
    one): an evaluation of 20 can grow into one of 40 (`--resume` with the larger --sample)."""
    by_level: dict[int, list[SuiteProblem]] = defaultdict(list)
    for p in problems:
        by_level[p.level].append(p)
    total = len(problems)
    quotas = {lv: n * len(ps) / total for lv, ps in by_level.items()}
    counts = {lv: int(q) for lv, q in quotas.items()}
    by_remainder = sorted(quotas, key=lambda lv: (-(quotas[lv] - counts[lv]), lv))
    for lv in by_remainder[: n - sum(counts.values())]:
        counts[lv] += 1
    picked: set[str] = set()
    for lv, ps in sorted(by_level.items()):
        rng = random.Random(f"{seed}:{lv}")  # a level's draw does not depend on the other levels
        order = rng.sample(ps, len(ps))  # the whole level in a seeded order; the sample is its head
        picked.update(p.id for p in order[:counts[lv]])
    return [p for p in problems if p.id in picked]
