"""`kskill review PROBLEM CANDIDATE`: the Reviewer on its own."""

from __future__ import annotations

import click

from kskill.agents.reviewer import Review, ReviewOptions, review as run_review
from kskill.app import App, json_option, pass_app
from kskill.bytecode import warn_missing_bytecode


@click.command()
@click.argument("problem", type=click.Path(exists=True, dir_okay=False))
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False))
@click.option("--trials", type=click.IntRange(min=1), default=5, show_default=True,
              help="Correctness trials on fresh random inputs.")
@click.option("--atol", type=click.FloatRange(min=0), default=None, help="Absolute tolerance (default per dtype).")
@click.option("--rtol", type=click.FloatRange(min=0), default=None, help="Relative tolerance (default per dtype).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Wall-clock limit in seconds for the candidate's run.")
@click.option("--compile-reference", is_flag=True, help="Also time torch.compile of the reference.")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option("--no-ncu", is_flag=True, help="Skip Nsight Compute (torch.profiler still runs).")
@click.option("--no-input-variants", is_flag=True,
              help="Check on the problem's own inputs only, not also on mixed-sign and scaled ones.")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Where no sandbox works, run CANDIDATE anyway, with your privileges.")
@json_option
@pass_app
def review(app: App, problem: str, candidate: str, trials: int, atol: float | None, rtol: float | None, device: str,
           timeout_s: float, compile_reference: bool, no_timing: bool, no_ncu: bool, no_input_variants: bool,
           unsafe_no_sandbox: bool, as_json: bool) -> None:
    """Check, time and profile CANDIDATE (defines ModelNew) against PROBLEM (defines Model,
    get_inputs, get_init_inputs) in a sandboxed subprocess. Exits 0 when the candidate passes, 1 when not."""
    options = ReviewOptions(trials=trials, atol=atol, rtol=rtol, device=device, timeout_s=timeout_s,
                            compile_reference=compile_reference, timing=not no_timing, ncu=not no_ncu,
                            input_variants=not no_input_variants, unsandboxed_ok=unsafe_no_sandbox,
                            hidden_paths=[str(app.settings.home)],
                            profile_cache_dir=str(app.settings.home / "profile-cache"))
    warn_missing_bytecode()  # the review's processes import torch
    result = run_review(problem, candidate, options)
    click.echo(result.to_json() if as_json else summary(result))
    if not result.passed:
        raise click.exceptions.Exit(1)


def summary(result: Review) -> str:
    """A few lines for a person: verdict, errors, timing, flags, what could not be measured."""
    verdict = "PASS" if result.passed else f"FAIL ({result.failure_class})"
    lines = [f"{verdict}  problem={result.problem}  candidate={result.candidate_hash}  device={result.device}"]
    if result.failure_message:
        lines.append(f"  {result.failure_phase}: {result.failure_message}")
    if result.correctness:
        c = result.correctness
        lines.append(f"  correctness: {c.trials_passed}/{c.trials_run} trials, max abs error {c.max_abs_error:.3g}, "
                     f"max rel error {c.max_rel_error:.3g}")
    if result.timing:
        t = result.timing
        note = "" if t.representative else "  (not representative)"
        lines.append(f"  timing: reference {t.reference.median_ms:.4f} ms, candidate {t.candidate.median_ms:.4f} ms, "
                     f"speedup {t.speedup:.2f}x{note}")
        if t.compiled_reference:
            lines.append(f"  torch.compile reference {t.compiled_reference.median_ms:.4f} ms, "
                         f"speedup vs compile {t.speedup_vs_compiled:.2f}x")
    for flag in result.flags:
        where = f" (line {flag.line})" if flag.line else ""
        lines.append(f"  {flag.severity}: {flag.code}{where}: {flag.message}")
    if result.observations:
        lines.append(f"  observations: {len(result.observations)} measured, {len(result.unavailable)} unavailable")
    if result.isolation and result.isolation.sandbox == "none":
        lines.append(f"  note: no sandbox: the candidate ran with your privileges ({result.isolation.sandbox_note})")
    elif result.isolation and not result.isolation.network_isolated:
        lines.append(f"  note: {result.isolation.network_note}")
    if not result.passed and result.log:
        lines.append("  log (tail):")
        lines.extend("    " + line for line in result.log.splitlines()[-15:])
    return "\n".join(lines)
