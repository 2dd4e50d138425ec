"""The `kskill` command line: a root group with one noun group or verb per module in commands/.

Library errors (KskillError) become one line on stderr here, at the edge, and nowhere else.
"""

from __future__ import annotations

import importlib
import logging
import sys
import traceback

import click

from kskill.app import App
from kskill.graph_schema.errors import KskillError


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs (or help lists it), so a quick
    command such as `skills list` does not pay for torch, triton or the embedding model."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, attribute = self.lazy[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)


# command name -> "module:attribute"; each module in kskill/commands/ holds one noun or verb
COMMANDS = {
    "audit": "kskill.commands.audit:audit",
    "config": "kskill.commands.config:config",
    "eval": "kskill.commands.eval:eval_group",
    "graph": "kskill.commands.graph:graph",
    "ingest": "kskill.commands.ingest:ingest",
    "optimize": "kskill.commands.optimize:optimize",
    "plan": "kskill.commands.plan:plan",
    "review": "kskill.commands.review:review",
    "runs": "kskill.commands.runs:runs",
    "skills": "kskill.commands.skills:skills",
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
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


def main() -> None:
    verbose = any(arg.startswith("-v") or arg == "--verbose" for arg in sys.argv[1:3])
    try:
        # Outside standalone mode click returns, rather than raises, the code of a command's Exit.
        code = cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KskillError as exc:
        if verbose:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
