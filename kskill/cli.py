"""The `kskill` command line: a root group with one noun group or verb per module in commands/.

Library errors (KskillError) become one line on stderr here, at the edge, and nowhere else.
"""

from __future__ import annotations

import logging
import sys
import traceback

import click

from kskill.app import App
from kskill.commands.config import config
from kskill.commands.graph import graph
from kskill.commands.ingest import ingest
from kskill.commands.plan import plan
from kskill.commands.review import review
from kskill.commands.skills import skills
from kskill.graph_schema.errors import KskillError


@click.group()
@click.option("-v", "--verbose", count=True, help="Log progress; -vv for debug logs and tracebacks.")
@click.option("--graph", "graph_uri", envvar="KSKILL_GRAPH_URI", default=None,
              help="'embedded' (default) or a bolt://, neo4j://, neo4j+s:// URI.")
@click.version_option(package_name="kskill")
@click.pass_context
def cli(ctx: click.Context, verbose: int, graph_uri: str | None) -> None:
    """kskill: faster PyTorch modules from verified GPU kernels, chosen by a graph of expert skills."""
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    app = App(verbose=verbose, graph_uri=graph_uri)
    ctx.obj = app
    ctx.call_on_close(app.close)


cli.add_command(config)
cli.add_command(graph)
cli.add_command(plan)
cli.add_command(skills)
cli.add_command(review)
cli.add_command(ingest)


def main() -> None:
    verbose = any(arg.startswith("-v") or arg == "--verbose" for arg in sys.argv[1:3])
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KskillError as exc:
        if verbose:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
