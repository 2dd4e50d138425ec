"""`kskill config show`: the effective settings, secrets masked."""

from __future__ import annotations

import click

from kskill.app import App, emit_json, json_option, pass_app


@click.group()
def config() -> None:
    """Inspect settings (environment, kskill.toml, defaults)."""


@config.command()
@json_option
@pass_app
def show(app: App, as_json: bool) -> None:
    """Print the effective settings with secrets masked."""
    shown = app.settings.shown()
    if as_json:
        emit_json(shown)
        return
    width = max(len(k) for k in shown)
    for key, value in shown.items():
        click.echo(f"{key.ljust(width)}  {value}")
