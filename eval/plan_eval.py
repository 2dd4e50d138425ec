"""Does `kskill plan` name the family an expert expects, problem by problem?

    python -m kskill.eval.plan_eval /work/shared/kernelbench --gpu h200
    python -m kskill.eval.plan_eval SUITE --expectations eval/plan/expectations.yaml --json out.json

For every problem listed in the expectations file (written before the planner was run over the
suite) this builds the observations `kskill plan PROBLEM --gpu NAME` builds (static features of
the reference, the problem's default tolerance, the named GPU's peaks) and plans on a fresh
embedded store holding the built-in skill base. A plan names the expected family when its first
choice belongs to one of the families the file lists for the problem. Reported: the share that
do, per level and overall, and every miss with what was chosen instead and the bottlenecks that
matched. Nothing is run on a GPU; nothing in the suite is executed beyond building its Model on
the meta device, as the Feature Extractor does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kskill.agents.gpus import GpuSpec, resolve
from kskill.agents.observe import FeatureExtractor
from kskill.agents.planner import Planner
from kskill.graph_schema.skillbase import ensure_builtin
from kskill.graph_schema.store import GraphStore, open_store

DEFAULT_EXPECTATIONS = Path(__file__).with_name("plan") / "expectations.yaml"
TARGET_SHARE = 0.80


@dataclass
class Outcome:
    """One problem: what was expected, what the plan chose, and whether that names the family."""

    problem: str
    level: str
    expected: list[str]
    selected: str | None
    chosen: list[str]
    matched_bottlenecks: list[str]
    hit: bool
    family_of_selected: list[str] = field(default_factory=list)
    capture_method: str | None = None
    seconds: float = 0.0


@dataclass
class Expectations:
    families: dict[str, list[str]]
    problems: dict[str, list[str]]

    @classmethod
    def read(cls, path: Path) -> Expectations:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        families = {k: list(v) for k, v in data["families"].items()}
        problems = {k: list(v) for k, v in data["problems"].items()}
        unknown = sorted({f for fams in problems.values() for f in fams} - families.keys())
        if unknown:
            raise SystemExit(f"{path}: families {unknown} are used by problems but not defined")
        return cls(families, problems)

    def families_of(self, technique: str | None) -> list[str]:
        return sorted(f for f, ids in self.families.items() if technique in ids)


def evaluate(suite: Path, expectations: Expectations, store: GraphStore, gpu: GpuSpec,
             width: int = 4, only: str | None = None) -> list[Outcome]:
    planner = Planner(store)
    outcomes = []
    for rel, expected in sorted(expectations.problems.items(), key=lambda kv: _order(kv[0])):
        if only and only not in rel:
            continue
        path = suite / rel
        if not path.is_file():
            raise SystemExit(f"{path} is listed in the expectations but does not exist in {suite}")
        start = time.perf_counter()
        obs = FeatureExtractor(path.read_text(encoding="utf-8"), gpu=gpu).observe()
        plan = planner.plan(obs.to_params(), width=width)
        accepted = {t for f in expected for t in expectations.families[f]}
        outcomes.append(Outcome(
            problem=rel, level=rel.split("/", 1)[0], expected=expected, selected=plan.selected,
            chosen=[c.technique for c in plan.chosen], matched_bottlenecks=[b.id for b in plan.matched],
            hit=plan.selected in accepted, family_of_selected=expectations.families_of(plan.selected),
            capture_method=str(obs.get("capture_method")), seconds=round(time.perf_counter() - start, 2)))
    return outcomes


def _order(rel: str) -> tuple[str, int]:
    level, name = rel.split("/", 1)
    number = name.split("_", 1)[0]
    return level, int(number) if number.isdigit() else 0


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    levels: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        row = levels.setdefault(o.level, {"problems": 0, "hits": 0})
        row["problems"] += 1
        row["hits"] += int(o.hit)
    for row in levels.values():
        row["share"] = round(row["hits"] / row["problems"], 3)
    hits = sum(o.hit for o in outcomes)
    return {"problems": len(outcomes), "hits": hits, "share": round(hits / max(len(outcomes), 1), 3),
            "target": TARGET_SHARE, "levels": dict(sorted(levels.items()))}


def report(outcomes: list[Outcome], gpu: GpuSpec) -> str:
    s = summary(outcomes)
    lines = [f"kskill plan against the expected families ({gpu.key}, static features, width 4)", ""]
    for level, row in s["levels"].items():
        lines.append(f"  {level}: {row['hits']}/{row['problems']} ({row['share']:.0%})")
    lines.append(f"  all: {s['hits']}/{s['problems']} ({s['share']:.0%}; target {TARGET_SHARE:.0%})")
    misses = [o for o in outcomes if not o.hit]
    if misses:
        lines += ["", "misses (problem: expected families -> first choice [its families]; bottlenecks matched):"]
        for o in misses:
            fams = ",".join(o.family_of_selected) or "-"
            lines.append(f"  {o.problem}: {','.join(o.expected)} -> {o.selected} [{fams}]; "
                         f"{','.join(o.matched_bottlenecks) or 'none'} (capture {o.capture_method})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path, help="folder holding level1/, level2/, level3/")
    parser.add_argument("--expectations", type=Path, default=DEFAULT_EXPECTATIONS)
    parser.add_argument("--gpu", default="h200", help="GPU of the peak table whose ridge point is used")
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--only", help="only problems whose path contains this text")
    parser.add_argument("--json", type=Path, help="write every outcome and the summary here")
    args = parser.parse_args(argv)
    gpu = resolve(args.gpu)
    expectations = Expectations.read(args.expectations)
    with tempfile.TemporaryDirectory(prefix="kskill-plan-eval-") as home:
        store = open_store("embedded", Path(home), graph_name=f"plan_eval{os.getpid()}")
        try:
            ensure_builtin(store)
            outcomes = evaluate(args.suite, expectations, store, gpu, args.width, args.only)
        finally:
            store.close()
    print(report(outcomes, gpu))
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu.key, "summary": summary(outcomes),
                                         "outcomes": [asdict(o) for o in outcomes]}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
