"""Code out of a model's reply: prose around it, several code blocks, or no fences at all.

The rule: the candidate is the Python that defines `ModelNew`. Fenced blocks are tried first
(the last block that defines ModelNew and parses; else all Python blocks joined, for replies
that put the kernels and the module in separate blocks); an unclosed fence (a reply cut off)
keeps what follows it; with no fences, the text from the first line that looks like code.
Trailing prose is trimmed until the code parses. Nothing usable raises NoUsableCode.
"""

from __future__ import annotations

import ast
import re

from kskill.agents.brains.base import NoUsableCode
from kskill.agents.problem import top_level_names

FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
CODE_START = re.compile(r"^(import |from \w|@|class |def |[A-Za-z_]\w*\s*=)")
NOT_PYTHON = {"cpp", "c++", "cuda", "c", "bash", "sh", "shell", "json", "text", "txt", "console", "diff"}


def extract_code(reply: str) -> str:
    """The candidate source in `reply`; raises NoUsableCode with the reason when there is none."""
    if not reply or not reply.strip():
        raise NoUsableCode("the reply was empty", reply or "")
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(reply)]
    python = [body for lang, body in blocks if lang not in NOT_PYTHON]
    for i in reversed(range(len(python))):
        code = _usable(python[i])
        if code:
            return _with_helpers(code, python[:i] + python[i + 1:])
    if len(python) > 1:
        code = _usable("\n\n".join(python))
        if code:
            return code
    if not blocks:
        code = _usable(_from_first_code_line(reply))
        if code:
            return code
    if "ModelNew" not in reply:
        raise NoUsableCode("the reply does not define ModelNew (no class ModelNew in any code block or in the text)",
                           reply)
    raise NoUsableCode("the reply mentions ModelNew but none of its code parses as Python", reply)


def _with_helpers(code: str, others: list[str]) -> str:
    """The code, preceded by the other blocks that define names it uses but does not define
    (replies that show the kernel in one block and the module in the next)."""
    tree = ast.parse(code)
    missing = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing -= top_level_names(tree)
    needed = []
    for other in others:
        try:
            if top_level_names(ast.parse(other)) & missing:
                needed.append(other.strip("\n") + "\n")
        except SyntaxError:
            continue
    joined = "\n\n".join([*needed, code])
    return joined if not needed or _usable(joined) else code


def _from_first_code_line(text: str) -> str:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if CODE_START.match(line):
            return "\n".join(lines[i:])
    return ""


def _usable(code: str) -> str | None:
    """The code, trimmed of trailing prose until it parses, if it then defines ModelNew."""
    lines = code.strip("\n").splitlines()
    while lines:
        text = "\n".join(lines).rstrip() + "\n"
        try:
            tree = ast.parse(text)
        except SyntaxError:
            lines.pop()
            continue
        defines = any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body) or any(
            isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in n.targets)
            for n in tree.body)
        return text if defines else None
    return None
