"""`kskill audit RUN`: why each attempt was made, from the graph, with the Cypher to see it in Neo4j Browser."""

from __future__ import annotations

from pathlib import Path

import click

from kskill.app import RUN_ID, App, emit_json, json_option, pass_app
from kskill.audit import audit_run, render_text
from kskill.graph_schema.errors import KskillError

PAGE = "audit.html"


@click.command()
@click.argument("run_id", metavar="RUN", type=RUN_ID)
@click.option("--attempt", type=click.IntRange(min=0), default=None, help="Only this attempt.")
@click.option("--html", "html_path", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              help=f"Write one self-contained HTML page with each decision drawn, and print its path "
                   f"(default file: {PAGE} in the run's directory, or audit-RUN.html here when that is gone).")
@json_option
@pass_app
def audit(app: App, run_id: str, attempt: int | None, html_path: str | None, as_json: bool) -> None:
    """Observations -> conditions matched -> bottleneck -> technique selected (and rejected, with
    reasons) -> outcome, for each attempt of RUN."""
    data = audit_run(app.store(), run_id, attempt)
    if html_path is not None:
        from kskill.audit_html import render_html

        path = _page_path(html_path, run_id, data["summary"]["out_dir"])
        try:
            path.write_text(render_html(data), encoding="utf-8")
        except OSError as exc:
            raise KskillError(f"cannot write the audit page to {path}: {exc.strerror or exc}") from exc
        click.echo(str(path.resolve()))
    elif as_json:
        emit_json(data)
    else:
        click.echo(render_text(data))


def _page_path(given: str, run_id: str, out_dir: str) -> Path:
    if given != "-":
        return Path(given)
    folder = Path(out_dir) if out_dir else None
    if folder is not None and folder.is_dir():
        return folder / PAGE
    return Path(f"audit-{run_id}.html")
