"""`kskill runs list|show`: the optimization runs recorded in the graph."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kskill.app import RUN_ID, App, emit_json, json_option, pass_app
from kskill.report import REPORT_FILE
from kskill.trajectory import Trajectory


@click.group()
def runs() -> None:
    """Optimization runs (short-term memory)."""


@runs.command("list")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@json_option
@pass_app
def list_runs(app: App, limit: int, as_json: bool) -> None:
    """Runs, newest first, with their best verified speedup."""
    rows = Trajectory(app.store()).runs(limit)
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("no runs yet: kskill optimize PROBLEM.py")
        return
    for r in rows:
        best = f"{r['best_speedup']:.3f}x" if r["best_speedup"] is not None else "-"
        click.echo(f"{r['id']:<52} {r['status']:<11} {r['attempts']:>3} attempts  best {best:<8} "
                   f"{r['started_at'] or ''}")


@runs.command("show")
@click.argument("run_id", metavar="RUN", type=RUN_ID)
@json_option
@pass_app
def show_run(app: App, run_id: str, as_json: bool) -> None:
    """One run: its settings, why it stopped, and its trajectory."""
    trajectory = Trajectory(app.store())
    run = trajectory.require_run(run_id)
    config = json.loads(run.get("config") or "{}")
    attempts = trajectory.attempts(run_id)
    if as_json:
        emit_json({"run": run, "config": config, "attempts": [
            {**r["attempt"], "parent": r["parent"], "technique": (r["applied"] or [None])[0],
             "bottleneck": r["bottleneck"], "failure_class": r["failure_class"],
             "failure_message": r["failure_message"], "patterns": r["patterns"]} for r in attempts]})
        return
    click.echo(f"run {run_id}  problem={run.get('problem')}  status={run.get('status')}")
    click.echo(f"  started {run.get('started_at')}  finished {run.get('finished_at') or '-'}")
    click.echo(f"  stopped: {config.get('stop_reason') or '-'}")
    click.echo(f"  files:   {config.get('out_dir')}")
    report = Path(config.get("out_dir", "")) / REPORT_FILE
    if report.is_file():
        click.echo(f"  report:  {report}")
    for r in attempts:
        a = r["attempt"]
        speedup = f"{a['speedup']:.3f}x" if a.get("speedup") is not None else "-"
        added = (r["applied"] or ["-"])[0]
        parent = "-" if r["parent"] is None else r["parent"]
        click.echo(f"  {a['n']:>3} {a['kind']:<9} from {parent!s:<3} {added:<26} {a['status']:<9} {speedup}")
