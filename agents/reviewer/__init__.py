"""Reviewer: sandboxed compile, correctness, timing and profiling of candidates.

Public entry points (api.py):
    review_batch(problem, candidates, options, *, time_limit_s=None, on_result=None) -> list[Review]
    review(problem, candidate, options) -> Review   (a batch of one)
    close_warm(): end the judge review_batch(..., keep_warm=True) started for a next batch
    require_isolation(options): the sandbox candidates will run in, or SandboxUnavailable

The names are loaded on first use: the sandboxed worker modules live in this package too,
and they must start with torch and the standard library alone (no pydantic).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {"Flag": "models", "Review": "models", "ReviewOptions": "models", "Timing": "models",
            "review": "api", "review_batch": "api", "require_isolation": "api", "SandboxUnavailable": "sandbox",
            "close_warm": "batch"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
