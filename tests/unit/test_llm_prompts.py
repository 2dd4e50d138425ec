"""The LLM brain's prompts, judged on the builder (a small model's answers could not judge them):
the token budget, what each prompt carries and in which order, logs cut from the middle,
byte-identical text for the same state, and the response cache answering a re-run."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from kskill.agents.brains import (
    Draft, LlmBrain, OptimizeTask, PromptBudget, PromptTooLong, RepairTask, TrajectoryStep, prompts)
from kskill.agents.brains.prompts import truncate_middle

PARENT = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
         "        return torch.relu(x)\n"
PROBLEM = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n" \
          "        return torch.relu(x)\n"
STEPS = tuple(TrajectoryStep(n, "optimize" if n > 1 else "seed", f"technique_{n}" if n > 1 else None,
                             "verified" if n % 3 else "correctness", 1.0 + n / 10, "" if n % 3 else f"max abs {n}")
              for n in range(1, 41))


def optimize_task(**changes) -> OptimizeTask:
    fields = dict(
        problem_source=PROBLEM, problem_name="relu", parent=Draft(PARENT, ("kernel_fusion",)),
        technique="vectorized_access", bottleneck="memory_bandwidth",
        case="memory_bandwidth detected (dram_fraction 0.91 >= 0.6); vectorized_access ranked first",
        playbook="Load 16 bytes per thread with tl.load on a contiguous block.",
        evidence=('"Vectorized loads raise achieved bandwidth" (CUDA guide, 9.2.1)',
                  '"float4 loads halve the instructions" (Liger notes, p. 2)'),
        trajectory=STEPS[:3], latest_review="passed on cuda; candidate 0.0210 ms vs reference 0.0290 ms (1.381x)")
    fields.update(changes)
    return OptimizeTask(**fields)


def repair_task(log: str, **changes) -> RepairTask:
    fields = dict(problem_source=PROBLEM, problem_name="relu", draft=Draft(PARENT, ("kernel_fusion",)),
                  failure_class="compile", message="triton.CompilationError at line 12", log=log,
                  remedies=("fp_block_too_large: halve BLOCK_SIZE",), remedy_techniques=("reduce_block_size",),
                  trajectory=STEPS[:2], attempt=1)
    fields.update(changes)
    return RepairTask(**fields)


def user_text(messages: list[dict[str, str]]) -> str:
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_optimize_prompt_holds_plan_evidence_trajectory_review_and_code_in_that_order():
    task = optimize_task()
    text = user_text(prompts.optimize_messages(task))
    order = [task.case, "Technique: vectorized_access", task.playbook, task.evidence[0], task.evidence[1],
             "| 1 | seed |", "| 2 | optimize | technique_2 |", "| 3 | optimize | technique_3 | correctness |",
             task.latest_review, PROBLEM.strip(), "techniques applied: kernel_fusion", PARENT.strip()]
    positions = [text.find(piece) for piece in order]
    assert -1 not in positions, [p for p, i in zip(order, positions) if i == -1]
    assert positions == sorted(positions)


def test_repair_prompt_holds_failure_log_remedies_trajectory_then_code():
    text = user_text(prompts.repair_messages(repair_task("Traceback ...\nCompilationError: BLOCK too large")))
    order = ["Failure (compile): triton.CompilationError", "CompilationError: BLOCK too large",
             "fp_block_too_large: halve BLOCK_SIZE", "| 2 | optimize | technique_2 |", PROBLEM.strip(),
             "repair attempt 1", PARENT.strip()]
    positions = [text.find(piece) for piece in order]
    assert -1 not in positions and positions == sorted(positions)


def test_a_long_log_is_cut_from_the_middle_keeping_its_head_and_tail():
    lines = ["Traceback (most recent call last):", '  File "candidate.py", line 3, in <module>'] + \
            [f"  frame {i}: noise noise noise noise" for i in range(2000)] + \
            ["triton.compiler.errors.CompilationError: at 12:4: BLOCK_SIZE must be a power of 2"]
    log = "\n".join(lines)
    text = user_text(prompts.repair_messages(repair_task(log)))
    assert lines[0] in text and lines[1] in text and lines[-1] in text  # the first frame and the error itself
    assert "frame 1000:" not in text
    assert "characters cut from the middle" in text
    cut = truncate_middle(log, prompts.LOG_CHARS)
    assert len(cut) <= prompts.LOG_CHARS and cut.startswith(lines[0]) and cut.endswith(lines[-1])


def test_truncate_middle_leaves_short_text_alone_and_says_what_it_cut():
    assert truncate_middle("short\ntext", 100) == "short\ntext"
    text = "".join(f"line {i}\n" for i in range(100))
    cut = truncate_middle(text, 200)
    assert len(cut) <= 200 and cut.startswith("line 0\n") and cut.endswith("line 99\n")
    kept = [line for line in cut.splitlines() if line.startswith("line ")]
    assert kept == sorted(kept, key=lambda line: int(line.split()[1]))  # order kept around the cut
    n_cut = 100 - len(kept)
    assert f"[... {n_cut} lines," in cut


@pytest.mark.parametrize("max_tokens", [900, 1500, 3000])
def test_every_prompt_fits_its_token_budget_by_cutting_the_cuttable_sections(max_tokens):
    budget = PromptBudget(max_tokens=max_tokens)
    long_task = optimize_task(trajectory=STEPS, playbook="Use wide loads. " * 300,
                              evidence=tuple(f'"quote {i}: ' + "bandwidth " * 30 + '"' for i in range(20)),
                              latest_review="measured: " + ", ".join(f"m{i}=0.{i}" for i in range(400)))
    for messages in (prompts.optimize_messages(long_task, budget),
                     prompts.repair_messages(repair_task("x = 1\n" * 5000, trajectory=STEPS), budget)):
        assert budget.tokens_of(messages) <= max_tokens
        text = user_text(messages)
        assert PROBLEM.strip() in text and PARENT.strip() in text  # never cut
    if max_tokens >= 1500:  # room enough: the head and the tail of the cut trajectory survive, in order
        text = user_text(prompts.optimize_messages(long_task, budget))
        assert text.index("| 1 | seed |") < text.index("| 40 | optimize | technique_40 |")


def test_a_prompt_within_budget_is_not_cut():
    task = optimize_task()
    assert "cut from the middle" not in user_text(prompts.optimize_messages(task, PromptBudget(max_tokens=24_000)))


def test_code_that_cannot_fit_raises_prompt_too_long():
    huge = PARENT + "\n".join(f"# padding {i}" for i in range(3000))
    with pytest.raises(PromptTooLong, match="the problem and the code alone do not fit"):
        prompts.optimize_messages(optimize_task(parent=Draft(huge, ())), PromptBudget(max_tokens=2000))


def test_the_budget_estimate_errs_high_for_code():
    # about 3.5-4.5 characters a token for real tokenizers on Python; the estimate assumes 3
    assert PromptBudget().tokens(PARENT) >= len(PARENT) / 3.5


def test_the_same_state_gives_byte_identical_prompts():
    first = prompts.optimize_messages(optimize_task(trajectory=STEPS), PromptBudget(max_tokens=1200))
    # rebuilt from scratch: new objects, equal values
    again = prompts.optimize_messages(optimize_task(trajectory=tuple(TrajectoryStep(**vars(s)) for s in STEPS)),
                                      PromptBudget(max_tokens=1200))
    digest = [hashlib.sha256(repr(m).encode()).hexdigest() for m in (first, again)]
    assert first == again and digest[0] == digest[1]
    assert prompts.repair_messages(repair_task("log\n" * 3000)) == prompts.repair_messages(repair_task("log\n" * 3000))


class CountingClient:
    def __init__(self):
        self.calls = 0
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **request):
        self.calls += 1
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=f"```python\n{PARENT}```"),
                                                        finish_reason="stop")],
                               usage=SimpleNamespace(prompt_tokens=700, completion_tokens=60))


def test_a_re_run_of_the_same_state_is_answered_by_the_response_cache(tmp_path):
    first_client, second_client = CountingClient(), CountingClient()
    first = LlmBrain(first_client, "m", cache_dir=tmp_path, prompt_budget=PromptBudget(max_tokens=1200))
    first.optimize(optimize_task(trajectory=STEPS))
    second = LlmBrain(second_client, "m", cache_dir=tmp_path, prompt_budget=PromptBudget(max_tokens=1200))
    draft = second.optimize(optimize_task(trajectory=STEPS))
    assert draft.source == PARENT and first_client.calls == 1 and second_client.calls == 0
    assert second.used.cached == 1 and second.used.tokens == 0
    # a different state is a different prompt: no stale answer from the cache
    second.optimize(optimize_task(trajectory=STEPS[:5]))
    assert second_client.calls == 1
