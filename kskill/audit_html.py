"""`kskill audit --html`: the audit as one self-contained page that needs no network.

Per attempt with a decision, a layered graph that reads left to right (observations -> conditions
that held -> bottlenecks -> techniques selected or rejected -> outcome -> failure patterns), laid
out by cytoscape.js with its dagre layout (kskill/assets, inlined); whole labels, one colour per
node kind and a legend. Beside it the same facts as text, so a printout or screenshot says why.
On top: the run's summary, a banner when the timings are not representative, the speedup plot.
"""

from __future__ import annotations

import html
import json
import textwrap
from importlib import resources
from typing import Any

from kskill.audit import headline, names_line, outcome, representativeness_note
from kskill.plots import Point, speedup_plot

WRAP = 44  # characters per label line; node sizes follow from it
CHAR_PX, LINE_PX = 6.4, 16  # 12 px sans-serif: an upper bound of the mean glyph width, and the line height

# node kind -> (legend text, fill, border)
NODE_KINDS = {
    "observation": ("observation (metric = value)", "#dbe9f6", "#4c78a8"),
    "condition": ("condition that held", "#d3f0ec", "#2a9d8f"),
    "bottleneck": ("bottleneck detected", "#fde2c8", "#e07b00"),
    "selected": ("technique selected", "#d7f0cf", "#3a923a"),
    "rejected": ("techniques rejected (grouped by reason)", "#eeeeee", "#8c8c8c"),
    "verified": ("outcome: verified", "#e6dcf5", "#7b4fa3"),
    "failed": ("outcome: failed", "#fbd5d5", "#d62728"),
    "pattern": ("failure pattern matched", "#fde0ef", "#c2185b"),
}
# edge kind -> (legend text, colour, line style)
EDGE_KINDS = {
    "observed": ("value tested by the condition", "#4c78a8", "solid"),
    "detects": ("condition in the bottleneck's signature", "#2a9d8f", "solid"),
    "selected": ("bottleneck addressed by the technique chosen", "#3a923a", "solid"),
    "rejected": ("bottleneck addressed by techniques rejected", "#8c8c8c", "dashed"),
    "outcome": ("what the attempt gave", "#7b4fa3", "solid"),
    "matches": ("failure matched a known pattern", "#c2185b", "dotted"),
}


def render_html(audit: dict[str, Any]) -> str:
    summary = audit["summary"]
    body = [f"<h1>kskill audit <code>{_e(audit['run'])}</code></h1>"]
    note = representativeness_note(summary["representative"])
    if note:
        body.append(f'<div class="banner">{_e(note[0].upper() + note[1:])}. The speedups below say '
                    "nothing about the kernels on a GPU; the decisions and their reasons still hold.</div>")
    body += [_summary_table(audit), _plot(audit), _legend()]
    for i, a in enumerate(audit["attempts"]):
        body.append(_attempt_section(a, i))
    name, value = next(iter(audit["cypher"]["params"].items()))
    cypher = f":param {name} => '{value}'\n{audit['cypher']['query']}"
    body.append('<h2>In Neo4j Browser</h2><div class="cypher"><button type="button" id="copy">copy</button>'
                f'<pre id="cypher-text">{_e(cypher)}</pre></div>')
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>kskill audit {_e(audit['run'])}"
            f"</title><style>{STYLE}</style></head><body>{''.join(body)}"
            f"<script>{_asset('cytoscape.min.js')}</script><script>{_asset('cytoscape-dagre.min.js')}</script>"
            f"<script>const GRAPH_STYLE = {json.dumps(_graph_style())};\n{SCRIPT}</script></body></html>")


def _summary_table(audit: dict[str, Any]) -> str:
    s = audit["summary"]
    best = s["best"]
    fastest = ("none verified" if best is None else
               f"attempt {best['n']} ({best['technique'] or 'seed'}), {best['speedup']:.3f}x the reference")
    rows = [("problem", audit["problem"]), ("status", audit["status"]), ("stopped because", s["stop_reason"] or "-"),
            ("fastest verified candidate", fastest),
            ("candidates reviewed", f"{s['reviewed']} of a budget of {s['iterations']}" if s["iterations"] else s["reviewed"]),
            ("brain / device", f"{s['brain'] or '-'} / {s['device'] or '-'}"),
            ("timings representative", {True: "yes (GPU)", False: "no (no GPU)", None: "unknown"}[s["representative"]]),
            ("started / finished", f"{s['started_at'] or '-'} / {s['finished_at'] or '-'}"),
            ("run directory", s["out_dir"] or "-")]
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="summary">{cells}</table>'


