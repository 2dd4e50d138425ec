"""`kskill optimize PROBLEM.py`: the closed loop on one KernelBench-format problem (or `--resume RUN`)."""

from __future__ import annotations

import time

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kskill.app import RUN_ID, App, FiniteFloat, console, emit_json, gpu_option, json_option, pass_app
from kskill.report import MODEL_FILE, REPORT_FILE, summary, verdict
from kskill.run_state import LoopConfig

if TYPE_CHECKING:
    from kskill.loop import Progress

DEFAULT = LoopConfig()  # the option defaults are the run settings' own
NOT_REPRESENTATIVE = "(timings not representative: no GPU)"


class Display:
    """Each step of the run as one line on stderr, as wide as the terminal; remembers the run's id
    so that an interrupted run can say how to resume it."""

    def __init__(self) -> None:
        self.console = console(stderr=True)
        self.run_id = ""

    def __call__(self, progress: Progress) -> None:
        from rich.table import Table

        self.run_id = progress.run_id or self.run_id
        note = f" {NOT_REPRESENTATIVE}" if progress.representative is False else ""
        line = Table.grid(expand=True, padding=(0, 1))
        line.add_column(no_wrap=True)
        line.add_column(ratio=1, overflow="fold")
        line.add_column(no_wrap=True, justify="right")
        line.add_row(f"[{progress.iteration:>2}/{progress.budget}]", progress.action,
                     f"best {progress.best_speedup:.3f}x (attempt {progress.best_n}){note}")
        self.console.print(line, markup=False, highlight=False)


def resume_hint(run_id: str) -> str:
    """What an interrupted run prints: the command that continues it."""
    if run_id:
        return f"run {run_id} interrupted; continue it with: kskill optimize --resume {run_id}"
    return "interrupted before the first step; `kskill runs list` shows the run to pass to `kskill optimize --resume`"


@click.command()
@click.argument("problem", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help=f"Candidates to review in all: seed, optimizations, repairs.  [default: {DEFAULT.iterations}]")
@click.option("--brain", type=click.Choice(["recipes", "llm"]), default=None,
              help="Who writes code (default: the brain setting, 'recipes').")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, writable=True, path_type=Path), default=None,
              help="Run directory (default: KSKILL_HOME/runs/RUN).")
@click.option("--resume", "resume_id", type=RUN_ID, default=None, metavar="RUN", help="Continue an interrupted run.")
@click.option("--time-limit", type=FiniteFloat(min=1), default=DEFAULT.time_limit_s, show_default=True,
              help="Wall-time budget in seconds; a run overruns it by at most 10 % or 15 s (the re-timing).")
@click.option("--width", type=click.IntRange(min=0), default=DEFAULT.width, show_default=True,
              help="Techniques planned per parent, each with every variant the graph allows (0: all admissible).")
@click.option("--beam", type=click.IntRange(min=0), default=DEFAULT.beam, show_default=True,
              help="Parents expanded per round, best first (0: every verified candidate).")
@click.option("--exhaustive", is_flag=True,
              help="The same search with nothing cut: every admissible technique and variant from every "
                   "verified candidate, no early stop (--width 0 --beam 0 --patience 0).")
