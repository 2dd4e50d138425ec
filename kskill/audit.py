"""`kskill audit`: a run explained attempt by attempt, read back from the graph.

For each attempt: what was observed, which conditions held, which bottleneck they detect, which
technique was selected (with the evidence behind it) and which were rejected and why, and what
happened (verified with its speedup, or failed with its class and the FailurePattern matched).
`render_html` draws each decision subgraph (networkx layout, inline SVG) in one page.
"""

from __future__ import annotations

import html
from typing import Any

from kskill.agents.errors import AgentError
from kskill.graph_schema import queries
from kskill.graph_schema import trajectory_queries as q
from kskill.graph_schema.store import GraphStore
from kskill.trajectory import Trajectory

MAX_EVIDENCE = 4


def audit_run(store: GraphStore, run_id: str, attempt: int | None = None) -> dict[str, Any]:
    trajectory = Trajectory(store)
    run = trajectory.require_run(run_id)
    rows = trajectory.attempts(run_id)
    if attempt is not None:
        rows = [r for r in rows if r["n"] == attempt]
        if not rows:
            raise AgentError(f"run {run_id} has no attempt {attempt}")
    return {"run": run_id, "problem": run.get("problem"), "status": run.get("status"),
            "attempts": [_attempt(store, r) for r in rows],
            "cypher": {"params": {"run": run_id} if attempt is None else {"attempt": rows[0]["attempt"]["id"]},
                       "query": q.AUDIT_RUN_SUBGRAPH if attempt is None else q.AUDIT_ATTEMPT_SUBGRAPH}}


def _attempt(store: GraphStore, row: dict[str, Any]) -> dict[str, Any]:
    a = row["attempt"]
    out: dict[str, Any] = {
        "n": a["n"], "id": a["id"], "kind": a["kind"], "parent": row["parent"], "status": a["status"],
        "correct": a.get("correct"), "speedup": a.get("speedup"), "code_hash": a["code_hash"],
        "technique": (row["applied"] or [None])[0], "variant": a.get("variant", ""), "decision": None,
        "failure": None}
    if row["decision"]:
        out["decision"] = _decision(store, row["decision"], row["tier"], row["case"], out["technique"])
    if row["failure_class"]:
        out["failure"] = {"class": row["failure_class"], "message": row["failure_message"],
                          "patterns": [_pattern(store, pid) for pid in row["patterns"]]}
    return out


def _decision(store: GraphStore, decision: str, tier: str, case: str, technique: str | None = None) -> dict[str, Any]:
    """One decision as it bears on the attempt that applied `technique` (a plan selects several)."""
    params = {"decision": decision}
    observations = store.run(q.DECISION_OBSERVATIONS, params)
    values = {o["metric"]: o["value"] for o in observations if o["available"]}
    matched = store.run(q.DECISION_MATCHED, params)
    derived = {o["metric"]: o.get("derivation") for o in observations if o["available"] and o.get("derivation")}
    for b in matched:
        b["conditions"] = [dict(c, observed=values.get(c["metric"]), derivation=derived.get(c["metric"], ""))
                           for c in b["conditions"] if c["id"] is not None and c["held"]]
    selected = store.run(q.DECISION_SELECTED, params)
    chosen = next((s for s in selected if s["technique"] == technique), selected[0] if selected else None)
    cited = [chosen["technique"], chosen["bottleneck"]] if chosen else [b["bottleneck"] for b in matched]
    return {"id": decision, "tier": tier, "case": case,
            "observations": observations, "matched": matched, "selected": chosen,
            "rejected": store.run(q.DECISION_REJECTED, params), "also_selected": selected,
            "variants": store.run(q.DECISION_VARIANTS, params),
            "evidence": [e for node in cited if node for e in _evidence(store, node)]}


def _props(store: GraphStore, node_id: str) -> dict[str, Any]:
    rows = store.run(queries.NODE_BY_ID, {"id": node_id})
    return rows[0]["props"] if rows else {}


def _evidence(store: GraphStore, node_id: str) -> list[dict[str, Any]]:
    rows = store.run(queries.NODE_EVIDENCE, {"id": node_id})[:MAX_EVIDENCE]
    return [{"about": node_id, "quote": r["quote"], "location": r["location"], "source": r["source"],
             "source_id": r["source_id"]} for r in rows]


def _pattern(store: GraphStore, pattern_id: str) -> dict[str, Any]:
    props = _props(store, pattern_id)
    return {"id": pattern_id, "name": props.get("name"), "remedy": props.get("remedy")}


# --- text ---------------------------------------------------------------------------------------