def _plot(audit: dict[str, Any]) -> str:
    points = [Point(a["n"], a["speedup"] if a["status"] == "verified" else None, a["technique"] or a["kind"])
              for a in audit["attempts"] if a["kind"] != "reference" and a["status"] != "pending"]
    svg = speedup_plot(points, f"{audit['problem']}: speedup per attempt", audit["summary"]["representative"])
    return f'<div class="plot">{svg[svg.find("<svg"):]}</div>' if svg else ""


def _legend() -> str:
    nodes = "".join(f'<span class="key"><i style="background:{fill};border-color:{border}"></i>{_e(text)}</span>'
                    for text, fill, border in NODE_KINDS.values())
    edges = "".join(f'<span class="key"><b style="border-top:2px {style} {colour}"></b>{_e(text)}</span>'
                    for text, colour, style in EDGE_KINDS.values())
    return (f'<div class="legend"><div>{nodes}</div><div>{edges}</div><div class="hint">Graphs read left to '
            "right. Drag a node to move it; click one to read its details below the graph.</div></div>")


def _attempt_section(a: dict[str, Any], index: int) -> str:
    d = a["decision"]
    head = f'<h2>{_e(headline(a))}</h2><p class="outcome {_outcome_kind(a)}">{_e(outcome(a))}</p>'
    if not d:
        patterns = _patterns(a)
        return f'<section class="attempt compact">{head}{patterns}</section>'
    elements = decision_elements(a)
    data = json.dumps(elements).replace("</", "<\\/")
    graph = (f'<script type="application/json" id="elements-{index}">{data}</script>'
             f'<div class="graph" data-elements="elements-{index}" style="height:{_height(elements)}px"></div>'
             '<div class="detail">click a node for its details</div>')
    return f'<section class="attempt">{head}{graph}<div class="facts">{_facts(d)}{_patterns(a)}</div></section>'


def _facts(d: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{_e(b['bottleneck'])}</td><td><code>{_e(c['text'])}</code></td>"
                   f"<td>{_e(_value(c['observed']))}</td></tr>" for b in d["matched"] for c in b["conditions"])
    why = (f"<h3>Why</h3><table class='conditions'><tr><th>bottleneck</th><th>condition that held</th>"
           f"<th>observed</th></tr>{rows}</table>" if rows else "")
    s = d["selected"]
    chosen = (f"<h3>Selected: {_e(s['technique'])}</h3><p>{_e(d['case'])} [{_e(d['tier'])}]</p>" if s
              else f"<h3>Nothing selected</h3><p>{_e(d['case'])}</p>")
    quotes = "".join(f"<blockquote>{_e(e['quote'])}<small>{_e(e['about'])} · {_e(str(e['source']))}"
                     f"{', ' + _e(e['location']) if e['location'] else ''}</small></blockquote>" for e in d["evidence"])
    groups = []
    for g in d["rejected_groups"]:
        items = "".join(f"<li><b>{_e(i['technique'])}</b>: {_e(i['reason'])}</li>" for i in g["items"])
        title = f"{_e(g['title'])} ({len(g['items'])})"
        groups.append(f"<details><summary>{title}</summary><ul>{items}</ul></details>" if g["collapsed"]
                      else f"<h4>{title}</h4><ul>{items}</ul>")
    rejected = f"<h3>Rejected</h3>{''.join(groups)}" if groups else ""
    return why + chosen + quotes + rejected


def _patterns(a: dict[str, Any]) -> str:
    if not a["failure"] or not a["failure"]["patterns"]:
        return ""
    items = "".join(f"<li><b>{_e(p['id'])}</b> ({_e(str(p['name']))}): {_e(str(p['remedy']))}</li>"
                    for p in a["failure"]["patterns"])
    return f"<h3>Failure patterns matched</h3><ul>{items}</ul>"


# --- the decision as graph elements -------------------------------------------------------------

