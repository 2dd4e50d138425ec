"""Starting and resuming optimization runs: settings in, the agents wired into Deps, the loop run.

This is where settings meet the agents: the brain (recipes, or llm with its endpoint, budget
and cache under KSKILL_HOME), retrieval for the Diagnoser and the Planner's fallback, and the
Reviewer, as the batch review the loop calls, with its options bound.
"""

from __future__ import annotations

import functools
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kskill.agents.brains import Brain, RecipeBrain
from kskill.agents.diagnoser import Diagnoser
from kskill.agents.generator import Generator
from kskill.agents.optimizer import Optimizer
from kskill.agents.planner import Planner
from kskill.agents.problem import Problem, code_hash, load_problem
from kskill.agents.repairer import Repairer
from kskill.agents.reviewer import Review, ReviewOptions, close_warm, require_isolation, review_batch
from kskill.agents.reviewer.api import resolve_device
from kskill.agents.reviewer.batch import start_warm
from kskill.config import Settings
from kskill.graph_schema.store import GraphStore
from kskill.loop import BUDGET_PHASE, Deps, Progress, ReviewBatchFn, run_loop
from kskill.run_state import LoopConfig, RunError, RunState, load_state
from kskill.trajectory import Trajectory


def new_run_id(problem_name: str) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", problem_name.lower()).strip("-")[:40] or "problem"
    return f"run-{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def make_brain(settings: Settings, config: LoopConfig) -> Brain:
    if config.brain == "recipes":
        return RecipeBrain(rtol=config.rtol)
    from kskill.llm_settings import llm_brain

    return llm_brain(settings, config.max_tokens, config.max_cost_usd)


def _retrieval(store: GraphStore, settings: Settings, via: str) -> Callable[[], Any] | None:
    """The Retriever for the Diagnoser and the Planner's fallback, opened at its first search (the
    embedding model takes seconds to load, and many runs never search); None when retrieval is off."""
    if via == "off":
        return None
    if via == "hybrid" and settings.embedding_model:
        from kskill.retrieval.embedder import model_folder

        model_folder(settings.embedding_model)  # a model asked for by name must be there before the run starts

    @functools.cache
    def opened() -> Any:
        from kskill.retrieval import retriever_for

        return retriever_for(store, settings.home, settings.embedding_model or None,
                             **({} if via == "hybrid" else {"embedder": None}))

    return opened


ReviewOne = Callable[[Problem, str, ReviewOptions], Review]
MIN_REVIEW_S = 1.0  # less time than this left in the budget: a review is not started


def one_by_one(problem: Problem, candidates: Sequence[str], options: ReviewOptions, *,
               time_limit_s: float | None = None, on_result: Callable[[int, Review], None] | None = None,
               review_one: ReviewOne) -> list[Review]:
    """A batch reviewed one candidate after another by `review_one`, with `review_batch`'s contract:
    every review is bounded by what is left of `time_limit_s`, and a candidate the budget leaves no
    time for fails with class "timeout" in the phase "budget". The loop uses it when a caller gives
    its own review of one candidate (the tests' scripted reviews)."""
    started = time.monotonic()
    out: list[Review] = []
    for i, source in enumerate(candidates):
        left = None if time_limit_s is None else time_limit_s - (time.monotonic() - started)
        if left is not None and left < MIN_REVIEW_S:
            result = Review(problem=problem.name, candidate_hash=code_hash(source), failure_class="timeout",
                            failure_phase=BUDGET_PHASE,
                            failure_message="not reviewed: the review's time budget ran out before this candidate")
        else:
            bounded = options if left is None else options.model_copy(update={
                "timeout_s": min(options.timeout_s, left), "ncu_timeout_s": min(options.ncu_timeout_s, left)})
            result = review_one(problem, source, bounded)
            if left is not None and result.failure_class == "timeout" and bounded.timeout_s < options.timeout_s:
                result = result.model_copy(update={"failure_phase": BUDGET_PHASE})  # cut by the budget, not its own limit
        out.append(result)
        if on_result is not None:
            on_result(i, result)
    return out


def _review_batch(options: ReviewOptions, review_fn: Callable[[Problem, str], Review] | None,
                  keep_warm: bool = False) -> ReviewBatchFn:
    """The batch review the loop calls, with these options bound: the Reviewer's `review_batch` (one
    sandboxed worker for the whole batch), or a caller's `review_fn(problem, source)` one by one.
    On a GPU each batch starts the next one's judge beside it (warm judges, reviewer/batch.py): a
    judge's start is seconds the next batch does not wait for. On the CPU that start would take
    cores from the batch under way, so it is not done there."""
    if review_fn is None:
        keep_warm = keep_warm and resolve_device(options) == "cuda"
        if keep_warm:  # the first batch's judge too: it starts while the run plans its seed
            start_warm(options, "cuda")
        return functools.partial(review_batch, options=options, keep_warm=keep_warm)
    return functools.partial(one_by_one, options=options,
                             review_one=lambda problem, source, _options: review_fn(problem, source))


