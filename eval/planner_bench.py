"""Planning latency on the embedded store: the built-in skill base and a synthetic one of 10,000
techniques and 50,000 conditions.

    python -m kskill.eval.planner_bench                         # both bases, 60 decisions each
    python -m kskill.eval.planner_bench --decisions 200 --json planner_bench.json

For each base: the time to build it (UNWIND batches through the project's merge builders, on a
fresh graph under a temporary KSKILL_HOME), then Planner.plan over varied observation sets, half
of them from a parent attempt whose lineage and children feed the tabu. Reported per decision:
median and p90 milliseconds, and the same per planner query, so a slow case names its query.

The synthetic base: 500 bottlenecks with 2-condition signatures (a random observation set matches
about 3.7% of them, some 18, which bring about 600 candidate techniques), 10,000 techniques each with 4 REQUIRES and 1 FORBIDDEN_WHEN condition, each
addressed by 2 bottlenecks (20,000 ADDRESSED_BY edges, 40 techniques per bottleneck), 2,000
CONFLICTS_WITH pairs, over 200 metrics (140 numbers in 0-100, 20 categorical strings, 40 booleans).
Absolute times only mean something next to the machine line printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kskill.agents.planner import Planner
from kskill.graph_schema import planner_queries, queries
from kskill.graph_schema.model import Condition
from kskill.graph_schema.skillbase import ensure_builtin, read_builtin
from kskill.graph_schema.store import GraphStore, open_store

TARGET_MEDIAN_MS = 50.0
BATCH = 2000
NOW = "2025-01-01T00:00:00+00:00"
QUERY_NAMES = {text: name for name, text in vars(planner_queries).items()
               if name.isupper() and isinstance(text, str)}


# --- timing --------------------------------------------------------------------------------------


class TimedStore:
    """Wraps a store and times each planner query by its constant's name."""

    def __init__(self, store: GraphStore):
        self.store = store
        self.times: dict[str, list[float]] = defaultdict(list)

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        start = time.perf_counter()
        rows = self.store.run(query, params)
        self.times[QUERY_NAMES.get(query, "other")].append(time.perf_counter() - start)
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in seconds)
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 3),
            "p90_ms": round(ms[min(len(ms) - 1, int(0.9 * len(ms)))], 3), "max_ms": round(ms[-1], 3)}


def measure(store: GraphStore, observations: list[dict[str, Any]], parents: list[str | None],
            plan: Callable[[Planner, dict[str, Any], str | None], Any] | None = None) -> dict[str, Any]:
    timed = TimedStore(store)
    planner = Planner(timed)  # type: ignore[arg-type]
    plan = plan or (lambda p, o, parent: p.plan(o, parent=parent))
    for obs, parent in list(zip(observations, parents))[:3]:  # warm-up: parse caches, first connection
        plan(planner, obs, parent)
    timed.times.clear()
    per_decision, matched, candidates, plans = [], [], [], []
    for obs, parent in zip(observations, parents):
        start = time.perf_counter()
        result = plan(planner, obs, parent)
        per_decision.append(time.perf_counter() - start)
        matched.append(len(result.matched))
        # the ranked ones after the first are also rejected ("outranked by ..."): count each once
        candidates.append(len({r.technique for r in result.ranked} | {r.technique for r in result.rejected}))
        plans.append(result.to_json())
    return {"decision": summary_ms(per_decision), "queries": {k: summary_ms(v) for k, v in sorted(timed.times.items())},
            "mean_matched_bottlenecks": round(statistics.mean(matched), 2),
            "mean_candidate_techniques": round(statistics.mean(candidates), 1),
            "selected": sum('"selected": null' not in p for p in plans), "decisions": len(per_decision),
            "plans": plans}


# --- the built-in base ---------------------------------------------------------------------------


def builtin_conditions() -> list[Condition]:
    return [n for n in read_builtin().payload.nodes.values() if isinstance(n, Condition)]