def render_text(audit: dict[str, Any]) -> str:
    lines = [f"run {audit['run']}  problem={audit['problem']}  status={audit['status']}"]
    for a in audit["attempts"]:
        lines += ["", _headline(a)]
        d = a["decision"]
        if d:
            shown = [o for o in d["observations"] if o["available"]]
            lines.append(f"  observations: {len(shown)} measured or extracted, "
                         f"{len(d['observations']) - len(shown)} unavailable")
            missing: dict[str, list[str]] = {}
            for o in d["observations"]:
                if not o["available"]:
                    missing.setdefault(o.get("reason") or "not observed", []).append(o["metric"])
            for reason, metrics in sorted(missing.items()):
                lines.append(f"    unavailable ({_short(reason, 90)}): {', '.join(metrics)}")
            for b in d["matched"]:
                held = "; ".join(f"{c['text']} (observed {c['observed']!r}"
                                 + (f", {c['derivation']})" if c.get("derivation") else ")") for c in b["conditions"])
                lines.append(f"  conditions matched -> bottleneck {b['bottleneck']}: {held}")
            if d["selected"]:
                s = d["selected"]
                lines.append(f"  selected: {s['technique']} for {s['bottleneck'] or '(fallback)'} [{d['tier']}] - {d['case']}")
            for v in d.get("variants", []):
                fate = f"written as attempt {v['attempt']}" if v["written"] else f"ruled out: {v['reason']}"
                lines.append(f"  variant {v['variant']} ({v['technique']}): {fate}")
            for e in d["evidence"]:
                lines.append(f"    evidence ({e['about']}): \"{_short(e['quote'], 160)}\" - {e['source']}"
                             f"{', ' + e['location'] if e['location'] else ''}")
            for r in d["rejected"]:
                lines.append(f"  rejected: {r['technique']}: {r['reason']}")
        lines.append(f"  outcome: {_outcome(a)}")
        if a["failure"]:
            for p in a["failure"]["patterns"]:
                lines.append(f"    failure pattern {p['id']} ({p['name']}): {p['remedy']}")
    params = audit["cypher"]["params"]
    name, value = next(iter(params.items()))
    lines += ["", "In Neo4j Browser:", f":param {name} => '{value}'", audit["cypher"]["query"]]
    return "\n".join(lines)


def _headline(a: dict[str, Any]) -> str:
    parent = "" if a["parent"] is None else f" from attempt {a['parent']}"
    added = (f" +{a['technique']}" if a["technique"] else "") + (f" [{a['variant']}]" if a.get("variant") else "")
    return f"attempt {a['n']}: {a['kind']}{added}{parent}  [{a['code_hash']}]"


def _outcome(a: dict[str, Any]) -> str:
    if a["status"] == "verified":
        return f"verified, {a['speedup']:.3f}x the reference" if a["speedup"] is not None else "verified"
    if a["failure"]:
        return f"failed ({a['failure']['class']}): {_short(a['failure']['message'] or '', 200)}"
    return a["status"]


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- HTML ---------------------------------------------------------------------------------------

COLOURS = {"Attempt": "#4c78a8", "Decision": "#f58518", "Bottleneck": "#e45756", "Condition": "#72b7b2",
           "Selected": "#54a24b", "Rejected": "#9d9d9d", "Evidence": "#b279a2", "Failure": "#d62728",
           "FailurePattern": "#ff9da6"}
LAYERS = {"Attempt": 0, "Failure": 1, "Decision": 1, "Bottleneck": 2, "Selected": 2, "Rejected": 3,
          "FailurePattern": 2, "Condition": 3, "Evidence": 3}


