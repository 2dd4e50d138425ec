"""What every command shares: the settings, read once, and the store, opened on first use."""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import click
from rich.console import Console

from kskill.config import Settings, load_settings
from kskill.graph_schema.skillbase import ensure_builtin
from kskill.graph_schema.store import GraphStore, open_store


@dataclass
class App:
    verbose: int = 0
    graph_uri: str | None = None
    _settings: Settings | None = None
    _store: GraphStore | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            settings = load_settings()
            if self.graph_uri:
                settings = replace(settings, graph_uri=self.graph_uri)
            self._settings = settings
        return self._settings

    def store(self, load_skills: bool = True) -> GraphStore:
        """The graph store, with the built-in skill base loaded on first use."""
        if self._store is None:
            s = self.settings
            self._store = open_store(s.graph_uri, s.home, user=s.neo4j_user, password=s.neo4j_password)
            if load_skills:
                ensure_builtin(self._store)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


pass_app = click.make_pass_decorator(App)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


class FiniteFloat(click.FloatRange):
    """A float option within a range that also refuses nan and inf (which compare false with any bound)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class RunId(click.ParamType):
    """A run id as kskill makes them: letters, digits, '.', '_' and '-', never a path."""

    name = "run"
    PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not self.PATTERN.fullmatch(text) or ".." in text:
            self.fail(f"{text!r} is not a run id (a letter or digit, then letters, digits, '.', '_', '-'; "
                      "`kskill runs list` shows them)", param, ctx)
        return text


RUN_ID = RunId()


class GpuName(click.ParamType):
    """A GPU of the peak table (agents/gpus.py): a key (h200-sxm), a unique key prefix (h200) or a
    device name as torch reports it."""

    name = "gpu"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from kskill.agents.gpus import GpuSpec, UnknownGpu, resolve

        if isinstance(value, GpuSpec):
            return value
        try:
            return resolve(str(value))
        except UnknownGpu as exc:
            self.fail(str(exc), param, ctx)


gpu_option = click.option(
    "--gpu", type=GpuName(), default=None, metavar="NAME",
    help="Target GPU whose peaks the plan uses (ridge point, roofline, launch estimate): a key of the peak "
         "table (h200, a100-sxm4-80gb, ...) or a device name. Default: the GPU present, else none.")


def whole(table: Any, *headers: str) -> None:
    """Never wrap or cut these columns of a rich Table (ids are what a reader copies); the others give way."""
    for column in table.columns:
        if column.header in headers:
            column.no_wrap = True


PIPED_WIDTH = 200  # columns of a table written to a file or pipe, where no terminal says how wide


def console(stderr: bool = False) -> Console:
    """A rich console as wide as the terminal, or PIPED_WIDTH wide when the output is not one."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else PIPED_WIDTH)
