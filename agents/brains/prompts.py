"""Prompt templates of the LLM brain: one per task, each a list of chat messages.

Every prompt carries what the graph decided and why, in this order: the Planner's case
(bottleneck and technique), the technique's playbook and evidence quotes, the trajectory so
far, the latest review or failure with its log, then the problem and the code to change.
The model writes code; it does not choose what to do.

Each prompt has a token budget (PromptBudget). Without the model's tokenizer the count is
an estimate that errs high. When a prompt is over, the sections that can lose text (log,
review, trajectory, evidence, playbook) lose it from the middle, each in proportion to its
length, keeping their heads and tails; the problem and the code are never cut, and a prompt that still does
not fit raises PromptTooLong. The same task gives byte-identical messages (the response
cache's key depends on it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kskill.agents.brains.base import OptimizeTask, PromptTooLong, RepairTask, SeedTask, TrajectoryStep

LOG_CHARS = 6000  # a review log's share of any prompt, cut from the middle
MIN_SECTION_CHARS = 160  # what a cut section keeps at least (head and tail)

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

Log:
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

# Sections that may lose text when a prompt is over budget.
CUT_ORDER = ("log", "review", "trajectory", "evidence", "playbook")


@dataclass(frozen=True)
class PromptBudget:
    """The most tokens one prompt (system message included) may take.

    `chars_per_token` is deliberately low: BPE and SentencePiece tokenizers give about 3.5-4.5
    characters a token on English and Python, so the estimate errs high and a prompt that
    fits here fits the model's context.
    """

    max_tokens: int = 24_000
    chars_per_token: float = 3.0

    def tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def tokens_of(self, messages: list[dict[str, str]]) -> int:
        return sum(self.tokens(m["content"]) for m in messages)


def truncate_middle(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its head and tail around one marker line saying what was cut.
    Cuts fall on line boundaries where the lines allow, so a traceback keeps its first and last frames."""
    if len(text) <= max_chars:
        return text
    marker_room = 64
    keep = max(max_chars - marker_room, 2)
    head, tail = text[:keep // 2], text[len(text) - (keep - keep // 2):]
    if "\n" in head[1:]:
        head = head[:head.rindex("\n") + 1]
    if "\n" in tail[:-1]:
        tail = tail[tail.index("\n") + 1:]
    cut = text[len(head):len(text) - len(tail)]
    lines = cut.count("\n") + (0 if cut.endswith("\n") else 1)
    return f"{head}[... {lines} lines, {len(cut)} characters cut from the middle ...]\n{tail}"


def trajectory_table(steps: tuple[TrajectoryStep, ...]) -> str:
    if not steps:
        return "(none yet)"
    rows = ["| # | kind | technique | status | speedup | failure |", "|---|---|---|---|---|---|"]
    for s in steps:
        speedup = f"{s.speedup:.3f}x" if s.speedup is not None else "-"
        failure = " ".join(s.failure.split())[:120].replace("|", "/")
        rows.append(f"| {s.n} | {s.kind} | {s.technique or '-'} | {s.status} | {speedup} | {failure} |")
    return "\n".join(rows)


def _bullets(items: tuple[str, ...], empty: str) -> str:
    return "\n".join(f"- {i}" for i in items) if items else empty


def seed_messages(task: SeedTask, budget: PromptBudget = PromptBudget()) -> list[dict[str, str]]:
    return _fit("seed", SEED, {"name": task.problem_name, "problem": task.problem_source}, budget)


def optimize_messages(task: OptimizeTask, budget: PromptBudget = PromptBudget()) -> list[dict[str, str]]:
    fields = {
        "case": task.case, "bottleneck": task.bottleneck or "(retrieval fallback: no rule matched)",
        "technique": task.technique, "playbook": task.playbook or "(no playbook recorded)",
        "evidence": _bullets(task.evidence, "(no evidence recorded)"), "trajectory": trajectory_table(task.trajectory),
        "review": task.latest_review or "(none)", "name": task.problem_name, "problem": task.problem_source,
        "applied": ", ".join(task.parent.techniques) or "none", "parent": task.parent.source}
    return _fit("optimize", OPTIMIZE, fields, budget)


def repair_messages(task: RepairTask, budget: PromptBudget = PromptBudget()) -> list[dict[str, str]]:
    fields = {
        "failure_class": task.failure_class, "message": task.message,
        "log": truncate_middle(task.log, LOG_CHARS) if task.log else "(empty)",
        "remedies": _bullets(task.remedies, "(no known failure pattern matched)"),
        "trajectory": trajectory_table(task.trajectory), "name": task.problem_name, "problem": task.problem_source,
        "attempt": str(task.attempt), "code": task.draft.source}
    return _fit("repair", REPAIR, fields, budget)


def _fit(kind: str, template: str, fields: dict[str, str], budget: PromptBudget) -> list[dict[str, str]]:
    """The messages of `template` filled with `fields`, cut to `budget` (see the module's docstring)."""
    fields = dict(fields)

    def messages() -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": template.format(**fields)}]

    full = {name: fields[name] for name in CUT_ORDER if name in fields}
    for _ in range(3):  # a cut adds a marker line; a second pass absorbs it
        over_chars = math.ceil((budget.tokens_of(messages()) - budget.max_tokens) * budget.chars_per_token)
        if over_chars <= 0:
            return messages()
        spare = {name: len(fields[name]) - MIN_SECTION_CHARS for name in full if len(fields[name]) > MIN_SECTION_CHARS}
        total = sum(spare.values())
        for name, room in spare.items():  # each cuttable section gives up its share of the excess
            share = math.ceil(over_chars * room / total) if total > over_chars else room
            fields[name] = truncate_middle(full[name], max(MIN_SECTION_CHARS, len(fields[name]) - share))
    over = budget.tokens_of(messages()) - budget.max_tokens
    if over > 0:
        raise PromptTooLong(f"the {kind} prompt needs about {budget.max_tokens + over} tokens, over its budget of "
                            f"{budget.max_tokens} even with its log, review, trajectory, evidence and playbook cut: "
                            "the problem and the code alone do not fit")
    return messages()
