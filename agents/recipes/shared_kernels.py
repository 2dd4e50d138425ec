"""Kernels written once where units have the same code.

Every unit writes its kernels under its own names, with its pointer parameters named after the
graph's tensors: a network's twenty batch norms give twenty copies of the same three kernels. Triton
compiles each copy on its own (its cache is keyed by the source text), about a fifth of a second
apiece. A kernel that an earlier unit wrote as the same code but for names (the kernel's, its
pointer parameters') and words (its docstring, its comments) is left out, and the unit's launcher calls the first one.
Shared kernels then compile once for each set of constexpr values they are launched with: the
repeated blocks of a network share one binary. Constexpr parameters keep their names in the comparison,
since launchers pass them by keyword.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kskill.agents.recipes.templates.unit import KernelUnit

DEF = re.compile(r"^def (\w+)\((.*?)\):", re.M | re.S)
DOCSTRING = re.compile(r'^(\s+)""".*?"""\n', re.M | re.S)
COMMENT = re.compile(r"[ \t]*#[^\n]*")  # kernels hold no string with a '#' in it


def _signature(text: str) -> list[tuple[str, list[str]]]:
    """(function name, its parameters that are not constexpr) for every def in the text, in order."""
    found = []
    for match in DEF.finditer(text):
        plain = [p.split(":")[0].split("=")[0].strip() for p in match.group(2).split(",")
                 if p.strip() and "constexpr" not in p]
        found.append((match.group(1), plain))
    return found


def canonical(text: str) -> tuple[str, list[str]]:
    """The kernels' text without docstrings and comments, their names and pointer parameters made
    positional, and the kernel names in order (what a launcher refers to)."""
    defs = _signature(text)
    out = COMMENT.sub("", DOCSTRING.sub("", text))
    for i, (name, params) in enumerate(defs):
        out = re.sub(rf"\b{re.escape(name)}\b", f"_kernel_{i}", out)
        for j, param in enumerate(params):  # each def's parameters are local to it; positional names suffice
            out = re.sub(rf"\b{re.escape(param)}\b", f"_arg_{i}_{j}", out)
    return out, [name for name, _ in defs]


def _blocks(text: str) -> list[str]:
    """The text's top-level definitions, each with its decorators (and any other statement alone)."""
    blocks, pending = [], ""
    for chunk in re.split(r"(?m)^(?=\S)", text):
        if chunk.startswith("@") or not chunk.strip():
            pending += chunk
        else:
            blocks.append(pending + chunk)
            pending = ""
    return blocks + ([pending] if pending.strip() else [])


def share(units: Sequence[KernelUnit]) -> list[tuple[str, str]]:
    """(kernel source, launcher source) to write for each unit: each of its kernels that an earlier
    unit wrote as the same code left out, and the unit's names for it replaced by the first's."""
    first: dict[str, str] = {}  # canonical text of one kernel -> the name it was first written under
    written = []
    for unit in units:
        kept, renamed = [], {}
        for block in _blocks(unit.kernel_src):
            key, names = canonical(block)
            if len(names) == 1 and key in first:
                renamed[names[0]] = first[key]
                continue
            if len(names) == 1:
                first[key] = names[0]
            kept.append(block)
        kernels, launcher = "".join(kept), unit.launcher_src
        for own, shared in renamed.items():  # in the launcher, and in a kept kernel that calls it
            kernels = re.sub(rf"\b{re.escape(own)}\b", shared, kernels)
            launcher = re.sub(rf"\b{re.escape(own)}\b", shared, launcher)
        written.append((kernels, launcher))
    return written