@click.option("--trials", type=click.IntRange(min=1), default=DEFAULT.trials, show_default=True,
              help="Correctness trials per candidate.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=DEFAULT.device, show_default=True)
@click.option("--atol", type=FiniteFloat(min=0), default=None, help="Absolute tolerance (default per dtype).")
@click.option("--rtol", type=FiniteFloat(min=0), default=None, help="Relative tolerance (default per dtype).")
@click.option("--patience", type=click.IntRange(min=0), default=DEFAULT.patience, show_default=True,
              help=f"Stop after this many rounds in a row gain less than {100 * (DEFAULT.min_gain - 1):.0f}% "
                   "(0: never).")
@click.option("--retrieval", type=click.Choice(["hybrid", "lexical", "off"]), default=DEFAULT.retrieval, show_default=True,
              help="Ranking for failure-pattern lookup and the Planner's fallback.")
@click.option("--learn", type=click.Choice(["auto", "always", "never"]), default=DEFAULT.learn, show_default=True,
              help="Update the skill base's priors from the outcomes (auto: only from GPU timings).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=DEFAULT.max_tokens, show_default=True,
              help="LLM token budget of the run.")
@click.option("--max-cost", type=FiniteFloat(min=0), default=None, help="LLM cost budget in USD.")
@click.option("--confirm", type=click.IntRange(min=0), default=DEFAULT.confirm, show_default=True,
              help="Fastest candidates timed against the reference again at the end (GPU timings only; "
                   "0: off). The returned model is the fastest of that re-timing.")
@gpu_option
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Where no sandbox works, run the LLM brain's candidates anyway, with your privileges.")
@json_option
@pass_app
def optimize(app: App, problem: Path | None, iterations: int | None, brain: str | None, out_dir: Path | None,
             resume_id: str | None, time_limit: float, width: int, beam: int, exhaustive: bool, trials: int,
             device: str, atol: float | None, rtol: float | None, patience: int, retrieval: str, learn: str,
             max_tokens: int, max_cost: float | None, confirm: int, gpu: Any, unsafe_no_sandbox: bool,
             as_json: bool) -> None:
    """Make PROBLEM (defines Model, get_inputs, get_init_inputs) faster: a best-first search planned from
    the skill graph (seed, wide plans, batched reviews, repairs) until a budget, an early stop, or
    nothing is left to try. Writes model_new.py and report.md.

    PROBLEM is trusted code, like `python PROBLEM`: kskill runs it in its own process to capture
    the model. Candidates run only in the sandbox; see the README for what it isolates."""
    began = time.monotonic()  # the time limit counts from here
    if (problem is None) == (resume_id is None):
        raise click.UsageError("give a PROBLEM file or --resume RUN (not both)")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise click.BadParameter(f"{out_dir} exists and is not a directory", param_hint="--out")
    from kskill.session import resume, start  # the loop imports torch
    from kskill.bytecode import warn_missing_bytecode

    warn_missing_bytecode()  # every review starts processes that import torch
    setup = {"setup: imports": time.monotonic() - began}  # where the clock goes before the loop (run.json)
    store = app.store()
    setup["setup: store"] = time.monotonic() - began - setup["setup: imports"]
    show = Display()
    target = {"gpu": gpu} if gpu is not None else {}  # without --gpu the run detects the GPU present
    try:
        if resume_id:
            state = resume(store, app.settings, resume_id, iterations=iterations, on_progress=show,
                           unsafe_no_sandbox=unsafe_no_sandbox, **target)
        else:
            settings = dict(
                brain=brain or app.settings.brain, time_limit_s=time_limit, trials=trials, device=device, atol=atol,
                rtol=rtol, retrieval=retrieval, learn=learn, max_tokens=max_tokens, max_cost_usd=max_cost,
                confirm=confirm, **({"iterations": iterations} if iterations else {}))
            config = (LoopConfig.exhaustive(**settings) if exhaustive
                      else LoopConfig(**settings, width=width, beam=beam, patience=patience))
            # A reference that cannot run is an error: the first review builds it in the judge and raises
            # ProblemError, and a run that reviews nothing checks it before it returns it.
            state = start(store, app.settings, problem, config, out_dir, began=began, on_progress=show,
                          unsafe_no_sandbox=unsafe_no_sandbox, setup_seconds=setup, **target)
    except KeyboardInterrupt as exc:  # a stop signal: the loop marked the run interrupted
        click.echo(resume_hint(getattr(exc, "run_id", "") or show.run_id or resume_id or ""), err=True)
        raise
    if as_json:
        emit_json(summary(state))
        return
    click.echo(f"run {state.run_id}: {verdict(state)}")
    click.echo(f"  stopped: {state.stop_reason}")
    click.echo(f"  model:   {state.out_dir / MODEL_FILE}")
    click.echo(f"  report:  {state.out_dir / REPORT_FILE}")
    click.echo(f"  explain: kskill audit {state.run_id}")