def observation_near(conditions: list[Condition], rng: random.Random) -> dict[str, Any]:
    """Values scattered around each condition's threshold, so different signatures hold each time."""
    obs: dict[str, Any] = {}
    for c in conditions:
        if rng.random() < 0.15:
            continue  # some metrics are unavailable, as on a real profile
        if c.op == "is_true":
            obs[c.metric] = rng.random() < 0.4
        elif c.op == "in":
            obs[c.metric] = rng.choice([*c.values, "other"])
        elif isinstance(c.value, bool):
            obs[c.metric] = rng.random() < 0.5
        elif isinstance(c.value, (int, float)):
            obs[c.metric] = round(float(c.value) * rng.uniform(0.3, 1.7), 3)
        else:
            obs[c.metric] = rng.choice([c.value, "other"])
    return obs


# --- the synthetic base --------------------------------------------------------------------------


NUMBERS, STRINGS, BOOLS, CATEGORIES = 140, 20, 40, 10  # synthetic metrics: m000.., s00.., b00..


def draw_condition(rng: random.Random, hold: float) -> Condition:
    """A condition that holds with probability about `hold` on a synthetic observation set."""
    kind = rng.random()
    if kind < 0.05:
        metric = f"b{rng.randrange(BOOLS):02d}"
        return Condition.of(metric, "is_true") if rng.random() < 0.5 else Condition.of(metric, "==", False)
    if kind < 0.25:
        metric = f"s{rng.randrange(STRINGS):02d}"
        k = max(1, round(CATEGORIES * hold))
        return Condition.of(metric, "in", sorted(rng.sample([f"k{i}" for i in range(CATEGORIES)], k)))
    metric = f"m{rng.randrange(NUMBERS):03d}"
    op = rng.choice([">", ">=", "<", "<="])
    spread = rng.uniform(-3, 3)
    if op in (">", ">="):
        return Condition.of(metric, op, round(100 * (1 - hold) + spread, 4))
    return Condition.of(metric, op, round(100 * hold + spread, 4))


def draw_conditions(rng: random.Random, count: int, hold: float, seen: set[str]) -> list[Condition]:
    """`count` conditions not in `seen` (which is updated): ids are content hashes, so no two are alike."""
    out: list[Condition] = []
    while len(out) < count:
        c = draw_condition(rng, hold)
        if c.id not in seen:
            seen.add(c.id)
            out.append(c)
    return out


