"""Embedded store benchmark: cold start, `kskill skills list` wall time, batch writes.

    python -m kskill.eval.store_bench [--repeats 5] [--json out.json]

Cold start: a fresh process-free data directory to a store that answers (server spawned,
migrations applied). `skills list`: the whole command as a user runs it, Python start-up
included, against a store that already holds the skill base. Writes: 10,000 Technique nodes
in UNWIND batches of 500. Medians of several repeats, in a temporary KSKILL_HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kskill.graph_schema import queries
from kskill.graph_schema.embedded import EmbeddedServer
from kskill.graph_schema.skillbase import ensure_builtin
from kskill.graph_schema.store import open_store

TARGETS = {"cold_start_s": 2.0, "skills_list_s": 1.5, "write_nodes_per_s": 5000}


def cold_start(home: Path) -> float:
    start = time.perf_counter()
    store = open_store("embedded", home)
    store.run("RETURN 1 AS ok")
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def skills_list(home: Path) -> float:
    env = {**os.environ, "KSKILL_HOME": str(home)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kskill", "skills", "list"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def batch_write(home: Path, nodes: int = 10_000, batch: int = 500) -> float:
    store = open_store("embedded", home, graph_name="bench_writes")
    rows = [{"id": f"bench-{i}", "props": {"name": f"technique {i}", "description": "synthetic"}}
            for i in range(nodes)]
    start = time.perf_counter()
    for i in range(0, nodes, batch):
        store.write(queries.merge_nodes("Technique"), {"rows": rows[i:i + batch], "now": "t"})
    elapsed = time.perf_counter() - start
    count = store.run("MATCH (n:Technique) RETURN count(n) AS c")[0]["c"]
    store.drop_graph()
    store.close()
    assert count == nodes, f"wrote {count} of {nodes} nodes"
    return nodes / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {"cold_start_s": [], "skills_list_s": [], "write_nodes_per_s": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="kskill-store-bench-") as tmp:
            home = Path(tmp)
            results["cold_start_s"].append(cold_start(home))
            with open_store("embedded", home) as store:
                ensure_builtin(store)
            results["skills_list_s"].append(skills_list(home))
            results["write_nodes_per_s"].append(batch_write(home))
            EmbeddedServer(home / "graph").shutdown()
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    summary = {}
    for name, values in results.items():
        median = statistics.median(values)
        better = median >= TARGETS[name] if name.endswith("per_s") else median <= TARGETS[name]
        summary[name] = {"median": round(median, 4), "min": round(min(values), 4), "max": round(max(values), 4),
                         "target": TARGETS[name], "met": better}
        print(f"{name:<20} median {median:10.3f}  (min {min(values):.3f}, max {max(values):.3f})  "
              f"target {TARGETS[name]}  {'ok' if better else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0 if all(v["met"] for v in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