def build_deps(store: GraphStore, settings: Settings, config: LoopConfig,
               on_progress: Callable[[Progress], None] = lambda p: None, brain: Brain | None = None,
               review_fn: Callable[[Problem, str], Review] | None = None, gpu: Any = "detect",
               unsafe_no_sandbox: bool = False) -> Deps:
    """The agents of a run. Where no sandbox works, the recipe brain's candidates still run (kskill
    writes them from its own templates and the problem, which is trusted); an LLM's run only with
    `unsafe_no_sandbox`, and that is checked here, before the run starts."""
    brain = brain or make_brain(settings, config)
    retriever = _retrieval(store, settings, config.retrieval)

    def patterns(text: str, k: int) -> list[tuple[str, float]]:
        return [(m.id, m.score) for m in retriever().search(text, ["FailurePattern"], k) if m.is_related]

    def techniques(text: str, k: int) -> list[str]:
        return [m.id for m in retriever().search(text, ["Technique"], k) if m.is_related]

    options = ReviewOptions(trials=config.trials, device=config.device, timeout_s=config.review_timeout_s,
                            atol=config.atol, rtol=config.rtol, cpu_timing_reps=config.cpu_timing_reps,
                            unsandboxed_ok=config.brain == "recipes" or unsafe_no_sandbox,
                            hidden_paths=[str(settings.home)])
    if review_fn is None:
        require_isolation(options)
    # The re-timing at the end compiles afresh: what it times is the returned code alone.
    timing_only = options.model_copy(update={"trials": 1, "input_variants": False, "profile": False})
    if config.brain == "recipes" and review_fn is None:  # trusted code: its batches share compiled kernels
        options = options.model_copy(update={"kernel_cache": _kernel_cache()})
    return Deps(
        trajectory=Trajectory(store),
        planner=Planner(store, fallback=techniques if retriever else None),
        generator=Generator(brain), optimizer=Optimizer(brain, store),
        diagnoser=Diagnoser(store, search=patterns if retriever else None), repairer=Repairer(brain),
        brain=brain, review_batch=_review_batch(options, review_fn, keep_warm=True),
        confirm_batch=_review_batch(timing_only, review_fn), on_progress=on_progress, gpu=gpu)


def start(store: GraphStore, settings: Settings, problem_path: Path, config: LoopConfig,
          out_dir: Path | None = None, began: float | None = None, setup_seconds: dict[str, float] | None = None,
          **deps_options: Any) -> RunState:
    """A new run of `problem_path`; its files go to `out_dir` (default KSKILL_HOME/runs/<run id>).
    `began` (time.monotonic()) is when the time limit started counting, if before this call;
    `setup_seconds`, the caller's steps since then, go into the run's step_seconds with this call's own."""
    problem = load_problem(problem_path)
    run_id = new_run_id(problem.name)
    folder = Path(out_dir) if out_dir else settings.home / "runs" / run_id
    if folder.exists() and any(folder.iterdir()):
        raise RunError(f"the output directory {folder} is not empty; name a new one with --out")
    mark = time.monotonic()
    deps = build_deps(store, settings, config, **deps_options)  # a misconfigured brain fails before any file
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem_path, folder / "problem.py")  # resume reads it from here
    state = RunState(run_id, problem, config, folder.resolve(), started=began or time.monotonic())
    state.step_seconds.update(setup_seconds or {}, **{"setup: agents": time.monotonic() - mark})
    return _run(state, deps)


def resume(store: GraphStore, settings: Settings, run_id: str, iterations: int | None = None,
           **deps_options: Any) -> RunState:
    """Continue an interrupted run from the graph and its run directory."""
    trajectory = Trajectory(store)
    known = trajectory.run(run_id)
    if known is not None and known.get("status") == "finished" and iterations is None:
        raise RunError(f"run {run_id} is finished; pass --iterations N to give it more iterations")
    state = load_state(trajectory, run_id)
    if iterations is not None:
        state.config = state.config.model_copy(update={"iterations": iterations})
    return _run(state, build_deps(store, settings, state.config, **deps_options))


_kernel_caches: list[Path] = []  # made for the runs of this process, removed when a run ends


def _kernel_cache() -> str:
    folder = Path(tempfile.mkdtemp(prefix="kskill-kernels-"))
    _kernel_caches.append(folder)
    return str(folder)


def _run(state: RunState, deps: Deps) -> RunState:
    """The loop, then the end of any judge kept warm for a batch that will not come, and of the
    compiled kernels kept for later batches."""
    try:
        return run_loop(state, deps)
    finally:
        close_warm()
        while _kernel_caches:
            shutil.rmtree(_kernel_caches.pop(), ignore_errors=True)