def decision_elements(a: dict[str, Any]) -> list[dict[str, Any]]:
    """Cytoscape elements ({"data": ...}) for one attempt's decision, in the left-to-right layers."""
    d = a["decision"]
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, Any]] = []

    def node(nid: str, kind: str, lines: list[str], detail: str = "") -> str:
        if nid not in nodes:
            wrapped = [part for line in lines for part in (textwrap.wrap(line, WRAP) or [""])]
            nodes[nid] = {"data": {"id": nid, "kind": kind, "label": "\n".join(wrapped), "detail": detail or
                                   " ".join(lines), "w": round(CHAR_PX * max(map(len, wrapped)) + 22),
                                   "h": LINE_PX * len(wrapped) + 14}}
        return nid

    def edge(source: str, target: str, kind: str) -> None:
        edges.append({"data": {"id": f"e{len(edges)}", "source": source, "target": target, "kind": kind}})

    for b in d["matched"]:
        bid = node(f"b:{b['bottleneck']}", "bottleneck", [b["bottleneck"]], f"{b['bottleneck']}: {b['name']}")
        for c in b["conditions"]:
            cid = node(f"c:{c['id']}", "condition", [c["text"], "holds"])
            oid = node(f"o:{c['metric']}", "observation", [f"{c['metric']} = {_value(c['observed'])}"])
            edge(oid, cid, "observed")
            edge(cid, bid, "detects")
    addressed: dict[str, list[str]] = {}
    for row in d["addressed"]:
        addressed.setdefault(row["technique"], []).append(f"b:{row['bottleneck']}")

    def sources(techniques: list[str], bottleneck: str | None = None) -> list[str]:
        found = [f"b:{bottleneck}"] if bottleneck else sorted({b for t in techniques for b in addressed.get(t, [])})
        return found or [node("b:none", "bottleneck", ["no bottleneck rule: proposed by retrieval"])]

    last = None
    if d["selected"]:
        s = d["selected"]
        evidence = " | ".join(f"\"{e['quote']}\" ({e['source']})" for e in d["evidence"])
        last = node(f"t:{s['technique']}", "selected", [f"selected: {s['technique']}"], f"{d['case']}. {evidence}")
        for source in sources([s["technique"]], s["bottleneck"]):
            edge(source, last, "selected")
    for g in d["rejected_groups"]:
        names = [i["technique"] for i in g["items"]]
        lines = ([f"rejected: {g['title']} ({len(names)})", names_line(names, len(names))] if g["collapsed"]
                 else [f"rejected: {g['title']}"] + [f"{', '.join(line['techniques'])}: {line['why']}" for line in g["lines"]])
        detail = "; ".join(f"{i['technique']}: {i['reason']}" for i in g["items"])
        gid = node(f"r:{g['kind']}", "rejected", lines, detail)
        for source in sources(names):
            edge(source, gid, "rejected")
    result = node(f"a:{a['n']}", _outcome_kind(a), [f"attempt {a['n']}", _short_outcome(a)], outcome(a))
    for source in [last] if last else [n for n in nodes if n.startswith("b:")][:1]:
        edge(source, result, "outcome")
    for p in (a["failure"] or {}).get("patterns", []):
        edge(result, node(f"p:{p['id']}", "pattern", [p["id"]], f"{p['name']}: {p['remedy']}"), "matches")
    return list(nodes.values()) + edges


def _height(elements: list[dict[str, Any]]) -> int:
    """Room for the tallest layer: nodes of one kind share a layer, except outcome and patterns."""
    per_kind: dict[str, int] = {}
    for el in elements:
        if "kind" in el["data"] and "source" not in el["data"]:
            kind = {"selected": "rejected", "verified": "failed"}.get(el["data"]["kind"], el["data"]["kind"])
            per_kind[kind] = per_kind.get(kind, 0) + el["data"]["h"] + 18
    return min(900, max(160, max(per_kind.values(), default=0) + 40))


def _outcome_kind(a: dict[str, Any]) -> str:
    return "verified" if a["status"] == "verified" else "failed"


def _short_outcome(a: dict[str, Any]) -> str:
    if a["status"] == "verified":
        return f"verified, {a['speedup']:.3f}x" if a["speedup"] is not None else "verified"
    return f"failed: {a['failure']['class'] if a['failure'] else a['status']}"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "not observed" if value is None else str(value)


def _graph_style() -> list[dict[str, Any]]:
    style: list[dict[str, Any]] = [
        {"selector": "node", "style": {
            "shape": "round-rectangle", "width": "data(w)", "height": "data(h)", "label": "data(label)",
            "text-wrap": "wrap", "text-valign": "center", "text-halign": "center", "font-size": 12,
            "font-family": "sans-serif", "color": "#222", "border-width": 2}},
        {"selector": "edge", "style": {"curve-style": "bezier", "target-arrow-shape": "triangle", "width": 1.6,
                                       "arrow-scale": 0.9}},
        {"selector": "node:selected", "style": {"border-width": 4}},
    ]
    for kind, (_, fill, border) in NODE_KINDS.items():
        style.append({"selector": f'node[kind = "{kind}"]',
                      "style": {"background-color": fill, "border-color": border,
                                **({"border-style": "dashed"} if kind == "rejected" else {})}})
    for kind, (_, colour, line) in EDGE_KINDS.items():
        style.append({"selector": f'edge[kind = "{kind}"]',
                      "style": {"line-color": colour, "target-arrow-color": colour, "line-style": line}})
    return style


