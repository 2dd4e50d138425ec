"""`kskill ingest PATH...`: read documents and notes into the skill graph, with evidence."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kskill.app import App, emit_json, json_option, pass_app
from kskill.graph_schema.errors import ConfigError
from kskill.ingest.pipeline import IngestOptions, Ingestor, IngestReport


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching (repeatable; default: all supported types).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files or folders matching (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--force", is_flag=True, help="Re-extract files the graph already holds unchanged (their old claims are replaced).")
@click.option("--brain", type=click.Choice(["rules", "llm"]), default="rules", show_default=True,
              help="Extractor for free text: cue rules (offline) or the configured LLM endpoint.")
@click.option("--min-confidence", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Drop extracted claims below this confidence.")
@click.option("--lexical", is_flag=True, help="Resolve entities by words only (no embedding model).")
@click.option("--max-mb", type=click.IntRange(1), default=None, help="Largest text file to read, in MiB (default 20).")
@json_option
@pass_app
def ingest(app: App, paths: tuple[Path, ...], include: tuple[str, ...], exclude: tuple[str, ...], dry_run: bool,
           force: bool, brain: str, min_confidence: float, lexical: bool, max_mb: int | None, as_json: bool) -> None:
    """Read PDFs, Markdown, reStructuredText, HTML and text; write bottleneck -> technique -> precondition
    claims with their evidence. New skills arrive as `proposed`: see `kskill skills review`.

    Exits with status 1 when a path does not exist or any file failed; the others are still ingested."""
    from kskill.retrieval import refresh, retriever_for

    store = app.store()
    settings = app.settings
    retriever = retriever_for(store, settings.home, settings.embedding_model or None,
                              **({"embedder": None} if lexical else {}))
    options = IngestOptions(include=include, exclude=exclude, dry_run=dry_run, force=force,
                            min_confidence=min_confidence)
    if max_mb:
        options.max_text_bytes = max_mb * 2**20
    extractor = _llm_extractor(app, store) if brain == "llm" else None
    ingestor = Ingestor(store, extractor, retriever, options,
                        on_written=lambda: refresh(retriever, store, settings.home))
    if as_json:
        report = ingestor.run(list(paths))
        emit_json({**report.as_dict(), **_llm_usage(extractor)})
        _exit_for(report)
        return
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("ingesting", total=None)

        def step(path: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=Path(path).name[:40])

        report = ingestor.run(list(paths), progress=step)
    _print_summary(report)
    if extractor is not None:
        u = extractor.endpoint.used
        click.echo(f"LLM extractor: {u.tokens} tokens in {u.calls} call(s) ({u.cached} cached, {u.failed} failed "
                   f"requests), ${u.cost_usd:.4f}")
    _exit_for(report)


def _exit_for(report: IngestReport) -> None:
    """Status 1 when any path was missing or any file failed: scripts must not mistake it for success."""
    failed = [f for f in report.files if f.status == "failed"]
    if failed:
        click.echo(f"error: {len(failed)} of {len(report.files)} files failed (first: {failed[0].path}: "
                   f"{failed[0].reason})", err=True)
        raise SystemExit(1)


def _llm_extractor(app: App, store):
    from kskill.graph_schema import ingest_queries
    from kskill.ingest.extract_llm import LLMExtractor
    from kskill.llm_settings import llm_endpoint, llm_options

    s = app.settings
    if not s.llm_model:
        raise ConfigError("--brain llm needs an endpoint: set OPENAI_BASE_URL, OPENAI_API_KEY and KSKILL_LLM_MODEL")
    nodes = store.run(ingest_queries.SKILL_NODES)
    metrics = [r["id"] for r in store.run(ingest_queries.METRIC_NAMES)]
    budget = llm_options(s).prompt_budget
    return LLMExtractor(llm_endpoint(s), nodes, metrics, prompt_chars=int(budget.max_tokens * budget.chars_per_token))


def _llm_usage(extractor) -> dict:
    """The LLM extractor's tokens and cost, for --json (nothing with the rule extractor)."""
    if extractor is None:
        return {}
    from dataclasses import asdict

    used = extractor.endpoint.used
    return {"llm_usage": {**asdict(used), "tokens": used.tokens}}


def _print_summary(report: IngestReport) -> None:
    console = Console()
    files = Table("file", "status", "pages", "claims", "nodes +new/merged", "edges +new/merged", "reason",
                  title="dry run: nothing written" if report.dry_run else None)
    for f in report.files:
        c = f.counts
        files.add_row(Path(f.path).name, f.status, str(f.pages or ""), str(c.get("claims", "")),
                      f"{c['nodes_created']}/{c['nodes_merged']}" if c else "",
                      f"{c['edges_created']}/{c['edges_merged']}" if c else "", f.reason)
    console.print(files)
    t = report.totals()
    read = t.get("ingested", 0) + t.get("would ingest", 0)
    console.print(f"{read} read, {t.get('unchanged', 0)} unchanged, {t.get('skipped', 0)} skipped, "
                  f"{t.get('failed', 0)} failed; nodes {t.get('nodes_created', 0)} created, "
                  f"{t.get('nodes_merged', 0)} merged; edges {t.get('edges_created', 0)} created, "
                  f"{t.get('edges_merged', 0)} merged; {t.get('pages', 0)} PDF pages in {report.seconds:.1f} s")
