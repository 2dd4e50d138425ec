"""Kernels written once where units have the same code.

Every unit writes its kernels under its own names, with its pointer parameters named after the
graph's tensors: a network's twenty batch norms give twenty copies of the same three kernels. Triton
compiles each copy on its own (its cache is keyed by the source text), about a fifth of a second
apiece. A unit whose kernels are another's but for their names (the kernels', the pointer
parameters', the docstrings) is written without kernels; its launcher calls the first unit's.
Those then compile once for each set of constexpr values they are launched with: the repeated
blocks of a network share one binary. Constexpr parameters keep their names in the comparison,
since launchers pass them by keyword.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kskill.agents.recipes.templates.unit import KernelUnit

DEF = re.compile(r"^def (\w+)\((.*?)\):", re.M | re.S)
DOCSTRING = re.compile(r'^(\s+)""".*?"""\n', re.M | re.S)


def _signature(text: str) -> list[tuple[str, list[str]]]:
    """(function name, its parameters that are not constexpr) for every def in the text, in order."""
    found = []
    for match in DEF.finditer(text):
        plain = [p.split(":")[0].split("=")[0].strip() for p in match.group(2).split(",")
                 if p.strip() and "constexpr" not in p]
        found.append((match.group(1), plain))
    return found


def canonical(text: str) -> tuple[str, list[str]]:
    """The kernels' text with their names, pointer parameters and docstrings made positional, and
    the kernel names in order (what a launcher refers to)."""
    defs = _signature(text)
    out = DOCSTRING.sub("", text)
    for i, (name, params) in enumerate(defs):
        out = re.sub(rf"\b{re.escape(name)}\b", f"_kernel_{i}", out)
        for j, param in enumerate(params):  # each def's parameters are local to it; positional names suffice
            out = re.sub(rf"\b{re.escape(param)}\b", f"_arg_{i}_{j}", out)
    return out, [name for name, _ in defs]


def share(units: Sequence[KernelUnit]) -> list[tuple[str, str]]:
    """(kernel source, launcher source) to write for each unit: an empty kernel source where an
    earlier unit's kernels are the same code, and then a launcher that calls those."""
    first: dict[str, list[str]] = {}  # canonical text -> the kernel names of the unit that wrote it
    written = []
    for unit in units:
        key, names = canonical(unit.kernel_src)
        if not names or key not in first:
            first.setdefault(key, names)
            written.append((unit.kernel_src, unit.launcher_src))
            continue
        launcher = unit.launcher_src
        for own, shared in zip(names, first[key]):
            launcher = re.sub(rf"\b{re.escape(own)}\b", shared, launcher)
        written.append(("", launcher))
    return written
