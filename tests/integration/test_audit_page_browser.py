"""The audit page in a real headless browser (Debian's chromium), offline: the graphs are drawn
left to right with every label inside the drawn area, no script fails, and a screenshot is taken."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kskill.audit_html import render_html

AUDIT = json.loads((Path(__file__).parents[1] / "fixtures" / "audit" / "pointwise_chain.json").read_text())
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# No network at all: every host name fails to resolve and any proxy use goes nowhere.
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--no-proxy-server=false"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def _chromium(*args: str) -> subprocess.CompletedProcess:
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *OFFLINE,
            "--virtual-time-budget=15000", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def test_page_draws_every_decision_offline(tmp_path: Path):
    page = tmp_path / "audit.html"
    page.write_text(render_html(AUDIT), encoding="utf-8")
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-graphs-drawn="4"' in body, body
    assert "data-errors" not in body, body
    graphs = re.findall(r'<div class="graph[ "][^>]*>', dom)
    assert len(graphs) == 4
    for graph in graphs:
        assert 'data-left-to-right="true"' in graph, graph
        assert 'data-clipped="0"' in graph, graph
    assert dom.count("<canvas") >= 4

    shot = tmp_path / "audit.png"
    _chromium("--window-size=1300,3000", f"--screenshot={shot}", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
