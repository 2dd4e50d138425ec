"""Fault suite, concurrency: three `kskill ingest` and one `kskill optimize` on one KSKILL_HOME at
once leave the same graph as the same four commands run one after another: nothing lost,
nothing duplicated. Both homes start empty, so the four processes also race to start the
server, to create the schema and to load the built-in skill base. The commands one after another
run in this process (what a process starts with, torch and the embedding model, is loaded once);
the four at once are four processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kskill.cli import run
from kskill.graph_schema import queries
from kskill.graph_schema.integrity import check_graph
from kskill.graph_schema.store import open_store

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NOTES = sorted((ROOT / "tests" / "fixtures" / "ingest").glob("*.md"))
PROBLEM = ROOT / "kskill" / "examples" / "pointwise_chain.py"


def _jobs(home: Path) -> list[list[str]]:
    ingests = [["ingest", str(note)] for note in NOTES]
    optimize = ["optimize", str(PROBLEM), "--device", "cpu", "--iterations", "2", "--trials", "1",
                "--out", str(home / "run")]
    return ingests + [optimize]


def _graph(home: Path) -> tuple[dict[str, int], dict[str, int], int]:
    with open_store("embedded", home) as store:
        nodes = {r["label"]: r["count"] for r in store.run(queries.COUNT_BY_LABEL)}
        edges = {r["type"]: r["count"] for r in store.run(queries.COUNT_BY_REL)}
        problems = len(check_graph(store))
    return nodes, edges, problems


def test_three_ingests_and_an_optimize_at_once_equal_the_same_work_alone(tmp_path: Path, figures: dict,
                                                                         monkeypatch: pytest.MonkeyPatch):
    assert len(NOTES) == 3
    alone, together = tmp_path / "alone", tmp_path / "together"
    began = time.perf_counter()
    with monkeypatch.context() as env:
        env.setenv("KSKILL_HOME", str(alone))
        for job in _jobs(alone):
            assert run(job) == 0, job
    alone_s = time.perf_counter() - began

    began = time.perf_counter()
    env = {**os.environ, "KSKILL_HOME": str(together)}
    procs = [subprocess.Popen([sys.executable, "-m", "kskill", *job], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for job in _jobs(together)]
    outcomes = [(p.args[3], *p.communicate(timeout=900)) for p in procs]
    together_s = time.perf_counter() - began
    for proc, (command, _, err) in zip(procs, outcomes):
        assert proc.returncode == 0, (command, err[-2000:])

    expected, got = _graph(alone), _graph(together)
    figures.update(alone_s=round(alone_s, 1), together_s=round(together_s, 1), nodes_alone=sum(expected[0].values()),
                   nodes_together=sum(got[0].values()), edges_alone=sum(expected[1].values()),
                   edges_together=sum(got[1].values()), check_problems_together=got[2],
                   differences={k: (expected[0].get(k), got[0].get(k)) for k in set(expected[0]) | set(got[0])
                                if expected[0].get(k) != got[0].get(k)})
    assert got[0] == expected[0], "the same nodes, label by label"
    assert got[1] == expected[1], "the same relationships, type by type"
    assert got[2] == 0, "`kskill graph check` finds nothing wrong"
