"""`kskill skills list|show|search`: browse the long-term memory."""

from __future__ import annotations

import click
from rich.table import Table

from kskill.app import App, emit_json, console, json_option, pass_app, whole
from kskill.commands.review_skills import review
from kskill.graph_schema import queries
from kskill.graph_schema.errors import KskillError

KINDS = {"bottleneck": "Bottleneck", "technique": "Technique", "failure": "FailurePattern"}
kind_option = click.option("--kind", type=click.Choice(sorted(KINDS)), default=None, help="Only this kind.")


@click.group()
def skills() -> None:
    """Browse bottlenecks, techniques and failure patterns."""


skills.add_command(review)


@skills.command("list")
@kind_option
@click.option("--status", type=click.Choice(["accepted", "proposed", "rejected"]), default=None)
@json_option
@pass_app
def list_cmd(app: App, kind: str | None, status: str | None, as_json: bool) -> None:
    """List skills in the graph."""
    rows = app.store().run(queries.LIST_SKILLS, {"kind": KINDS.get(kind or ""), "status": status})
    if as_json:
        emit_json(rows)
        return
    table = Table("kind", "id", "name", "status", "origin")
    whole(table, "kind", "id", "status")
    for r in rows:
        table.add_row(r["kind"], r["id"], r["name"], r["status"], r["origin"])
    console().print(table)


@skills.command()
@click.argument("skill_id")
@json_option
@pass_app
def show(app: App, skill_id: str, as_json: bool) -> None:
    """Show one node: properties, relationships, and the evidence behind it."""
    store = app.store()
    found = store.run(queries.NODE_BY_ID, {"id": skill_id})
    if not found:
        raise KskillError(f"no node with id {skill_id!r}; `kskill skills list` shows the ids")
    detail = {
        "kind": found[0]["kind"],
        "properties": found[0]["props"],
        "relationships": store.run(queries.NODE_NEIGHBOURS, {"id": skill_id}),
        "evidence": store.run(queries.NODE_EVIDENCE, {"id": skill_id}),
    }
    if as_json:
        emit_json(detail)
        return
    out = console()
    props = detail["properties"]
    out.print(f"[bold]{detail['kind']} {skill_id}[/]: {props.get('name', '')}")
    for key in ("description", "playbook", "remedy", "recipe", "status", "origin"):
        if props.get(key):
            out.print(f"[cyan]{key}[/]: {props[key]}")
    for rel in detail["relationships"]:
        arrow = f"-[:{rel['rel']}]->" if rel["outgoing"] else f"<-[:{rel['rel']}]-"
        extra = {k: v for k, v in (rel["props"] or {}).items() if k not in ("origin", "key")}
        out.print(f"  {arrow} {rel['kind']} {rel['id']} {rel['name'] if rel['name'] != rel['id'] else ''} "
                      f"{extra or ''}")
    for ev in detail["evidence"]:
        out.print(f'  [green]evidence[/] "{ev["quote"]}" — {ev["source"]} {ev["location"] or ""}')


@skills.command()
@click.argument("text")
@click.option("--kind", type=click.Choice(sorted(KINDS) + ["evidence"]), default=None, help="Only this kind.")
@click.option("-k", "limit", default=10, show_default=True, help="How many results.")
@json_option
@pass_app
def search(app: App, text: str, kind: str | None, limit: int, as_json: bool) -> None:
    """Find skills by meaning and words (hybrid ranking; words only without the embedding model)."""
    from kskill.retrieval import search as retrieve

    kinds = ["Evidence"] if kind == "evidence" else [KINDS[kind]] if kind else list(KINDS.values())
    matches = retrieve(app.store(), text, kinds, k=limit, home=app.settings.home,
                       model=app.settings.embedding_model or None)
    rows = [{"kind": m.kind, "id": m.id, "name": m.name, "score": round(m.score, 4), "via": m.via,
             "related": m.is_related, "about": list(m.about)} for m in matches]
    if as_json:
        emit_json(rows)
        return
    table = Table("kind", "id", "name", "score", "via")
    whole(table, "kind", "id")
    for r in rows:
        name = r["name"] + (f" (supports {', '.join(r['about'])})" if r["about"] else "")
        table.add_row(r["kind"], r["id"], name, f"{r['score']:.2f}" + ("" if r["related"] else " ?"), r["via"])
    console().print(table)


@skills.command()
@click.option("--include-proposed", is_flag=True, help="Lint proposed skills as if they were accepted.")
@json_option
@pass_app
def lint(app: App, include_proposed: bool, as_json: bool) -> None:
    """Unreachable techniques, contradictory or unsatisfiable conditions, unknown metrics, missing sources."""
    from kskill.graph_schema.lint import lint_skills

    statuses = ("accepted", "proposed") if include_proposed else ("accepted",)
    findings = lint_skills(app.store(), statuses)
    if as_json:
        emit_json([f.__dict__ for f in findings])
    else:
        for f in findings:
            click.echo(f"{f.severity}: {f.rule}: {f.subject}: {f.detail}")
        errors = sum(f.severity == "error" for f in findings)
        click.echo(f"{errors} error(s), {len(findings) - errors} warning(s)")
    if any(f.severity == "error" for f in findings):
        raise click.exceptions.Exit(1)


@skills.command()
@click.option("--source", type=click.Choice(["ncu", "torch_profiler", "static", "problem", "derived"]), default=None)
@json_option
@pass_app
def metrics(app: App, source: str | None, as_json: bool) -> None:
    """The observation vocabulary: every metric a condition may name."""
    rows = [r["props"] for r in app.store().run(queries.all_nodes("Metric"), {"skip": 0, "limit": 100000})]
    rows = [r for r in rows if source is None or r.get("source") == source]
    if as_json:
        emit_json(rows)
        return
    table = Table("metric", "source", "type", "unit", "description")
    whole(table, "metric")
    for r in rows:
        table.add_row(r["id"], r.get("source", ""), r.get("type", ""), r.get("unit", ""), r.get("description", ""))
    console().print(table)
