"""What a finished run leaves in its directory: model_new.py (the best verified candidate, or the
reference when nothing beat it), run.json (the summary), report.md with the trajectory table,
and speedup.png (speedup per iteration).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kskill.agents.brains.base import Usage
from kskill.plots import Point, speedup_plot
from kskill.run_state import AttemptRecord, RunState

MODEL_FILE = "model_new.py"
REPORT_FILE = "report.md"
PLOT_FILE = "speedup.png"


def summary(state: RunState) -> dict[str, Any]:
    """The run's outcome as plain data (run.json and `--json`)."""
    best = state.best()
    fastest = next(iter(state.candidates()), None)
    return {
        "run": state.run_id, "problem": state.problem.name, "out_dir": str(state.out_dir),
        "stop_reason": state.stop_reason, "attempts": len(state.attempts) - 1, "reviewed": state.reviewed,
        "beats_reference": best.kind != "reference", "best_attempt": best.n, "best_kind": best.kind,
        "best_speedup": best.final_speedup, "best_techniques": list(best.techniques),
        "confirmed": {a.n: a.confirmed_speedup for a in state.attempts.values() if a.confirmed_speedup is not None},
        "fastest_verified": None if fastest is None else {"attempt": fastest.n, "speedup": fastest.speedup},
        "timings_representative": state.timings_representative, "model_new": str(state.out_dir / MODEL_FILE),
        "report": str(state.out_dir / REPORT_FILE), "usage": asdict(state.total_usage), "learned": state.learned,
        "usage_by_agent": usage_by_agent(state), "review_batches": [{**b, "seconds": round(b["seconds"], 2)} for b in state.batches],
        "confirm_batch": state.confirm_batch, "elapsed_s": round(state.elapsed(), 2),
        "loop_began_s": None if state.loop_began_s is None else round(state.loop_began_s, 2),
        "step_seconds": {k: round(v, 2) for k, v in state.step_seconds.items()},
        "trajectory": [trajectory_row(state, n) for n in sorted(state.attempts)],
        "not_written": state.not_written(),
    }


def verdict(state: RunState) -> str:
    """One sentence: what the run returns and why."""
    best = state.best()
    if best.kind != "reference":
        how = (f" (re-timed at the end; {best.speedup:.3f}x in its review)" if best.confirmed_speedup is not None
               else "" if best.representative else " (timings not representative: no GPU)")
        return f"attempt {best.n} ({', '.join(best.techniques) or best.kind}) is {best.final_speedup:.3f}x the reference{how}"
    fastest = next(iter(state.candidates()), None)
    seen = f"; the fastest verified candidate, attempt {fastest.n}, reached {fastest.speedup:.3f}x" if fastest else ""
    return f"no candidate beat the reference{seen}: {MODEL_FILE} is the reference itself"


def trajectory_row(state: RunState, n: int) -> dict[str, Any]:
    a = state.attempts[n]
    return {"n": a.n, "kind": a.kind, "parent": a.parent, "technique": a.technique, "variant": a.variant,
            "bottleneck": a.bottleneck,
            "status": a.status, "speedup": a.speedup, "confirmed_speedup": a.confirmed_speedup,
            "runtime_ms": a.runtime_ms, "reference_ms": reference_ms(a), "code_hash": a.code_hash,
            "failure": a.failure[:200], "tokens": a.usage.tokens,
            "fallback": a.fallback.record() if a.fallback else None}


def reference_ms(a: AttemptRecord) -> float | None:
    """The reference's median time in the attempt's own review: what its speedup is relative to."""
    timing = a.review.timing if a.review else None
    return timing.reference.median_ms if timing else None


def write_artifacts(state: RunState) -> None:
    best = state.best()
    (state.out_dir / MODEL_FILE).write_text(best.source)
    data = summary(state)
    (state.out_dir / "run.json").write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    plotted = plot_speedups(state, state.out_dir / PLOT_FILE)
    (state.out_dir / REPORT_FILE).write_text(report_markdown(state, data, plotted))


def plot_speedups(state: RunState, path: Path) -> bool:
    """Each reviewed attempt's speedup, labelled with what it added, and the best so far; False when
    nothing was timed."""
    points = [Point(a.n, a.speedup if a.verified else None, a.technique or a.kind)
              for a in sorted(state.attempts.values(), key=lambda a: a.n)
              if a.kind != "reference" and a.status != "pending"]
    title = f"{state.problem.name}: speedup per attempt"
    return bool(speedup_plot(points, title, state.timings_representative, path))


