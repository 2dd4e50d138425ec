"""`kskill audit RUN`: why each attempt was made, from the graph, with the Cypher to see it in Neo4j Browser."""

from __future__ import annotations

from pathlib import Path

import click

from kskill.app import App, emit_json, json_option, pass_app
from kskill.audit import audit_run, render_html, render_text


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--attempt", type=click.IntRange(min=0), default=None, help="Only this attempt.")
@click.option("--html", "html_path", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              help="Write one self-contained HTML page with the decision subgraphs drawn "
                   "(default file: audit-RUN.html).")
@json_option
@pass_app
def audit(app: App, run_id: str, attempt: int | None, html_path: str | None, as_json: bool) -> None:
    """Observations -> conditions matched -> bottleneck -> technique selected (and rejected, with
    reasons) -> outcome, for each attempt of RUN."""
    data = audit_run(app.store(), run_id, attempt)
    if html_path is not None:
        path = Path(f"audit-{run_id}.html" if html_path == "-" else html_path)
        path.write_text(render_html(data))
        click.echo(f"wrote {path}", err=True)
    if as_json:
        emit_json(data)
    else:
        click.echo(render_text(data))
