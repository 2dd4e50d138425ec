"""What every command shares: the settings, read once, and the store, opened on first use."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import click

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
