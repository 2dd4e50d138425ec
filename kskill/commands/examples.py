"""`kskill examples [NAME]`: the bundled example problems and where they are installed."""

from __future__ import annotations

import click

from kskill.app import emit_json, json_option
from kskill.examples import bundled, summary


@click.command()
@click.argument("name", required=False)
@json_option
def examples(name: str | None, as_json: bool) -> None:
    """List the bundled problems with their paths; with NAME print only that one's path, as in
    `kskill optimize "$(kskill examples gemm_bias_gelu)"`."""
    found = bundled()
    if name is not None:
        if name not in found:
            raise click.BadParameter(f"no example {name!r}; the examples are {', '.join(found)}", param_hint="NAME")
        click.echo(str(found[name]))
        return
    if as_json:
        emit_json([{"name": n, "path": str(p), "summary": summary(p)} for n, p in found.items()])
        return
    width = max(map(len, found), default=0)
    for n, p in found.items():
        click.echo(f"{n.ljust(width)}  {p}")
        click.echo(f"{''.ljust(width)}  {summary(p)}")
    click.echo(f'\nrun one: kskill optimize "$(kskill examples {next(iter(found), "NAME")})"')
