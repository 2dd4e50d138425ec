"""`kskill plan PROBLEM.py`: the Planner's decision for a problem and its reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kskill.app import App, FiniteFloat, console, gpu_option, json_option, pass_app
from kskill.agents.errors import AgentError
from kskill.agents.observe import gather, read_observations_file
from kskill.agents.planner import Plan, Planner
from kskill.agents.problem import Problem, load_candidate, load_problem

path_type = click.Path(exists=True, dir_okay=False, path_type=Path)
INT64 = range(-(2**63), 2**63)  # what the graph stores can hold as an integer
# Without CUDA, a reference whose inputs, parameters and outputs hold more than this is not run on the CPU.
CPU_RUN_LIMIT = 2**30


@click.command()
@click.argument("problem", type=path_type)
@click.option("--candidate", type=path_type, help="A ModelNew file: its static features join the observations.")
@click.option("--observations", "observations_file", type=path_type,
              help="JSON object of metric -> value (vocabulary names or raw Nsight Compute names).")
@click.option("--ncu-csv", type=path_type, help="An `ncu --csv --page raw` report of the kernel.")
@click.option("--atol", type=FiniteFloat(min=0), default=None, help="Tolerance in force (default per dtype).")
@click.option("--rtol", type=FiniteFloat(min=0), default=None)
@click.option("--width", type=click.IntRange(min=0), default=4, show_default=True,
              help="Techniques to choose, each with the variants the graph allows (0: every admissible one).")
@gpu_option
@click.option("--include-proposed", is_flag=True, help="Also consider ingested skills not yet reviewed.")
@click.option("--record", is_flag=True, help="Write the Decision subgraph to the graph for auditing.")
@json_option
@pass_app
def plan(app: App, problem: Path, candidate: Path | None, observations_file: Path | None, ncu_csv: Path | None,
         atol: float | None, rtol: float | None, width: int, gpu: Any, include_proposed: bool, record: bool,
         as_json: bool) -> None:
    """Which skills apply, and why: bottlenecks matched, techniques chosen with their variants,
    alternatives rejected. The problem is checked first as `optimize` checks it: its reference must
    run on its own inputs (on a machine without CUDA, not when the plan is for another GPU or the
    problem is too large for its CPU: then the plan reads its code only, and says so). PROBLEM is trusted
    code, like `python PROBLEM`: kskill runs it to capture the model's graph. CANDIDATE is only read,
    never run."""
    with console(stderr=True).status("reading the inputs") as status:
        measured = _measured(observations_file) if observations_file else None
        candidate_source = _candidate_source(candidate) if candidate else None
        report = _text(ncu_csv) if ncu_csv else None
        status.update("running the reference once in the sandbox")
        reference, not_run = _checked(problem, planned_for=gpu)
        if not_run:
            click.echo(f"note: {not_run}", err=True)
        status.update("reading the code (torch.fx capture and static features)")
        obs = gather(reference.source, candidate_source, measured=measured, ncu_csv=report, atol=atol, rtol=rtol,
                     gpu=gpu or "detect")
        status.update("opening the skill graph")
        statuses = ("accepted", "proposed") if include_proposed else ("accepted",)
        planner = Planner(app.store(), statuses=statuses)
        status.update("evaluating the conditions in the skill graph")
        decision = planner.plan(obs.to_params(), width=width, derivations=obs.derivations, reasons=obs.unavailable)
        if record:
            planner.record(decision)
    if as_json:
        click.echo(decision.to_json())
        return
    show_plan(decision, obs.unavailable)


def _checked(path: Path, planned_for: Any = None) -> tuple[Problem, str]:
    """The problem, once its reference ran as `optimize` runs it. On a machine without CUDA it is not
    run when the plan is for another machine's GPU (`--gpu`: this CPU's run would say nothing of
    that GPU's) or when it is too large for the CPU (sizes from the meta device); the reason is
    returned beside it."""
    import torch

    from kskill.agents.features import reference_features
    from kskill.problem_check import runnable_problem

    if not torch.cuda.is_available():
        problem = load_problem(path)
        if planned_for is not None:
            return problem, (f"the reference was not run: the plan is for {planned_for.name} and this machine "
                             "has no CUDA; it reads the code only (`kskill optimize` runs it)")
        size = reference_features(problem.source).values.get("bytes_moved")
        if isinstance(size, int) and size > CPU_RUN_LIMIT:
            return problem, (f"the reference was not run: its inputs, parameters and outputs hold {size / 2**30:.1f} "
                             "GiB, too much for this machine's CPU without CUDA; the plan reads its code only")
    return runnable_problem(path), ""


def _candidate_source(path: Path) -> str:
    candidate = load_candidate(path)
    if candidate.error:
        raise AgentError(f"candidate {path}: {candidate.error}")
    return candidate.source


def _measured(path: Path) -> dict:
    """The observations file, with every integer within what the graph can store."""
    data = read_observations_file(path)
    for metric, value in data.items():
        if isinstance(value, int) and not isinstance(value, bool) and value not in INT64:
            raise AgentError(f"{path}: {metric} = {value} is out of range (a metric's integer fits in 64 bits)")
    return data


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise AgentError(f"cannot read {path}: {exc.strerror}") from exc


def show_plan(decision: Plan, unavailable: dict[str, str]) -> None:
    out = console()
    style = "green" if decision.selected else "yellow"
    out.print(f"[bold {style}]{decision.selected or 'no technique'}[/] ({decision.tier}): {decision.case}")
    for b in decision.bottlenecks:
        if not b.matched and not any(c.held for c in b.checks):
            continue
        mark = "[green]matched[/]" if b.matched else "[dim]not matched[/]"
        out.print(f"  {mark} {b.id}")
        for c in b.checks:
            verdict = {True: "holds", False: "fails", None: "not observed"}[c.held]
            out.print(f"      {c.text}: {verdict}")
    for c in decision.chosen:
        forms = ", ".join(v.id or "its defaults" for v in c.variants)
        out.print(f"  chosen {c.rank}. {c.technique} via {c.bottleneck} (priority {c.priority}, "
                  f"expected {c.expected_gain}x, prior {c.prior}): {forms}")
    for v in decision.ruled_out:
        out.print(f"  [red]ruled out[/] variant {v.variant}: {v.reason}")
    for r in decision.rejected:
        out.print(f"  [red]rejected[/] {r.technique}: {r.reason}")
    if decision.unavailable:
        out.print(f"  [dim]not observed: {', '.join(decision.unavailable)}[/]")
    reasons = sorted({unavailable[m] for m in decision.unavailable if m in unavailable})
    if reasons:
        out.print(f"  [dim]why: {'; '.join(reasons)}[/]")
    out.print(f"  decision id {decision.id} (observations: {len(decision.observations)})")