def build_synthetic(store: GraphStore, rng: random.Random, techniques: int = 10_000, conditions: int = 50_000,
                    bottlenecks: int = 500, links: int = 2, conflicts: int = 2_000) -> dict[str, int]:
    seen: set[str] = set()
    # 2 per signature: ~3.7% of bottlenecks match (boolean conditions hold half the time whatever `hold`)
    signature = draw_conditions(rng, 2 * bottlenecks, 0.17, seen)
    forbidden = draw_conditions(rng, techniques, 0.08, seen)  # 1 per technique, rarely holds
    requires = draw_conditions(rng, conditions - len(signature) - len(forbidden), 0.92, seen)
    tids = [f"tech{i:05d}" for i in range(techniques)]
    bids = [f"bneck{i:03d}" for i in range(bottlenecks)]
    node_rows = {
        "Bottleneck": [{"id": b, "props": {"name": b, "description": "synthetic", "status": "accepted"}} for b in bids],
        "Technique": [{"id": t, "props": {"name": t, "description": "synthetic", "status": "accepted", "recipe": ""}}
                      for t in tids],
        "Condition": [{"id": c.id, "props": {k: v for k, v in c.properties().items() if k != "id"}}
                      for c in signature + forbidden + requires],
    }
    edge_rows: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for i, b in enumerate(bids):
        for c in signature[2 * i:2 * i + 2]:
            edge_rows[("DETECTED_BY", "Bottleneck", "Condition")].append({"start": b, "end": c.id, "props": {}})
    for i, t in enumerate(tids):
        for j in range(4):  # 4 REQUIRES each, the pool of ~39,000 shared cyclically
            c = requires[(4 * i + j) % len(requires)]
            edge_rows[("REQUIRES", "Technique", "Condition")].append({"start": t, "end": c.id, "props": {}})
        edge_rows[("FORBIDDEN_WHEN", "Technique", "Condition")].append(
            {"start": t, "end": forbidden[i].id, "props": {}})
        for b in rng.sample(bids, links):
            edge_rows[("ADDRESSED_BY", "Bottleneck", "Technique")].append(
                {"start": b, "end": t, "props": {"priority": rng.randrange(101),
                                                 "expected_gain": round(rng.uniform(1.0, 2.0), 2)}})
    for _ in range(conflicts):
        a, b = rng.sample(tids, 2)
        edge_rows[("CONFLICTS_WITH", "Technique", "Technique")].append({"start": a, "end": b, "props": {}})
    for label, rows in node_rows.items():
        for i in range(0, len(rows), BATCH):
            store.write(queries.merge_nodes(label), {"rows": rows[i:i + BATCH], "now": NOW})
    for (rel, start, end), rows in edge_rows.items():
        for i in range(0, len(rows), BATCH):
            store.write(queries.merge_edges(rel, start, end), {"rows": rows[i:i + BATCH]})
    counts = {label: len(rows) for label, rows in node_rows.items()}
    counts.update({rel: len(rows) for (rel, _, _), rows in edge_rows.items()})
    return counts


def synthetic_observation(rng: random.Random) -> dict[str, Any]:
    obs: dict[str, Any] = {f"m{i:03d}": round(rng.uniform(0, 100), 2) for i in range(NUMBERS)}
    obs.update({f"s{i:02d}": f"k{rng.randrange(CATEGORIES)}" for i in range(STRINGS)})
    obs.update({f"b{i:02d}": rng.random() < 0.5 for i in range(BOOLS)})
    return obs


def write_lineage(store: GraphStore, techniques: list[str], rng: random.Random, tag: str) -> str:
    """A run of 4 applied steps and 3 children of the last; returns the parent attempt id."""
    applied, children = rng.sample(techniques, 4), rng.sample(techniques, 3)
    attempts = [{"id": f"{tag}:a0", "props": {"run_id": tag, "n": 0, "kind": "seed", "code_hash": f"{tag}:0",
                                              "status": "verified", "correct": True, "speedup": 1.0}}]
    derived, uses = [], []
    for n, t in enumerate(applied + children, start=1):
        parent = f"{tag}:a{min(n - 1, len(applied))}"
        attempts.append({"id": f"{tag}:a{n}", "props": {"run_id": tag, "n": n, "kind": "optimize",
                                                        "code_hash": f"{tag}:{n}", "status": "verified",
                                                        "correct": n % 2 == 0, "speedup": 1.0 + 0.1 * n}})
        derived.append({"start": f"{tag}:a{n}", "end": parent, "props": {}})
        uses.append({"start": f"{tag}:a{n}", "end": t, "props": {}})
    store.write(queries.merge_nodes("Run"), {"rows": [{"id": tag, "props": {"problem": tag}}], "now": NOW})
    store.write(queries.merge_nodes("Attempt"), {"rows": attempts, "now": NOW})
    store.write(queries.merge_edges("HAS_ATTEMPT", "Run", "Attempt"),
                {"rows": [{"start": tag, "end": a["id"], "props": {}} for a in attempts]})
    store.write(queries.merge_edges("DERIVED_FROM", "Attempt", "Attempt"), {"rows": derived})
    store.write(queries.merge_edges("APPLIED", "Attempt", "Technique"), {"rows": uses})
    return f"{tag}:a{len(applied)}"


# --- the two cases -------------------------------------------------------------------------------


