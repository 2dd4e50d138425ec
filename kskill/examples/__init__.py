"""The bundled example problems (KernelBench format), found where kskill is installed."""

from __future__ import annotations

import ast
from pathlib import Path

FOLDER = Path(__file__).parent


def bundled() -> dict[str, Path]:
    """Example name -> its file, sorted by name."""
    return {p.stem: p for p in sorted(FOLDER.glob("*.py")) if not p.stem.startswith("_")}


def summary(path: Path) -> str:
    """The first line of the example's docstring (read, not run)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
