"""The results folder of an evaluation: what was asked, one row per finished problem, the tables.

    OUT/eval.json              settings and the problems selected (checked again by --resume)
    OUT/rows/<problem>.json    one finished problem, written atomically when it finishes
    OUT/problems/<problem>/    optimize's run folder (run/), its log and JSON, the baseline worker's files
    OUT/results.json, results.csv, report.md, report.html, plots/

A problem counts as finished when its row exists; --resume runs the others. The folder of a
problem that was interrupted is kept, renamed `<problem>.interrupted-N`, and the problem starts
again in a fresh one.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from kskill.eval.errors import EvalError

ROW_FIELDS = [
    "problem", "level", "name", "status", "stage", "error",
    "correct_strict", "correct_compatible", "kb_triton_rules", "kb_rule_errors", "kb_rule_warnings",
    "returned_reference", "eager_ms", "kskill_ms", "speedup_eager",
]
COMPILE_FIELDS = ["{c}_ms", "{c}_vs_eager", "speedup_{c}", "{c}_correct_strict", "{c}_correct_compatible", "{c}_error"]
TAIL_FIELDS = [
    "roofline_ms", "roofline_fraction", "eager_roofline_fraction", "flops", "bytes_moved", "dtype", "roofline_note",
    "est_kernel_launches", "est_launch_work_us",
    "optimize_speedup", "iterations_to_best", "reviewed", "techniques", "stop_reason", "kskill_error",
    "optimize_wall_s", "time_limit_s", "baseline_wall_s", "wall_s", "tokens", "cost_usd", "timings_representative", "l2_flush_bytes",
    "run_id",
    "gpu", "driver", "torch", "triton", "kskill_version", "git_commit", "host", "engine", "finished_at",
]
JSON_ONLY = ("model_new",)  # kept in rows/*.json, left out of results.json and results.csv


def csv_fields(compile_modes: tuple[str, ...]) -> list[str]:
    compile_fields = [f.format(c=f"compile_{mode}") for mode in compile_modes for f in COMPILE_FIELDS]
    return ROW_FIELDS + compile_fields + TAIL_FIELDS


def grown_sample(stored: dict[str, Any], asked: dict[str, Any]) -> bool:
    """Whether `asked` is the stored evaluation with a larger --sample of the same seed, levels and
    filters, holding every problem the stored one selected: its finished rows still count."""
    same = all(stored.get(k) == asked.get(k) for k in asked if k not in ("started_at", "selection", "sample"))
    was, now = stored.get("sample") or {}, asked.get("sample") or {}
    bigger = (isinstance(was.get("n"), int) and isinstance(now.get("n"), int) and now["n"] > was["n"]
              and {k: v for k, v in was.items() if k != "n"} == {k: v for k, v in now.items() if k != "n"})
    return same and bigger and set(stored.get("selection", [])) <= set(asked.get("selection", []))


def write_json(path: Path, data: Any) -> None:
    """Written to a temporary file and renamed: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


class ResultsDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows_dir = root / "rows"
        self.problems_dir = root / "problems"
        self.record_path = root / "eval.json"

    def begin(self, record: dict[str, Any], resume: bool) -> None:
        """Start a new evaluation here, or continue the one here when `resume` and it asked the same."""
        if self.record_path.exists():
            if not resume:
                raise EvalError(f"{self.root} already holds an evaluation: pass --resume to continue it, "
                                "or choose another --out")
            stored = json.loads(self.record_path.read_text())
            asked = json.loads(json.dumps(record, default=str))  # tuples as lists, as stored
            differing = sorted(k for k in asked if k != "started_at" and stored.get(k) != asked[k])
            if differing and grown_sample(stored, asked):
                write_json(self.record_path, {**asked, "started_at": stored.get("started_at"),
                                              "grown_from": stored.get("grown_from", []) + [stored["sample"]]})
                return
            if differing:
                raise EvalError(f"--resume: the evaluation in {self.root} was started with another "
                                f"{' and '.join(differing)}; give the same suite and options, or choose another --out")
            return
        self.rows_dir.mkdir(parents=True, exist_ok=True)
        self.problems_dir.mkdir(parents=True, exist_ok=True)
        write_json(self.record_path, record)

    def record(self) -> dict[str, Any]:
        try:
            return json.loads(self.record_path.read_text())
        except (OSError, ValueError) as exc:
            raise EvalError(f"{self.root} holds no evaluation (no readable eval.json)") from exc

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every finished problem's row, by problem id."""
        rows = {}
        for path in sorted(self.rows_dir.glob("*.json")):
            try:
                row = json.loads(path.read_text())
            except ValueError:
                continue  # never half-written (rename), so only a hand-edited file lands here
            rows[row["problem"]] = row
        return rows

    def write_row(self, slug: str, row: dict[str, Any]) -> None:
        write_json(self.rows_dir / f"{slug}.json", row)

    def fresh_problem_dir(self, slug: str) -> Path:
        """An empty folder for a problem; what an interrupted earlier attempt left is kept aside."""
        folder = self.problems_dir / slug
        if folder.exists():
            n = 1
            while (aside := folder.with_name(f"{slug}.interrupted-{n}")).exists():
                n += 1
            folder.rename(aside)
        folder.mkdir(parents=True)
        return folder


def write_tables(root: Path, rows: list[dict[str, Any]], meta: dict[str, Any], summary: dict[str, Any],
                 compile_modes: tuple[str, ...]) -> None:
    """results.json (meta, summary, rows) and results.csv (one row per problem)."""
    slim = [{k: v for k, v in r.items() if k not in JSON_ONLY} for r in rows]
    write_json(root / "results.json", {"meta": meta, "summary": summary, "rows": slim})
    fields = csv_fields(compile_modes)
    tmp = root / "results.csv.tmp"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in slim:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})
    os.replace(tmp, root / "results.csv")


def read_results(root: Path) -> dict[str, Any]:
    """An evaluation's results.json; for a folder that holds evaluation folders instead (one per
    problem, say, as runs split across sessions leave them), their rows scored as one evaluation."""
    if root.is_dir() and not (root / "results.json").exists():
        parts = sorted(p for p in root.iterdir() if (p / "results.json").is_file())
        if parts:
            return merged_results(root, [read_results(p) for p in parts])
    path = root / "results.json" if root.is_dir() else root
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EvalError(f"{root}: no readable results.json (run `kskill eval SUITE --out {root}` first)") from exc


def merged_results(root: Path, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows of evaluations made with the same settings, scored together (a problem in several:
    the last folder's row, in name order)."""
    from kskill.eval.metrics import summarize

    settings = parts[0]["meta"]["settings"]
    if any(p["meta"]["settings"] != settings for p in parts):
        raise EvalError(f"{root}: its evaluations were made with different settings; compare folders made alike")
    rows = list({r["problem"]: r for part in parts for r in part["rows"]}.values())
    meta = {**parts[0]["meta"], "merged_from": len(parts), "finished": len(rows),
            "selected": sum(p["meta"].get("selected", 0) for p in parts),
            "gpus": sorted({g for p in parts for g in p["meta"].get("gpus", [])}),
            "git_commit": ", ".join(sorted({str(p["meta"].get("git_commit")) for p in parts}))}
    summary = summarize(rows, settings["baselines"]["tolerances"], tuple(settings["compile_modes"]))
    return {"meta": meta, "summary": summary, "rows": rows}
