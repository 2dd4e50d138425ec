"""`kskill skills review`: list what ingest proposed, and accept or reject it."""

from __future__ import annotations

import click
from rich.table import Table

from kskill.app import App, emit_json, console, json_option, pass_app, whole
from kskill.ingest.review import decide_edge, decide_nodes, proposals


@click.command("review")
@click.option("--accept", "accept_ids", multiple=True, metavar="ID", help="Accept a proposed skill (repeatable).")
@click.option("--reject", "reject_ids", multiple=True, metavar="ID", help="Reject a proposed skill (repeatable).")
@click.option("--accept-edge", nargs=3, multiple=True, metavar="REL START END", help="Accept a proposed claim edge.")
@click.option("--reject-edge", nargs=3, multiple=True, metavar="REL START END", help="Reject a proposed claim edge.")
@json_option
@pass_app
def review(app: App, accept_ids: tuple[str, ...], reject_ids: tuple[str, ...],
           accept_edge: tuple[tuple[str, str, str], ...], reject_edge: tuple[tuple[str, str, str], ...],
           as_json: bool) -> None:
    """Without options: list proposed skills and claim edges. `kskill skills show ID` shows their evidence.
    The Planner uses accepted skills only."""
    store = app.store()
    done = []
    if accept_ids:
        done.append(decide_nodes(store, list(accept_ids), accept=True))
    if reject_ids:
        done.append(decide_nodes(store, list(reject_ids), accept=False))
    for rel, start, end in accept_edge:
        decide_edge(store, rel, start, end, accept=True)
        done.append({"edge": [rel, start, end], "status": "accepted"})
    for rel, start, end in reject_edge:
        decide_edge(store, rel, start, end, accept=False)
        done.append({"edge": [rel, start, end], "status": "rejected"})
    if done:
        if as_json:
            emit_json(done)
        else:
            for item in done:
                what = ", ".join(item["nodes"]) if "nodes" in item else " ".join(item["edge"])
                click.echo(f"{item['status']}: {what}")
        return
    found = proposals(store)
    if as_json:
        emit_json({"nodes": found.nodes, "edges": found.edges})
        return
    out = console()
    nodes = Table("kind", "id", "name", "evidence", "first quote", "nearest existing", title="proposed skills")
    whole(nodes, "id")
    for r in found.nodes:
        quote = (r.get("quote") or "")[:120]
        nodes.add_row(r["kind"], r["id"], r["name"], str(r["evidence"]), quote, ", ".join(r.get("nearest") or []))
    edges = Table("start", "relation", "end", "confidence", "evidence", title="proposed claim edges")
    for r in found.edges:
        edges.add_row(r["start"], r["rel"], r["end_name"], f"{r['confidence']:.2f}" if r["confidence"] else "",
                      str(r["evidence"]))
    out.print(nodes)
    out.print(edges)
    out.print("accept or reject with --accept ID / --reject ID, "
                  "--accept-edge REL START END / --reject-edge REL START END")
