"""Real replies from a real small model, driven through the LLM brain and the LLM extractor,
and what became of each: usable, or which classified failure; and whether anything crashed or hung.

    python -m kskill.eval.llm_replies                    # 50 replies from a local llama.cpp server it starts
    python -m kskill.eval.llm_replies --replies 10 --json replies.json
    python -m kskill.eval.llm_replies --no-review        # skip reviewing the usable candidates

The tasks are the loop's own: seed, optimize (the built-in skill base's playbooks and evidence,
through the Optimizer) and repair tasks over the bundled examples, and extraction of claims
from the skill base's own technique texts, every prompt different (so no reply is a repeat).
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
    """Distinct tasks, cycling kinds and problems so any prefix mixes them."""
    from kskill.agents.brains import Draft, RecipeBrain, RepairTask, SeedTask, TrajectoryStep
    from kskill.agents.optimizer import Optimizer
    from kskill.agents.planner import Plan
    from kskill.agents.problem import load_problem

    recipes, optimizer = RecipeBrain(), Optimizer(brain, store)
    problems = {name: load_problem(_example(name)) for name in EXAMPLES}
    seeds = {name: recipes.seed(SeedTask(p.source, name)) for name, p in problems.items()}
    extract = _extraction_tasks(store, endpoint, home)
    for round_ in range(len(TECHNIQUES) + 2):
        for i, name in enumerate(EXAMPLES):
            problem, parent = problems[name], seeds[name]
            task = SeedTask(problem.source, name)
            if round_ == 0:
                yield "seed", name, (lambda t=task: brain.seed(t))
                continue
            technique = TECHNIQUES[(round_ + i) % len(TECHNIQUES)]
            steps = tuple(TrajectoryStep(k, "optimize" if k else "seed", TECHNIQUES[k % 7] if k else None,
                                         "verified", 1.0 + k / 10) for k in range(round_))
            if (round_ + i) % 3 == 0:
                repair = RepairTask(problem.source, name, Draft(parent.source, parent.techniques), "compile",
                                    f"CompilationError in attempt {round_}", REPAIR_LOG,
                                    ("fp_block_too_large: halve BLOCK_SIZE",), ("reduce_block_size",), steps, 1)
                yield "repair", name, (lambda t=repair: brain.repair(t))
            elif (round_ + i) % 3 == 1:
                yield "extract", name, next(extract)
            else:
                plan = Plan(f"survey-{round_}-{name}", "rule", f"memory_bandwidth matched; {technique} ranked first",
                            technique, "memory_bandwidth", [], [], [], {})
                t = optimizer.task(problem, parent, plan, steps, "passed on cpu (not representative)")
                yield "optimize", name, (lambda t=t: brain.optimize(t))


def _extraction_tasks(store, endpoint, home: Path) -> Iterator[Callable[[], Any]]:
    """Claims extracted from each technique's own description and playbook, one document each."""
    from kskill.graph_schema import ingest_queries, queries
    from kskill.ingest.extract_llm import LLMExtractor
    from kskill.ingest.loaders import load_document

    nodes = store.run(ingest_queries.SKILL_NODES)
    metrics = [r["id"] for r in store.run(ingest_queries.METRIC_NAMES)]
    extractor = LLMExtractor(endpoint, nodes, metrics)
    folder = home / "documents"
    folder.mkdir(parents=True, exist_ok=True)
    for technique in [n["id"] for n in nodes if n["kind"] == "Technique"] * 4:
        props = store.run(queries.NODE_BY_ID, {"id": technique})[0]["props"]
        path = folder / f"{technique}-{len(list(folder.iterdir()))}.md"
        path.write_text(f"# {props.get('name', technique)}\n\n{props.get('description', '')}\n\n"
                        f"{props.get('playbook', '')}\n")
        yield lambda p=path: extractor.extract(load_document(p))


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
