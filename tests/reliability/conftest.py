"""Shared by the fault suite: the figures each case records.

`pytest -m reliability -s` prints every case's figures; with KSKILL_RELIABILITY_REPORT=FILE
they are also appended to FILE as JSON lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[dict]:
    """What a case measured, printed (and saved) when it ends, passed or failed."""
    record: dict = {}
    yield record
    line = json.dumps({"case": request.node.name, **record}, sort_keys=True, default=str)
    print(f"\nreliability figures: {line}")
    path = os.environ.get("KSKILL_RELIABILITY_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
