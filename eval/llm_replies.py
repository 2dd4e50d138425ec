"""Real replies from a real small model, driven through the LLM brain and the LLM extractor,
and what became of each: usable, or which classified failure; and whether anything crashed or hung.

    python -m kskill.eval.llm_replies                    # 50 replies from a local llama.cpp server it starts
    python -m kskill.eval.llm_replies --replies 10 --json replies.json
    python -m kskill.eval.llm_replies --no-review        # skip reviewing the usable candidates

The tasks are the loop's own, taken in turn: seed, optimize (the built-in skill base's playbooks
and evidence, through the Optimizer, on the recipe brain's seed) and repair tasks over the
bundled examples, and extraction of claims from each technique's own text, every prompt
different (so no reply is a repeat).
The brain runs without its fallback here, so every failed reply shows as a failure. A usable
candidate is then reviewed on the CPU (Triton's interpreter), where the Reviewer classifies it.
A crash is any exception that is not a classified failure; a hang is a reply that took longer
than --hang-s (the client's timeout bounds every request, so a hang would mean a bug there).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPAIR_LOG = """Traceback (most recent call last):
  File "candidate.py", line 41, in forward
    _fused_kernel[grid](x, y, out, n, BLOCK_SIZE=8192)
triton.compiler.errors.CompilationError: at 12:8:
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        ^
ValueError: BLOCK_SIZE 8192 exceeds the shared memory of this device (out of resources)"""


@dataclass
class Outcome:
    n: int
    task: str  # seed | optimize | repair | extract
    problem: str
    outcome: str  # usable | a failure reason | crash:<type>
    seconds: float
    review: str = ""  # for usable candidates: verified or the Reviewer's failure class
    detail: str = ""


def survey(server_env: dict[str, str], home: Path, replies: int, *, review: bool = True, hang_s: float = 300.0,
           reply_tokens: int = 384, context_tokens: int = 4096,
           on_outcome: Callable[[Outcome], None] = lambda o: None) -> list[Outcome]:
    """`replies` real replies, each through the path the product uses, classified."""
    from kskill.agents.brains import ChatEndpoint, LlmBrain, PromptBudget, RetryPolicy, open_client
    from kskill.graph_schema.skillbase import ensure_builtin
    from kskill.graph_schema.store import open_store

    client = open_client(server_env["OPENAI_BASE_URL"], server_env["OPENAI_API_KEY"], timeout_s=hang_s / 2)
    model = server_env["KSKILL_LLM_MODEL"]
    retry = RetryPolicy(attempts=2, base_delay_s=1.0)
    brain = LlmBrain(client, model, retry=retry, max_completion_tokens=reply_tokens,
                     prompt_budget=PromptBudget(max_tokens=context_tokens - reply_tokens))
    endpoint = ChatEndpoint(client, model, retry=retry, max_reply_tokens=reply_tokens)
    store = open_store("embedded", home)
    try:
        ensure_builtin(store)
        outcomes = []
        for n, (kind, name, run) in enumerate(_tasks(store, brain, endpoint, home)):
            if n >= replies:
                break
            outcome = _one(n, kind, name, run, hang_s, review)
            outcomes.append(outcome)
            on_outcome(outcome)
        return outcomes
    finally:
        store.close()


def _one(n: int, kind: str, name: str, run: Callable[[], Any], hang_s: float, review: bool) -> Outcome:
    from kskill.agents.brains import BrainError
    from kskill.ingest.extract_llm import AnswerError

    began = time.monotonic()
    result: Any = None
    try:
        result = run()
        outcome, detail = "usable", ""
    except (BrainError, AnswerError) as exc:  # the classified failures
        outcome, detail = getattr(exc, "reason", exc.__class__.__name__), str(exc)[:200]
    except Exception as exc:  # anything else is a crash of ours
        outcome, detail = f"crash:{type(exc).__name__}", str(exc)[:200]
    seconds = time.monotonic() - began
    if seconds > hang_s:
        outcome = f"hang:{outcome}"
    record = Outcome(n, kind, name, outcome, round(seconds, 2), detail=detail)
    if kind == "extract" and outcome == "usable":
        record.detail = f"{len(result)} claim(s) kept"
    elif outcome == "usable" and review:
        record.review = _review(name, result.source)
    return record


def _review(name: str, source: str) -> str:
    from kskill.agents.reviewer import ReviewOptions
    from kskill.agents.reviewer import review as review_candidate

    result = review_candidate(_example(name), source, ReviewOptions(trials=1, timing=False, device="cpu",
                                                                   timeout_s=120))
    return "verified" if result.passed else str(result.failure_class)


def _example(name: str) -> Path:
    import kskill

    return Path(kskill.__file__).parent / "examples" / f"{name}.py"


EXAMPLES = ("pointwise_chain", "softmax_rows", "layernorm_residual", "gemm_bias_gelu", "mlp_small",
            "diag_scale_matmul")
TECHNIQUES = ("kernel_fusion", "vectorized_access", "autotune_launch", "online_softmax", "fused_normalization",
              "gemm_epilogue_fusion", "algebraic_simplification")


def _tasks(store, brain, endpoint, home: Path) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """Distinct tasks, the four kinds taken in turn so that any prefix mixes them."""
    from kskill.agents.brains import RecipeBrain, SeedTask
    from kskill.agents.optimizer import Optimizer
    from kskill.agents.problem import load_problem

    problems = {name: load_problem(_example(name)) for name in EXAMPLES}
    recipes = RecipeBrain()
    seeds = {name: recipes.seed(SeedTask(p.source, name)) for name, p in problems.items()}
    kinds = [_seed_tasks(brain, problems), _optimize_tasks(Optimizer(brain, store), brain, problems, seeds),
             _repair_tasks(brain, problems, seeds), _extraction_tasks(store, endpoint, home)]
    while kinds:
        for kind in list(kinds):
            task = next(kind, None)
            if task is None:
                kinds.remove(kind)
            else:
                yield task


def _seed_tasks(brain, problems) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    from kskill.agents.brains import SeedTask

    for name, problem in problems.items():
        yield "seed", name, (lambda t=SeedTask(problem.source, name): brain.seed(t))


def _history(length: int) -> tuple:
    from kskill.agents.brains import TrajectoryStep

    return tuple(TrajectoryStep(k, "optimize" if k else "seed", TECHNIQUES[k % len(TECHNIQUES)] if k else None,
                                "verified", 1.0 + k / 10) for k in range(length))


def _optimize_tasks(optimizer, brain, problems, seeds) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    from kskill.agents.planner import Choice, Plan, VariantChoice

    for round_, technique in enumerate(TECHNIQUES):
        choice = Choice(technique, "memory_bandwidth", rank=1, priority=50, expected_gain=1.5, prior=0.5,
                        variants=[VariantChoice(None, technique, {}, 50)])
        for name, problem in problems.items():
            plan = Plan(f"survey-{technique}-{name}", "rule", f"memory_bandwidth matched; {technique} ranked first",
                        technique, "memory_bandwidth", [], [], [], {}, chosen=[choice])
            task = optimizer.task(problem, seeds[name], plan, choice, choice.variants[0], _history(round_ + 1),
                                  "passed on cpu (not representative)")
            yield "optimize", name, (lambda t=task: brain.optimize(t))


def _repair_tasks(brain, problems, seeds) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    from kskill.agents.brains import Draft, RepairTask

    for attempt in (1, 2):
        for name, problem in problems.items():
            task = RepairTask(problem.source, name, Draft(seeds[name].source, seeds[name].techniques), "compile",
                              "CompilationError: BLOCK_SIZE 8192 is out of resources", REPAIR_LOG,
                              ("fp_block_too_large: halve BLOCK_SIZE",), ("reduce_block_size",), _history(attempt),
                              attempt)
            yield "repair", name, (lambda t=task: brain.repair(t))


def _extraction_tasks(store, endpoint, home: Path) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """Claims extracted from each technique's own description and playbook, one document each."""
    from kskill.graph_schema import ingest_queries, queries
    from kskill.ingest.extract_llm import LLMExtractor
    from kskill.ingest.loaders import load_document

    nodes = store.run(ingest_queries.SKILL_NODES)
    metrics = [r["id"] for r in store.run(ingest_queries.METRIC_NAMES)]
    extractor = LLMExtractor(endpoint, nodes, metrics)
    folder = home / "documents"
    folder.mkdir(parents=True, exist_ok=True)
    for technique in [n["id"] for n in nodes if n["kind"] == "Technique"]:
        props = store.run(queries.NODE_BY_ID, {"id": technique})[0]["props"]
        path = folder / f"{technique}.md"
        path.write_text(f"# {props.get('name', technique)}\n\n{props.get('description', '')}\n\n"
                        f"{props.get('playbook', '')}\n")
        yield "extract", technique, (lambda p=path: extractor.extract(load_document(p)))


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    counts = Counter(o.outcome for o in outcomes)
    reviews = Counter(o.review for o in outcomes if o.review)
    seconds = sorted(o.seconds for o in outcomes)
    return {"replies": len(outcomes), "outcomes": dict(sorted(counts.items())), "reviews": dict(sorted(reviews.items())),
            "crashes": sum(v for k, v in counts.items() if k.startswith("crash:")),
            "hangs": sum(v for k, v in counts.items() if k.startswith("hang:")),
            "by_task": {k: dict(Counter(o.outcome for o in outcomes if o.task == k)) for k in
                        sorted({o.task for o in outcomes})},
            "seconds_median": seconds[len(seconds) // 2] if seconds else None,
            "seconds_max": seconds[-1] if seconds else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=50)
    parser.add_argument("--no-review", action="store_true", help="do not review the usable candidates")
    parser.add_argument("--reply-tokens", type=int, default=384)
    parser.add_argument("--json", type=Path, default=None, help="write every outcome and the summary here")
    args = parser.parse_args(argv)
    from kskill.eval.llm_server import start_server

    with tempfile.TemporaryDirectory(prefix="kskill-llm-survey-") as tmp:
        server = start_server(Path(tmp) / "server")
        print(f"llama-server healthy in {server.start_seconds:.1f} s", flush=True)
        try:
            outcomes = survey(server.environment(), Path(tmp) / "home", args.replies, review=not args.no_review,
                              reply_tokens=args.reply_tokens, context_tokens=server.context_tokens,
                              on_outcome=lambda o: print(f"{o.n:3d} {o.task:8s} {o.problem:20s} {o.outcome:14s} "
                                                         f"{o.seconds:6.1f} s {o.review}", flush=True))
        finally:
            server.stop()
    summary = summarise(outcomes)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "outcomes": [asdict(o) for o in outcomes]}, indent=2))
    return 1 if summary["crashes"] or summary["hangs"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
