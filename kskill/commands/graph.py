"""`kskill graph status|init|check|export|import|compact|stop|reset`: manage the store.

Each subcommand exits 0 only when its job was done: a store that cannot be opened, a check
with problems, a file that cannot be written or read, a compaction or stop that failed, and
a reset that was not confirmed all end with a non-zero status."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kskill.app import App, emit_json, json_option, pass_app
from kskill.graph_schema import queries
from kskill.graph_schema.exchange import export_graph, import_graph
from kskill.graph_schema.integrity import check_graph
from kskill.graph_schema.skillbase import ensure_builtin


@click.group()
def graph() -> None:
    """Manage the graph store (embedded FalkorDB by default, or Neo4j)."""


@graph.command()
@json_option
@pass_app
def status(app: App, as_json: bool) -> None:
    """Where the store is, whether it runs, and what it holds."""
    store = app.store()
    report = {
        "engine": store.engine,
        "location": store.location,
        "skill_base": (store.run(queries.SKILLBASE_STATE) or [{}])[0],
        "nodes": {r["label"]: r["count"] for r in store.run(queries.COUNT_BY_LABEL)},
        "relationships": {r["type"]: r["count"] for r in store.run(queries.COUNT_BY_REL)},
    }
    server = getattr(store, "server", None)
    if server is not None:
        report["server"] = server.status()
    if as_json:
        emit_json(report)
        return
    console = Console()
    console.print(f"[bold]{report['engine']}[/] at {report['location']}")
    sb = report["skill_base"]
    console.print(f"skill base version {sb.get('version', '-')} ({sb.get('content_hash', '-')})")
    table = Table("kind", "count")
    for label, count in report["nodes"].items():
        table.add_row(label, str(count))
    for rel, count in report["relationships"].items():
        table.add_row(f"-[:{rel}]->", str(count))
    console.print(table)
    if "server" in report:
        srv = report["server"]
        console.print(f"append-only file {_mib(srv['aof_bytes'])}, log {_mib(srv['log_bytes'])}, "
                      f"network: {srv['network']}")
        for backup in srv["aof_backups"]:
            console.print(f"[yellow]kept after a damaged tail was cut:[/] {backup}")


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _embedded_only(app: App, command: str) -> None:
    if app.settings.graph_uri not in ("", "embedded"):
        raise click.UsageError(f"`graph {command}` manages the embedded store; "
                               "a Neo4j server is managed with its own tools")


@graph.command()
@click.option("--force", is_flag=True, help="Rewrite the built-in skill base even if unchanged.")
@pass_app
def init(app: App, force: bool) -> None:
    """Create the schema and load the built-in skill base (idempotent)."""
    store = app.store(load_skills=False)
    changed = ensure_builtin(store, force=force)
    click.echo("built-in skill base loaded" if changed else "built-in skill base already up to date")


@graph.command()
@json_option
@pass_app
def check(app: App, as_json: bool) -> None:
    """Report integrity problems; exit 1 when there are any."""
    problems = check_graph(app.store())
    if as_json:
        emit_json([{"kind": p.kind, "detail": p.detail} for p in problems])
    else:
        for p in problems:
            click.echo(f"{p.kind}: {p.detail}")
        click.echo(f"{len(problems)} problem(s)")
    if problems:
        raise click.exceptions.Exit(1)


@graph.command("export")
@click.argument("file", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@pass_app
def export_cmd(app: App, file: Path) -> None:
    """Write the whole graph as a Cypher script that Neo4j loads."""
    store = app.store()
    tmp = file.with_name(file.name + ".partial")
    try:
        with tmp.open("w", encoding="utf-8") as out:
            counts = export_graph(store, out)
        tmp.replace(file)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise click.FileError(str(file), exc.strerror or str(exc)) from exc
    click.echo(f"wrote {sum(counts.values())} nodes and relationships to {file}")


@graph.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_app
def import_cmd(app: App, file: Path) -> None:
    """Load a script written by `kskill graph export` (in one transaction)."""
    n = import_graph(app.store(load_skills=False), file)
    click.echo(f"ran {n} statements from {file}")


@graph.command()
@json_option
@pass_app
def compact(app: App, as_json: bool) -> None:
    """Rewrite the embedded store's append-only file as a snapshot now (it also happens as it grows)."""
    _embedded_only(app, "compact")
    result = app.store(load_skills=False).compact()
    report = {"before_bytes": result.before_bytes, "after_bytes": result.after_bytes,
              "seconds": round(result.seconds, 3)}
    if as_json:
        emit_json(report)
        return
    click.echo(f"append-only file rewritten: {_mib(result.before_bytes)} -> {_mib(result.after_bytes)} "
               f"in {result.seconds:.1f} s")


@graph.command()
@pass_app
def stop(app: App) -> None:
    """Stop the embedded server cleanly (it starts again when needed)."""
    from kskill.graph_schema.embedded import EmbeddedServer

    _embedded_only(app, "stop")
    server = EmbeddedServer(app.settings.home / "graph")
    click.echo("stopped" if server.data_dir.exists() and server.shutdown() else "not running")


@graph.command()
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def reset(app: App, yes: bool) -> None:
    """Delete every node and relationship (export first to keep them)."""
    store = app.store(load_skills=False)
    if not yes:
        click.confirm(f"delete everything in the {store.engine} store at {store.location}?", abort=True)
    store.write(queries.DELETE_ALL)
    click.echo("graph emptied; the built-in skill base loads again on next use")