def decision_graph(a: dict[str, Any]) -> Any:
    """The attempt's decision subgraph as a networkx DiGraph (node attr: kind, label, title)."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_node(a["id"], kind="Attempt", label=f"attempt {a['n']}", title=_outcome(a))
    d = a["decision"]
    if d:
        g.add_node(d["id"], kind="Decision", label=f"decision ({d['tier']})", title=d["case"])
        g.add_edge(a["id"], d["id"], label="DECIDED_BY")
        for b in d["matched"]:
            g.add_node(b["bottleneck"], kind="Bottleneck", label=b["bottleneck"], title=b["name"])
            g.add_edge(d["id"], b["bottleneck"], label="MATCHED")
            for c in b["conditions"]:
                g.add_node(c["id"], kind="Condition", label=_short(c["text"], 28),
                           title=f"{c['text']} (observed {c['observed']!r})")
                g.add_edge(b["bottleneck"], c["id"], label="DETECTED_BY")
        if d["selected"]:
            t = d["selected"]["technique"]
            g.add_node(t, kind="Selected", label=t, title=f"selected: {d['case']}")
            g.add_edge(d["id"], t, label="SELECTED")
        for r in d["rejected"]:
            g.add_node(r["technique"], kind="Rejected", label=r["technique"], title=r["reason"])
            g.add_edge(d["id"], r["technique"], label="REJECTED")
        for i, e in enumerate(d["evidence"]):
            node = f"ev{i}:{e['about']}"
            g.add_node(node, kind="Evidence", label=_short(e["source"] or "evidence", 24),
                       title=f"\"{e['quote']}\" ({e['source']}, {e['location']})")
            g.add_edge(e["about"], node, label="SUPPORTED_BY")
    if a["failure"]:
        fid = f"failure:{a['id']}"
        g.add_node(fid, kind="Failure", label=f"failure: {a['failure']['class']}", title=a["failure"]["message"] or "")
        g.add_edge(a["id"], fid, label="FAILED_WITH")
        for p in a["failure"]["patterns"]:
            g.add_node(p["id"], kind="FailurePattern", label=p["id"], title=p["remedy"] or "")
            g.add_edge(fid, p["id"], label="MATCHES")
    return g


def _svg(g: Any, width: int = 960, height: int = 420) -> str:
    import networkx as nx

    for node, data in g.nodes(data=True):
        data["layer"] = LAYERS[data["kind"]]
    pos = nx.multipartite_layout(g, subset_key="layer") if len(g) > 1 else {n: (0.0, 0.0) for n in g}
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0

    def at(node: str) -> tuple[float, float]:
        x, y = pos[node]
        return 90 + (x - min(xs)) / span_x * (width - 180), 30 + (y - min(ys)) / span_y * (height - 60)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">']
    for u, v in g.edges():
        (x1, y1), (x2, y2) = at(u), at(v)
        colour = "#c44" if g.nodes[v]["kind"] == "Rejected" else "#999"
        parts.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="{colour}" />')
    for node, data in g.nodes(data=True):
        x, y = at(node)
        parts.append(f'<g><title>{html.escape(data["title"])}</title>'
                     f'<circle cx="{x:.0f}" cy="{y:.0f}" r="7" fill="{COLOURS[data["kind"]]}" />'
                     f'<text x="{x + 10:.0f}" y="{y + 4:.0f}" font-size="11">{html.escape(data["label"])}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(audit: dict[str, Any]) -> str:
    """One self-contained page: per attempt, the decision subgraph drawn and the text beside it."""
    legend = " ".join(f'<span style="color:{c}">&#9679;</span> {k}' for k, c in COLOURS.items())
    body = [f"<h1>kskill audit: {html.escape(audit['run'])}</h1>",
            f"<p>problem <code>{html.escape(str(audit['problem']))}</code>, status {html.escape(str(audit['status']))}</p>",
            f"<p>{legend}</p>"]
    for a in audit["attempts"]:
        g = decision_graph(a)
        height = max(160, 34 * max(1, max(_layer_sizes(g).values(), default=1)))
        body.append(f"<h2>{html.escape(_headline(a))}</h2><p>{html.escape(_outcome(a))}</p>")
        body.append(_svg(g, height=min(height, 1200)))
        d = a["decision"]
        if d:
            rows = "".join(f"<tr><td>{html.escape(r['technique'])}</td><td>{html.escape(r['reason'])}</td></tr>"
                           for r in d["rejected"])
            body.append(f"<p><b>selected</b> {html.escape(str((d['selected'] or {}).get('technique')))}: "
                        f"{html.escape(d['case'] or '')}</p>")
            body += [f"<blockquote>{html.escape(e['quote'])}<br><small>{html.escape(str(e['source']))} "
                     f"{html.escape(e['location'] or '')}</small></blockquote>" for e in d["evidence"]]
            body.append(f"<details><summary>rejected ({len(d['rejected'])})</summary>"
                        f"<table>{rows}</table></details>")
    name, value = next(iter(audit["cypher"]["params"].items()))
    body.append(f"<h2>In Neo4j Browser</h2><pre>:param {name} => '{html.escape(value)}'\n"
                f"{html.escape(audit['cypher']['query'])}</pre>")
    style = ("body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
             "blockquote{color:#555;border-left:3px solid #b279a2;padding-left:8px}"
             "td{border-bottom:1px solid #eee;padding:2px 8px;font-size:90%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>kskill audit {html.escape(audit['run'])}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>")


def _layer_sizes(g: Any) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for _, data in g.nodes(data=True):
        sizes[LAYERS[data["kind"]]] = sizes.get(LAYERS[data["kind"]], 0) + 1
    return sizes

