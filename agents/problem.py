"""KernelBench-format problems and candidates, read and validated without running them.

A problem is a Python file defining `Model` (an nn.Module), `get_inputs()` and
`get_init_inputs()`. A candidate defines `ModelNew` with the same constructor and forward
signatures. Both are only parsed here. A candidate runs only in the Reviewer's sandboxed
worker; a problem is trusted code, the user's own model, which the Feature Extractor and the
recipe brain also run in the kskill process to capture its graph.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from kskill.agents.errors import ProblemError

PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


def code_hash(source: str) -> str:
    """The short content hash that keys problems and candidates (and so Attempts)."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Problem:
    """A validated problem: its source text and where it came from."""

    name: str
    source: str
    path: Path | None = None

    @property
    def source_hash(self) -> str:
        return code_hash(self.source)


@dataclass(frozen=True)
class Candidate:
    """A candidate's source with the outcome of its static validation."""

    source: str
    error: str | None = None  # why it cannot be run; None when it parses and defines ModelNew
    error_line: int | None = None

    @property
    def source_hash(self) -> str:
        return code_hash(self.source)


def _read_text(path_or_source: str | Path, what: str) -> tuple[str, Path | None]:
    """A Path (or a string naming an existing .py file) is read; any other string is the source."""
    if isinstance(path_or_source, Path) or (
        "\n" not in path_or_source and path_or_source.strip().endswith(".py")
    ):
        path = Path(path_or_source)
        if not path.is_file():
            raise ProblemError(f"{what} file {path} does not exist; pass a path to a .py file or its source text")
        try:
            return path.read_text(encoding="utf-8"), path
        except (OSError, UnicodeDecodeError) as exc:
            raise ProblemError(f"cannot read {what} file {path}: {exc}") from exc
    return path_or_source, None


def top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by def, class, assignment or import."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def load_problem(problem: str | Path, name: str | None = None) -> Problem:
    """Read and validate a problem given as a path or as source text; raise ProblemError if unusable."""
    source, path = _read_text(problem, "problem")
    label = name or (path.stem if path else "problem")
    try:
        tree = ast.parse(source, filename=str(path or label))
    except SyntaxError as exc:
        raise ProblemError(f"problem {label} has a syntax error at line {exc.lineno}: {exc.msg}") from exc
    missing = [n for n in PROBLEM_NAMES if n not in top_level_names(tree)]
    if missing:
        raise ProblemError(
            f"problem {label} does not define {', '.join(missing)}; a KernelBench problem defines "
            "class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    return Problem(name=label, source=source, path=path)


def load_candidate(candidate: str | Path) -> Candidate:
    """Read a candidate (path or source) and check that it parses and defines ModelNew.

    A candidate that fails here is not an error of kskill: it is reviewed as a compile failure.
    """
    source, _ = _read_text(candidate, "candidate")
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as exc:
        return Candidate(source, f"SyntaxError: {exc.msg} (line {exc.lineno})", exc.lineno)
    if "ModelNew" not in top_level_names(tree):
        return Candidate(source, "the candidate does not define ModelNew at module level; define "
                                 "class ModelNew(nn.Module) with the same signatures as Model")
    return Candidate(source)