def _asset(name: str) -> str:
    # A script's text may not contain "</script"; the vendored files do not, and this keeps it so.
    return resources.files("kskill").joinpath("assets", name).read_text(encoding="utf-8").replace("</script", "<\\/script")


def _e(text: Any) -> str:
    return html.escape(str(text))


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1280px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em} h2{font-size:1.15em;margin:1.6em 0 .2em} h3{font-size:1em;margin:.8em 0 .2em}
h4{font-size:.95em;margin:.5em 0 .1em;color:#555}
code{background:#f4f4f4;padding:0 3px;border-radius:3px}
.banner{background:#fff3cd;border:1px solid #e0b000;padding:.6em 1em;border-radius:4px;margin:1em 0;font-weight:600}
table.summary th{text-align:left;padding:2px 14px 2px 0;color:#555;font-weight:600}
table.summary td{padding:2px 0}
.plot svg{max-width:760px;height:auto}
.legend{border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:1em 0;font-size:.9em}
.legend div{margin:.2em 0}
.key{display:inline-block;margin-right:1.2em;white-space:nowrap}
.key i{display:inline-block;width:14px;height:12px;border:2px solid;border-radius:3px;margin-right:5px;vertical-align:-2px}
.key b{display:inline-block;width:26px;height:0;margin-right:5px;vertical-align:3px}
.hint{color:#666}
section.attempt{border-top:1px solid #ddd;margin-top:1em}
section.compact h2{display:inline-block;margin-right:1em} section.compact p{display:inline-block}
.outcome.verified{color:#5b3a8a} .outcome.failed{color:#b22222}
.graph{width:100%;border:1px solid #e3e3e3;border-radius:4px;background:#fcfcfc}
.detail{font-size:.85em;color:#444;min-height:1.3em;margin:.2em 0 .5em}
.facts{font-size:.92em}
table.conditions{border-collapse:collapse} table.conditions td,table.conditions th{border-bottom:1px solid #eee;
padding:2px 10px 2px 0;text-align:left}
blockquote{color:#444;border-left:3px solid #3a923a;margin:.4em 0;padding-left:8px}
blockquote small{display:block;color:#777}
ul{margin:.2em 0;padding-left:1.4em}
.cypher{position:relative}
.cypher pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;border:1px solid #ddd;padding:.8em;
border-radius:4px}
#copy{position:absolute;right:.4em;top:.4em}
"""

SCRIPT = """
window.addEventListener('error', e => { document.body.dataset.errors = (document.body.dataset.errors || '') + e.message + ';'; });
if (typeof cytoscapeDagre !== 'undefined') { try { cytoscape.use(cytoscapeDagre); } catch (e) {} }
let drawn = 0;
document.querySelectorAll('.graph').forEach(div => {
  const elements = JSON.parse(document.getElementById(div.dataset.elements).textContent);
  const cy = cytoscape({container: div, elements: elements, style: GRAPH_STYLE,
    layout: {name: 'dagre', rankDir: 'LR', nodeSep: 14, rankSep: 50, edgeSep: 8, fit: true, padding: 14},
    minZoom: 0.25, maxZoom: 1.0, userZoomingEnabled: false, boxSelectionEnabled: false});
  const detail = div.nextElementSibling;
  cy.on('tap', 'node', ev => { detail.textContent = ev.target.data('detail'); });
  cy.ready(() => {
    // What a reader relies on, recorded for the page's browser test: every edge points right, and
    // every node with its whole label lies inside the drawn area.
    div.dataset.leftToRight = String(cy.edges().every(e => e.source().position('x') < e.target().position('x')));
    const ext = cy.extent();
    div.dataset.clipped = String(cy.nodes().filter(n => { const b = n.boundingBox({includeLabels: true});
      return b.x1 < ext.x1 || b.x2 > ext.x2 || b.y1 < ext.y1 || b.y2 > ext.y2; }).length);
    drawn += 1;
    document.body.dataset.graphsDrawn = String(drawn);
  });
});
document.getElementById('copy').addEventListener('click', () => {
  const text = document.getElementById('cypher-text').textContent;
  if (navigator.clipboard) { navigator.clipboard.writeText(text); }
  else { const r = document.createRange(); r.selectNodeContents(document.getElementById('cypher-text'));
         const s = window.getSelection(); s.removeAllRanges(); s.addRange(r); document.execCommand('copy'); }
});
"""
