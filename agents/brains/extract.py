"""Code out of a model's reply: prose around it, several code blocks, or no fences at all.

The rule: the candidate is the Python that defines `ModelNew`. Fenced blocks are tried first
(the last block that defines ModelNew and parses; else all Python blocks joined, for replies
that put the kernels and the module in separate blocks); an unclosed fence (a reply cut off)
keeps what follows it; with no fences, the text from the first line that looks like code.
Trailing prose is trimmed until the code parses. Nothing usable raises NoUsableCode, whose
`reason` classifies the reply (base.REPLY_FAILURES); `screen_reply` also refuses code that the
Reviewer's static checks would reject unrun (a torch.compile shortcut, threads, exec ...).
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
        raise NoUsableCode("the reply was empty", reply or "", reason="empty")
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
    code = python or ([_from_first_code_line(reply)] if not blocks else [])
    code = [c for c in code if c.strip()]
    if not code:
        raise NoUsableCode("the reply holds no Python code (prose only), so no ModelNew", reply, reason="prose")
    if "ModelNew" not in reply and any(_parses(c) for c in code):
        raise NoUsableCode("the reply's code parses but does not define ModelNew (a wrong class name)", reply,
                           reason="wrong_class")
    raise NoUsableCode(f"the reply's code does not parse as Python: {_first_syntax_error(code)}", reply,
                       reason="syntax")


def screen_reply(reply: str, truncated: bool = False) -> str:
    """The candidate in `reply` if it is worth a review; NoUsableCode (classified) otherwise.
    `truncated`: the endpoint cut the reply at its token limit (finish_reason "length")."""
    try:
        code = extract_code(reply)
    except NoUsableCode as exc:
        if truncated and exc.reason != "empty":
            raise NoUsableCode(f"the reply was cut off at its token limit ({exc.detail})", reply,
                               reason="truncated") from exc
        raise
    from kskill.agents.reviewer.static_checks import check_source

    rejected = [f for f in check_source(code) if f.severity == "reject"]
    if rejected:
        codes = ", ".join(sorted({f.code for f in rejected}))
        raise NoUsableCode(f"the reply's code takes a shortcut the Reviewer rejects ({codes}): {rejected[0].message}",
                           reply, reason="shortcut")
    return code


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _first_syntax_error(code: list[str]) -> str:
    for c in code:
        try:
            ast.parse(c)
        except SyntaxError as exc:
            return f"line {exc.lineno}: {exc.msg}"
    return "no block parses once joined"


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
