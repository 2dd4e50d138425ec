"""The `kskill` command line: a root group with one noun group or verb per module in commands/.

Library errors (KskillError) become one line on stderr here, at the edge, and nowhere else; so do
unexpected ones, whose traceback `-v` prints. Every command exits non-zero when its job failed.
"""

from __future__ import annotations

import importlib
import logging
import sys
import traceback

import click

from kskill.app import App
from kskill.graph_schema.errors import KskillError
from kskill.interrupts import Interrupted, as_interrupted, stop_on_signals


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
    "examples": "kskill.commands.examples:examples",
    "graph": "kskill.commands.graph:graph",
    "ingest": "kskill.commands.ingest:ingest",
    "optimize": "kskill.commands.optimize:optimize",
    "plan": "kskill.commands.plan:plan",
    "review": "kskill.commands.review:review",
    "runs": "kskill.commands.runs:runs",
    "skills": "kskill.commands.skills:skills",
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
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


def run(args: list[str] | None = None) -> int:
    """Run one command line and return its exit status, with every error said in one line."""
    args = sys.argv[1:] if args is None else list(args)
    verbose = any(a in ("-v", "-vv", "-vvv", "--verbose") for a in args[:3])
    try:
        # Outside standalone mode click returns, rather than raises, the code of a command's Exit.
        code = cli.main(args, prog_name="kskill", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        stopped = exc if isinstance(exc, KeyboardInterrupt) else exc.__cause__  # click turns a signal into Abort
        if not isinstance(stopped, KeyboardInterrupt):  # a question answered "no"
            click.echo("aborted", err=True)
            return 1
        return _interrupted(as_interrupted(stopped))
    except click.UsageError as exc:  # one line too, with where to read the usage
        where = f"; `{exc.ctx.command_path} --help` shows the usage" if exc.ctx else ""
        click.echo(f"error: {one_line(exc.format_message()).rstrip('.')}{where}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KskillError as exc:
        return _failed(exc, verbose, str(exc))
    except OSError as exc:  # a file or folder the command was given, or needs, cannot be used
        where = f": {exc.filename}" if exc.filename else ""
        return _failed(exc, verbose, f"{exc.strerror or exc}{where}")
    except Exception as exc:  # a defect: one line here, the traceback with -v
        return _failed(exc, verbose, f"unexpected {type(exc).__name__}: {exc} (rerun with -v for the traceback)")
    return code if isinstance(code, int) else 0


def _failed(exc: BaseException, verbose: bool, message: str) -> int:
    if verbose:
        traceback.print_exception(exc)
    click.echo(f"error: {one_line(message)}", err=True)
    return 1


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _interrupted(exc: Interrupted) -> int:
    """One line on what was stopped (and how to go on); the exit status of that signal."""
    sandbox = sys.modules.get("kskill.agents.reviewer.sandbox")  # loaded only where workers ran
    if sandbox is not None:
        sandbox.stop_all()  # those of other threads; the main thread's stopped while unwinding
    click.echo(f"interrupted by {exc.signal_name}; its workers were stopped", err=True)  # optimize says how to resume
    return exc.exit_code


def main() -> None:
    stop_on_signals()
    sys.exit(run())