def bench_builtin(home: Path, decisions: int, seed: int) -> dict[str, Any]:
    store = open_store("embedded", home, graph_name="bench_builtin")
    try:
        start = time.perf_counter()
        ensure_builtin(store, force=True)
        build_s = time.perf_counter() - start
        rng = random.Random(seed)
        conditions = builtin_conditions()
        observations = [observation_near(conditions, rng) for _ in range(decisions)]
        techniques = sorted(r["id"] for r in store.run("MATCH (t:Technique) RETURN t.id AS id"))
        parents = [write_lineage(store, techniques, rng, f"bench-run-{i}") if i % 2 else None for i in range(decisions)]
        result = measure(store, observations, parents)
        result.update(build_s=round(build_s, 3), counts={"Technique": len(techniques), "Condition": len(conditions)})
        return result
    finally:
        store.drop_graph()
        store.close()


def bench_synthetic(home: Path, decisions: int, seed: int) -> dict[str, dict[str, Any]]:
    store = open_store("embedded", home, graph_name="bench_synthetic")
    try:
        rng = random.Random(seed)
        start = time.perf_counter()
        counts = build_synthetic(store, rng)
        build_s = time.perf_counter() - start
        observations = [synthetic_observation(rng) for _ in range(decisions)]
        techniques = [f"tech{i:05d}" for i in range(counts["Technique"])]
        parents = [write_lineage(store, techniques, rng, f"bench-run-{i}") if i % 2 else None for i in range(decisions)]
        result = measure(store, observations, parents)
        result.update(build_s=round(build_s, 3), counts=counts)
        results = {"synthetic": result}
        return results
    finally:
        store.drop_graph()
        store.close()


def machine() -> dict[str, Any]:
    import falkordb

    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "falkordb_client": getattr(falkordb, "__version__", "?"), "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def print_table(results: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    print(f"machine: {meta['platform']}, {meta['cpus']} CPUs, Python {meta['python']}")
    print(f"{'base':<11} {'build s':>8} {'decisions':>9} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} "
          f"{'matched':>8} {'target':>7}")
    for name, r in results.items():
        d = r["decision"]
        ok = "ok" if d["median_ms"] <= TARGET_MEDIAN_MS else "MISSED"
        print(f"{name:<11} {r['build_s']:>8.2f} {r['decisions']:>9} {d['median_ms']:>10.2f} {d['p90_ms']:>8.2f} "
              f"{d['max_ms']:>8.2f} {r['mean_matched_bottlenecks']:>8.1f} {ok:>7}")
    for name, r in results.items():
        print(f"\n{name}: {r['mean_candidate_techniques']} candidate techniques per decision; "
              f"per query (median / p90 ms, calls)")
        for q, s in r["queries"].items():
            print(f"  {q:<24} {s['median_ms']:>8.2f} {s['p90_ms']:>8.2f} {s['n']:>6}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=60, help="decisions per base (at least 50 for the report)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("builtin", "synthetic"), help="run one base only")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kskill-planner-bench-") as tmp:
        home = Path(tmp)
        os.environ["KSKILL_HOME"] = str(home)  # nothing touches the user's data directory
        results: dict[str, dict[str, Any]] = {}
        try:
            if args.only in (None, "builtin"):
                results["builtin"] = bench_builtin(home, args.decisions, args.seed)
            if args.only in (None, "synthetic"):
                results.update(bench_synthetic(home, args.decisions, args.seed))
        finally:
            from kskill.graph_schema.embedded import EmbeddedServer

            EmbeddedServer(home / "graph").shutdown()
    meta = {**machine(), "target_median_ms": TARGET_MEDIAN_MS, "decisions": args.decisions, "seed": args.seed}
    print_table(results, meta)
    if args.json:
        kept = {name: {k: v for k, v in r.items() if k != "plans"} for name, r in results.items()}
        args.json.write_text(json.dumps({"meta": meta, "results": kept}, indent=2))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
