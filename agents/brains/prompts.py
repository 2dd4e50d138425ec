"""Prompt templates of the LLM brain: one per task, each a list of chat messages.

Every prompt carries what the graph decided and why: the Planner's case (bottleneck and
technique), the technique's playbook and evidence quotes, the trajectory so far, and the
latest review with its errors. The model writes code; it does not choose what to do.
"""

from __future__ import annotations

from kskill.agents.brains.base import OptimizeTask, RepairTask, SeedTask, TrajectoryStep

SYSTEM = """You write fast, correct GPU kernels for PyTorch modules.
You are given a KernelBench problem: a file defining `Model`, `get_inputs()` and `get_init_inputs()`.
Answer with ONE complete Python file in a single ```python block that defines `class ModelNew(nn.Module)`
with the same constructor and forward signatures as `Model` and the same outputs within tolerance.
Use Triton kernels (or torch.utils.cpp_extension.load_inline CUDA) for the work; plain PyTorch for glue.
Never use torch.compile, threads, processes, streams other than the current one, timers, try/except
fallbacks to the reference, or anything that reads the reference's outputs: such candidates are rejected.
Keep the module's parameters (same names and shapes) so the harness can copy the reference's weights."""

SEED = """Write a first correct candidate for this problem. Correctness first; keep it simple.

Problem `{name}`:
```python
{problem}
```"""

OPTIMIZE = """Apply ONE technique to the parent candidate below, chosen by the skill graph.

Decision: {case}
Bottleneck: {bottleneck}
Technique: {technique}

Playbook for {technique}:
{playbook}

Evidence from the literature:
{evidence}

Trajectory so far:
{trajectory}

Latest review of the parent:
{review}

Problem `{name}`:
```python
{problem}
```

Parent candidate (techniques applied: {applied}):
```python
{parent}
```"""

REPAIR = """The candidate below failed review. Fix the failure without giving up the optimization.

Failure ({failure_class}): {message}

Log (tail):
```
{log}
```

What usually fixes this:
{remedies}

Trajectory so far:
{trajectory}

Problem `{name}`:
```python
{problem}
```

Failing candidate (repair attempt {attempt}):
```python
{code}
```"""


def trajectory_table(steps: tuple[TrajectoryStep, ...]) -> str:
    if not steps:
        return "(none yet)"
    rows = ["| # | kind | technique | status | speedup | failure |", "|---|---|---|---|---|---|"]
    for s in steps:
        speedup = f"{s.speedup:.3f}x" if s.speedup is not None else "-"
        rows.append(f"| {s.n} | {s.kind} | {s.technique or '-'} | {s.status} | {speedup} | {s.failure[:120]} |")
    return "\n".join(rows)


def _bullets(items: tuple[str, ...], empty: str) -> str:
    return "\n".join(f"- {i}" for i in items) if items else empty


def seed_messages(task: SeedTask) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": SEED.format(name=task.problem_name, problem=task.problem_source)}]


def optimize_messages(task: OptimizeTask) -> list[dict[str, str]]:
    user = OPTIMIZE.format(
        case=task.case, bottleneck=task.bottleneck or "(retrieval fallback: no rule matched)",
        technique=task.technique, playbook=task.playbook or "(no playbook recorded)",
        evidence=_bullets(task.evidence, "(no evidence recorded)"), trajectory=trajectory_table(task.trajectory),
        review=task.latest_review or "(none)", name=task.problem_name, problem=task.problem_source,
        applied=", ".join(task.parent.techniques) or "none", parent=task.parent.source)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def repair_messages(task: RepairTask) -> list[dict[str, str]]:
    user = REPAIR.format(
        failure_class=task.failure_class, message=task.message, log=task.log_tail or "(empty)",
        remedies=_bullets(task.remedies, "(no known failure pattern matched)"),
        trajectory=trajectory_table(task.trajectory), name=task.problem_name, problem=task.problem_source,
        attempt=task.attempt, code=task.draft.source)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
