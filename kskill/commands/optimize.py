"""`kskill optimize PROBLEM.py`: the closed loop on one KernelBench-format problem (or `--resume RUN`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kskill.app import App, emit_json, json_option, pass_app
from kskill.report import MODEL_FILE, REPORT_FILE, summary, verdict
from kskill.run_state import LoopConfig

if TYPE_CHECKING:
    from kskill.loop import Progress

DEFAULT = LoopConfig()  # the option defaults are the run settings' own


class FiniteFloat(click.ParamType):
    """A finite number at least `low` (click's FloatRange lets nan and inf through)."""

    name = "number"

    def __init__(self, low: float):
        self.low = low

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number) or number < self.low:
            self.fail(f"{value!r} is not a finite number of at least {self.low:g}", param, ctx)
        return number


def _show(progress: Progress) -> None:
    click.echo(f"[{progress.iteration:>2}/{progress.budget}] {progress.action:<72.72} "
               f"best {progress.best_speedup:.3f}x (attempt {progress.best_n})", err=True)


@click.command()
@click.argument("problem", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help=f"Candidates to review in all: seed, optimizations, repairs.  [default: {DEFAULT.iterations}]")
@click.option("--brain", type=click.Choice(["recipes", "llm"]), default=None,
              help="Who writes code (default: the brain setting, 'recipes').")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run directory (default: KSKILL_HOME/runs/RUN).")
@click.option("--resume", "resume_id", default=None, metavar="RUN", help="Continue an interrupted run.")
@click.option("--time-limit", type=FiniteFloat(1), default=DEFAULT.time_limit_s, show_default=True,
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
@click.option("--atol", type=FiniteFloat(0), default=None, help="Absolute tolerance (default per dtype).")
@click.option("--rtol", type=FiniteFloat(0), default=None, help="Relative tolerance (default per dtype).")
@click.option("--patience", type=click.IntRange(min=0), default=DEFAULT.patience, show_default=True,
              help=f"Stop after this many rounds in a row gain less than {100 * (DEFAULT.min_gain - 1):.0f}% "
                   "(0: never).")
@click.option("--retrieval", type=click.Choice(["hybrid", "lexical", "off"]), default=DEFAULT.retrieval, show_default=True,
              help="Ranking for failure-pattern lookup and the Planner's fallback.")
@click.option("--learn", type=click.Choice(["auto", "always", "never"]), default=DEFAULT.learn, show_default=True,
              help="Update the skill base's priors from the outcomes (auto: only from GPU timings).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=DEFAULT.max_tokens, show_default=True,
              help="LLM token budget of the run.")
@click.option("--max-cost", type=FiniteFloat(0), default=None, help="LLM cost budget in USD.")
@click.option("--confirm", type=click.IntRange(min=0), default=DEFAULT.confirm, show_default=True,
              help="Fastest candidates timed against the reference again at the end (GPU timings only; "
                   "0: off). The returned model is the fastest of that re-timing.")
@json_option
@pass_app
def optimize(app: App, problem: Path | None, iterations: int | None, brain: str | None, out_dir: Path | None,
             resume_id: str | None, time_limit: float, width: int, beam: int, exhaustive: bool, trials: int,
             device: str, atol: float | None, rtol: float | None, patience: int, retrieval: str, learn: str,
             max_tokens: int, max_cost: float | None, confirm: int, as_json: bool) -> None:
    """Make PROBLEM (defines Model, get_inputs, get_init_inputs) faster: seed, review, plan from the
    skill graph, optimize, repair, until a budget or an early stop. Writes model_new.py and report.md."""
    if (problem is None) == (resume_id is None):
        raise click.UsageError("give a PROBLEM file or --resume RUN (not both)")
    from kskill.session import resume, start  # the loop imports torch

    store = app.store()
    if resume_id:
        state = resume(store, app.settings, resume_id, iterations=iterations, on_progress=_show)
    else:
        settings = dict(
            brain=brain or app.settings.brain, time_limit_s=time_limit, trials=trials, device=device, atol=atol,
            rtol=rtol, retrieval=retrieval, learn=learn, max_tokens=max_tokens, max_cost_usd=max_cost,
            confirm=confirm, **({"iterations": iterations} if iterations else {}))
        config = (LoopConfig.exhaustive(**settings) if exhaustive
                  else LoopConfig(**settings, width=width, beam=beam, patience=patience))
        state = start(store, app.settings, problem, config, out_dir, on_progress=_show)
    if as_json:
        emit_json(summary(state))
        return
    click.echo(f"run {state.run_id}: {verdict(state)}")
    click.echo(f"  stopped: {state.stop_reason}")
    click.echo(f"  model:   {state.out_dir / MODEL_FILE}")
    click.echo(f"  report:  {state.out_dir / REPORT_FILE}")
    click.echo(f"  explain: kskill audit {state.run_id}")
