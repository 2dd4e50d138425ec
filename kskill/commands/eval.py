"""`kskill eval SUITE`: kskill on a folder of KernelBench problems, beside eager and torch.compile;
`kskill eval compare A B`: two evaluations side by side."""

from __future__ import annotations

import signal
from pathlib import Path

import click

from kskill.app import App, emit_json, json_option, pass_app


class EvalGroup(click.Group):
    """`kskill eval SUITE ...` runs an evaluation (`eval run`); `kskill eval compare A B` compares two."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=EvalGroup)
def eval_group() -> None:
    """Evaluate kskill on a suite of KernelBench-format problems: `kskill eval SUITE [options]`
    (the `run` command), or compare two result folders: `kskill eval compare A B`."""


def _modes(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    from kskill.eval.runner import COMPILE_MODES

    modes = tuple(m.strip() for v in values for m in v.split(",") if m.strip())
    unknown = sorted(set(modes) - set(COMPILE_MODES))
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: the modes added to the default are {', '.join(COMPILE_MODES)}")
    return tuple(dict.fromkeys(modes))


@eval_group.command("run")
@click.argument("suite", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--level", "levels", type=click.IntRange(min=0), multiple=True, help="Only this level (repeatable).")
@click.option("--filter", "patterns", multiple=True, metavar="GLOB",
              help="Only problems whose id (level1/20_LeakyReLU) or name matches (repeatable).")
@click.option("--sample", type=click.IntRange(min=1), default=None,
              help="A level-stratified random sample of this many problems.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option("--brain", type=click.Choice(["recipes", "llm"]), default=None, help="Passed to kskill optimize.")
@click.option("--iterations", type=click.IntRange(min=1), default=None, help="Passed to kskill optimize.")
@click.option("--time-limit", type=click.FloatRange(min=1), default=None,
              help="Seconds per problem, passed to kskill optimize.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="cpu: correctness only, timings not representative.")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help="Tolerance kskill optimize searches at (default: its per-dtype default, 1e-4 for fp32).")
@click.option("--rtol", type=click.FloatRange(min=0), default=None, help="See --atol.")
@click.option("--compile-modes", multiple=True, callback=_modes, metavar="MODES",
              help="torch.compile modes timed besides the default: max-autotune, reduce-overhead.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Parallel problems (default: one per visible GPU; 1 without a GPU).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Run problems as Ray tasks on this cluster (needs kskill[ray]).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results folder (default: KSKILL_HOME/evals/eval-TIME).")
@click.option("--resume", is_flag=True, help="Continue the evaluation in --out: skip its finished problems.")
@click.option("--stop-after", type=click.FloatRange(min=0), default=None, metavar="S",
              help="Start no problem after S seconds; the rest wait for --resume.")
@click.option("--optimize-option", "optimize_options", multiple=True, metavar="OPT",
              help="Any other kskill optimize option, passed as is (e.g. --optimize-option=--retrieval=lexical).")
@json_option
@pass_app
def run(app: App, suite: Path, levels: tuple[int, ...], patterns: tuple[str, ...], sample: int | None, seed: int,
        brain: str | None, iterations: int | None, time_limit: float | None, device: str, atol: float | None,
        rtol: float | None, compile_modes: tuple[str, ...], workers: int | None, ray_address: str | None,
        out_dir: Path | None, resume: bool, stop_after: float | None, optimize_options: tuple[str, ...],
        as_json: bool) -> None:
    """Run `kskill optimize` on every problem of SUITE, then check and time eager, torch.compile and the
    returned module together; writes results.json, results.csv, report.md and report.html."""
    from kskill.bytecode import warn_missing_bytecode
    from kskill.eval.runner import EvalRequest, default_out, run_eval

    warn_missing_bytecode()  # every problem starts processes that import torch

    if resume and out_dir is None:
        raise click.UsageError("--resume needs --out: the folder of the evaluation to continue")
    request = EvalRequest(
        suite=suite, out=out_dir or default_out(app.settings.home), levels=levels, patterns=patterns, sample=sample,
        seed=seed, resume=resume, workers=workers, ray_address=ray_address, stop_after_s=stop_after, device=device,
        extra_compile_modes=compile_modes,
        optimize={"iterations": iterations, "time_limit_s": time_limit, "brain": brain, "atol": atol, "rtol": rtol,
                  "options": optimize_options})
    outcome = _until_terminated(run_eval, request)
    if as_json:
        emit_json({"out": str(outcome.out), "finished": len(outcome.rows), "selected": outcome.selected,
                   "not_started": outcome.not_started, "summary": outcome.summary})
        return
    overall = outcome.summary["overall"]
    strict, compatible = overall["strict"], overall["compatible"]
    click.echo(f"{len(outcome.rows)} of {outcome.selected} problems finished; results in {outcome.out}")
    click.echo(f"  strict (1e-4):     {strict['correct']}/{strict['problems']} correct, geomean "
               f"{_x(strict['geomean_speedup_eager'])} over eager, {strict['kb_triton_rules_pass']} pass "
               "KernelBench's Triton rules")
    click.echo(f"  compatible (1e-2): {compatible['correct']}/{compatible['problems']} correct, mean "
               f"{_x(compatible['mean_speedup_eager'])} over eager")
    click.echo(f"  report:            {outcome.out / 'report.html'}")
    if outcome.not_started:
        click.echo(f"  {len(outcome.not_started)} not started (--stop-after): run again with --resume --out {outcome.out}")


def _until_terminated(fn, *args):
    """SIGTERM as Ctrl-C: the evaluation stops its running problems instead of leaving them behind."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        return fn(*args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


@eval_group.command("compare")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the comparison to this Markdown file.")
@json_option
def compare(a: Path, b: Path, out_file: Path | None, as_json: bool) -> None:
    """Set two evaluations (result folders or their results.json) side by side."""
    from kskill.eval.results import read_results
    from kskill.eval.suite_report import compare_sections, to_markdown

    first, second = read_results(a), read_results(b)
    sections = compare_sections(first, second, ("A", "B"))
    if as_json:
        emit_json({"a": str(a), "b": str(b), "sections": [
            {"title": s.title, "tables": [t.__dict__ for t in s.blocks if hasattr(t, "headers")]} for s in sections]})
        return
    text = to_markdown(f"kskill eval compare: A = {a}, B = {b}", sections, Path("."))
    if out_file is not None:
        out_file.write_text(text)
    click.echo(text)