def report_markdown(state: RunState, data: dict[str, Any], plotted: bool) -> str:
    usage = state.total_usage
    lines = [
        f"# kskill run {state.run_id}", "",
        f"- problem: `{state.problem.name}`",
        f"- brain: {state.config.brain}; stopped because {state.stop_reason}",
        f"- result: {verdict(state)}",
        f"- returned: `{MODEL_FILE}` (attempt {data['best_attempt']}, {data['best_kind']})",
        f"- timings representative: {state.timing_note}",
        f"- LLM usage: {usage.tokens} tokens in {usage.calls} call(s) ({usage.cached} cached), ${usage.cost_usd:.4f}",
        f"- skill base: {state.learned}", "",
        "## Trajectory", "",
        "| # | kind | parent | technique | bottleneck | status | speedup | re-timed | runtime ms | reference ms | code |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in data["trajectory"]:
        speedup = f"{row['speedup']:.3f}x" if row["speedup"] is not None else "-"
        confirmed = f"{row['confirmed_speedup']:.3f}x" if row["confirmed_speedup"] is not None else "-"
        runtime = f"{row['runtime_ms']:.4f}" if row["runtime_ms"] is not None else "-"
        reference = f"{row['reference_ms']:.4f}" if row["reference_ms"] is not None else "-"
        parent = "-" if row["parent"] is None else str(row["parent"])
        technique = (row["technique"] or "-") + (f" ({row['variant'].rsplit('.', 1)[-1]})" if row["variant"] else "")
        lines.append(f"| {row['n']} | {row['kind']} | {parent} | {technique} | "
                     f"{row['bottleneck'] or '-'} | {row['status']} | {speedup} | {confirmed} | {runtime} | {reference} | `{row['code_hash']}` |")
    lines += ["", "Each review times the reference again, interleaved with the candidate: `reference ms` is the "
              "time its speedup is relative to, and shows how much the reference's own time moved."]
    failures = [r for r in data["trajectory"] if r["failure"]]
    if failures:
        lines += ["", "## Failures", ""]
        lines += [f"- attempt {r['n']} ({r['status']}): {r['failure']}" for r in failures]
    if usage.calls or usage.failed:
        lines += llm_section(data)
    if plotted:
        lines += ["", "## Speedup per attempt", "", f"![speedup per attempt]({PLOT_FILE})"]
    lines += ["", f"`kskill audit {state.run_id}` explains each decision from the graph.", ""]
    return "\n".join(lines)


# --- the LLM's account ------------------------------------------------------------------------

AGENT_OF_KIND = {"seed": "generator", "optimize": "optimizer", "repair": "repairer"}


def usage_by_agent(state: RunState) -> dict[str, dict[str, Any]]:
    """Tokens, cost and calls of each agent, from the attempts it wrote; `other` holds what no
    attempt carries (calls of a step that ended its branch without a candidate)."""
    per = {agent: Usage() for agent in AGENT_OF_KIND.values()}
    for a in state.attempts.values():
        if a.kind in AGENT_OF_KIND:
            per[AGENT_OF_KIND[a.kind]] += a.usage
    per["other"] = state.total_usage - sum(per.values(), Usage())
    return {agent: {**asdict(u), "tokens": u.tokens} for agent, u in per.items()}


def llm_section(data: dict[str, Any]) -> list[str]:
    lines = ["", "## LLM usage", "",
             "| agent | calls | cached | failed requests | prompt tokens | completion tokens | cost USD |",
             "|---|---|---|---|---|---|---|"]
    for agent, u in data["usage_by_agent"].items():
        lines.append(f"| {agent} | {u['calls']} | {u['cached']} | {u['failed']} | {u['prompt_tokens']} | "
                     f"{u['completion_tokens']} | {u['cost_usd']:.4f} |")
    fallbacks = [r for r in data["trajectory"] if r["fallback"]]
    if fallbacks:
        lines += ["", "Candidates the fallback brain wrote because the LLM's reply or endpoint failed:", ""]
        lines += [f"- attempt {r['n']} ({r['kind']}): {r['fallback']['brain']} wrote it; the LLM failed "
                  f"({r['fallback']['reason']}): {r['fallback']['message'][:160]}" for r in fallbacks]
    return lines
