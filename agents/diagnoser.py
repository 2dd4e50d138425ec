"""The Diagnoser: a failed review in, a failure class and the FailurePatterns it matches out.

The class comes from the Reviewer (compile, runtime, numeric, timeout, cheating, memory, other)
or from the brain (no_code). Patterns are found first by the regular expressions stored on the
FailurePattern nodes, matched against the message and the log (patterns of the same class
first), then, when no expression matches, by retrieval over the patterns' texts. The
signature (class and message, with addresses and temporary paths blanked) is what the loop
compares to notice the same failure twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kskill.graph_schema import trajectory_queries as q
from kskill.graph_schema.store import GraphStore

# text, k -> [(FailurePattern id, score)] of related matches, best first
PatternSearch = Callable[[str, int], list[tuple[str, float]]]
_VOLATILE = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"/[\w./-]*kskill-review-[\w-]+"), "<workdir>"),
    (re.compile(r"\b\d+(\.\d+)?\s*(s|ms|seconds)\b"), "<time>"),
]


@dataclass(frozen=True)
class PatternMatch:
    id: str
    name: str
    failure_class: str
    remedy: str
    remedied_by: tuple[str, ...]
    via: str  # "regex" or "retrieval"
    evidence: str  # the expression that matched, or the retrieval score


@dataclass(frozen=True)
class Diagnosis:
    failure_class: str
    message: str
    patterns: tuple[PatternMatch, ...]

    @property
    def signature(self) -> tuple[str, str]:
        return self.failure_class, normalise(self.message)

    @property
    def remedy_techniques(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for m in self.patterns for t in m.remedied_by))


def normalise(message: str) -> str:
    text = message.strip()
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


class Diagnoser:
    def __init__(self, store: GraphStore, search: PatternSearch | None = None, statuses: tuple[str, ...] = ("accepted",),
                 max_patterns: int = 3):
        self.search = search
        self.max_patterns = max_patterns
        self._patterns = store.run(q.FAILURE_PATTERNS, {"statuses": list(statuses)})

    def diagnose(self, failure_class: str, message: str, log: str = "") -> Diagnosis:
        text = f"{message}\n{log}"
        found = self._by_regex(failure_class, text)
        if not found and self.search is not None and message.strip():
            found = self._by_retrieval(message)
        return Diagnosis(failure_class, message, tuple(found[: self.max_patterns]))

    def _by_regex(self, failure_class: str, text: str) -> list[PatternMatch]:
        same, other = [], []
        for row in self._patterns:
            for expression in row["patterns"] or []:
                try:
                    hit = re.search(expression, text, re.IGNORECASE)
                except re.error:
                    continue  # a malformed expression in user knowledge must not stop a run
                if hit:
                    match = _match(row, "regex", expression)
                    (same if row["failure_class"] == failure_class else other).append(match)
                    break
        return same + other

    def _by_retrieval(self, message: str) -> list[PatternMatch]:
        rows = {r["id"]: r for r in self._patterns}
        return [_match(rows[pid], "retrieval", f"score {score:.2f}") for pid, score in
                self.search(message, self.max_patterns) if pid in rows]


def _match(row: dict[str, Any], via: str, evidence: str) -> PatternMatch:
    return PatternMatch(id=row["id"], name=row["name"], failure_class=row["failure_class"], remedy=row["remedy"],
                        remedied_by=tuple(row["remedied_by"] or ()), via=via, evidence=evidence)
