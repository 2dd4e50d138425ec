"""`kskill plan PROBLEM.py`: the Planner's decision for a problem and its reasons."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from kskill.app import App, json_option, pass_app
from kskill.agents.observe import gather, read_observations_file
from kskill.agents.planner import Plan, Planner

path_type = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@click.argument("problem", type=path_type)
@click.option("--candidate", type=path_type, help="A ModelNew file: its static features join the observations.")
@click.option("--observations", "observations_file", type=path_type,
              help="JSON object of metric -> value (vocabulary names or raw Nsight Compute names).")
@click.option("--ncu-csv", type=path_type, help="An `ncu --csv --page raw` report of the kernel.")
@click.option("--atol", type=float, default=None, help="Tolerance in force (default per dtype).")
@click.option("--rtol", type=float, default=None)
@click.option("--width", type=click.IntRange(min=0), default=4, show_default=True,
              help="Techniques to choose, each with the variants the graph allows (0: every admissible one).")
@click.option("--include-proposed", is_flag=True, help="Also consider ingested skills not yet reviewed.")
@click.option("--record", is_flag=True, help="Write the Decision subgraph to the graph for auditing.")
@json_option
@pass_app
def plan(app: App, problem: Path, candidate: Path | None, observations_file: Path | None, ncu_csv: Path | None,
         atol: float | None, rtol: float | None, width: int, include_proposed: bool, record: bool,
         as_json: bool) -> None:
    """Which skill applies, and why: bottlenecks matched, technique selected, alternatives rejected."""
    obs = gather(problem.read_text(encoding="utf-8"),
                 candidate.read_text(encoding="utf-8") if candidate else None,
                 measured=read_observations_file(observations_file) if observations_file else None,
                 ncu_csv=ncu_csv.read_text(encoding="utf-8", errors="replace") if ncu_csv else None,
                 atol=atol, rtol=rtol)
    statuses = ("accepted", "proposed") if include_proposed else ("accepted",)
    planner = Planner(app.store(), statuses=statuses)
    decision = planner.plan(obs.to_params(), width=width, derivations=obs.derivations, reasons=obs.unavailable)
    if record:
        planner.record(decision)
    if as_json:
        click.echo(decision.to_json())
        return
    show_plan(decision, obs.unavailable)


def show_plan(decision: Plan, unavailable: dict[str, str]) -> None:
    console = Console()
    style = "green" if decision.selected else "yellow"
    console.print(f"[bold {style}]{decision.selected or 'no technique'}[/] ({decision.tier}): {decision.case}")
    for b in decision.bottlenecks:
        if not b.matched and not any(c.held for c in b.checks):
            continue
        mark = "[green]matched[/]" if b.matched else "[dim]not matched[/]"
        console.print(f"  {mark} {b.id}")
        for c in b.checks:
            verdict = {True: "holds", False: "fails", None: "not observed"}[c.held]
            console.print(f"      {c.text}: {verdict}")
    for c in decision.chosen:
        forms = ", ".join(v.id or "its defaults" for v in c.variants)
        console.print(f"  chosen {c.rank}. {c.technique} via {c.bottleneck} (priority {c.priority}, "
                      f"expected {c.expected_gain}x, prior {c.prior}): {forms}")
    for v in decision.ruled_out:
        console.print(f"  [red]ruled out[/] variant {v.variant}: {v.reason}")
    for r in decision.rejected:
        console.print(f"  [red]rejected[/] {r.technique}: {r.reason}")
    if decision.unavailable:
        console.print(f"  [dim]not observed: {', '.join(decision.unavailable)}[/]")
    reasons = sorted({unavailable[m] for m in decision.unavailable if m in unavailable})
    if reasons:
        console.print(f"  [dim]why: {'; '.join(reasons)}[/]")
    console.print(f"  decision id {decision.id} (observations: {len(decision.observations)})")
