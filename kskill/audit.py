"""`kskill audit`: a run explained attempt by attempt, read back from the graph.

For each attempt: what was observed, which conditions held, which bottleneck they detect, which
technique was selected (with the evidence behind it) and which were rejected and why, and what
happened (verified with its speedup, or failed with its class and the FailurePattern matched).
Rejections are grouped by kind, the informative ones (outranked, tabu) first. `render_text` is
the terminal's view; kskill/audit_html.py draws the same data as one page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kskill.agents.errors import AgentError
from kskill.graph_schema import queries
from kskill.graph_schema import trajectory_queries as q
from kskill.graph_schema.store import GraphStore
from kskill.trajectory import Trajectory

MAX_EVIDENCE = 4
SHOWN_NAMES = 6  # technique names on a collapsed rejection line before "+N more"


def audit_run(store: GraphStore, run_id: str, attempt: int | None = None) -> dict[str, Any]:
    trajectory = Trajectory(store)
    run = trajectory.require_run(run_id)
    every = trajectory.attempts(run_id)
    rows = every
    if attempt is not None:
        rows = [r for r in every if r["n"] == attempt]
        if not rows:
            raise AgentError(f"run {run_id} has no attempt {attempt}; `kskill runs show {run_id}` lists them")
    return {"run": run_id, "problem": run.get("problem"), "status": run.get("status"),
            "summary": _summary(run, every),
            "attempts": [_attempt(store, r) for r in rows],
            "cypher": {"params": {"run": run_id} if attempt is None else {"attempt": rows[0]["attempt"]["id"]},
                       "query": q.AUDIT_RUN_SUBGRAPH if attempt is None else q.AUDIT_ATTEMPT_SUBGRAPH}}


def _summary(run: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run at a glance: settings, why it stopped, its best candidate, whether its timings mean anything."""
    config = json.loads(run.get("config") or "{}")
    loop = config.get("loop", {})
    out_dir = config.get("out_dir") or ""
    attempts = [r["attempt"] for r in rows]
    timed = [a for a in attempts if a["kind"] != "reference" and a.get("correct") and a.get("speedup") is not None]
    confirmed = [a for a in attempts if a["kind"] != "reference" and a.get("confirmed_speedup") is not None]
    # Once candidates were re-timed at the end of the run, only their re-timings compete (as in the loop).
    speed = "confirmed_speedup" if confirmed else "speedup"
    best = max(confirmed or timed, key=lambda a: a[speed], default=None)
    return {"stop_reason": config.get("stop_reason") or "", "brain": loop.get("brain"),
            "device": loop.get("device"), "iterations": loop.get("iterations"),
            "reviewed": sum(1 for a in attempts if a["kind"] != "reference" and a["status"] != "pending"),
            "started_at": run.get("started_at"), "finished_at": run.get("finished_at"), "out_dir": out_dir,
            "best": None if best is None else {
                "n": best["n"], "speedup": best[speed],
                "technique": next(((r["applied"] or [None])[0] for r in rows if r["n"] == best["n"]), None)},
            "representative": timings_representative(Path(out_dir)) if out_dir else None}


def timings_representative(out_dir: Path) -> bool | None:
    """Whether the run's timings came from a GPU, read from its directory; None when nothing says."""
    summary = out_dir / "run.json"
    try:
        if summary.is_file():
            return bool(json.loads(summary.read_text()).get("timings_representative"))
        flags = [json.loads(f.read_text()).get("timing") or {} for f in sorted(out_dir.glob("attempts/*/review.json"))]
    except (OSError, ValueError):
        return None
    flags = [t["representative"] for t in flags if "representative" in t]
    return all(flags) if flags else None


def _attempt(store: GraphStore, row: dict[str, Any]) -> dict[str, Any]:
    a = row["attempt"]
    out: dict[str, Any] = {
        "n": a["n"], "id": a["id"], "kind": a["kind"], "parent": row["parent"], "status": a["status"],
        "correct": a.get("correct"), "speedup": a.get("speedup"), "code_hash": a["code_hash"],
        "technique": (row["applied"] or [None])[0], "decision": None, "failure": None}
    if row["decision"]:
        out["decision"] = _decision(store, row["decision"], row["tier"], row["case"])
    if row["failure_class"]:
        out["failure"] = {"class": row["failure_class"], "message": row["failure_message"],
                          "patterns": [_pattern(store, pid) for pid in row["patterns"]]}
    return out


def _decision(store: GraphStore, decision: str, tier: str, case: str) -> dict[str, Any]:
    params = {"decision": decision}
    observations = store.run(q.DECISION_OBSERVATIONS, params)
    values = {o["metric"]: o["value"] for o in observations if o["available"]}
    matched = store.run(q.DECISION_MATCHED, params)
    for b in matched:
        b["conditions"] = [dict(c, observed=values.get(c["metric"])) for c in b["conditions"]
                           if c["id"] is not None and c["held"]]
    selected = store.run(q.DECISION_SELECTED, params)
    chosen = selected[0] if selected else None
    cited = [chosen["technique"], chosen["bottleneck"]] if chosen else [b["bottleneck"] for b in matched]
    rejected = store.run(q.DECISION_REJECTED, params)
    return {"id": decision, "tier": tier, "case": case,
            "observations": observations, "matched": matched, "selected": chosen,
            "rejected": rejected, "rejected_groups": group_rejections(rejected),
            "addressed": store.run(q.DECISION_ADDRESSED, params),
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


# --- rejections, grouped ------------------------------------------------------------------------

# (kind, title, how the Planner words it, the words the title already says), in the order a reader
# wants them: what competed and lost, what the run's memory ruled out, what the brain could not
# write, then what never applied.
REJECTION_KINDS = (
    ("outranked", "outranked", r"^outranked ", r"^outranked "),
    ("tabu", "tabu", r"^tabu: ", r"^tabu: "),
    ("lineage", "in this lineage", r"^(already applied|conflicts with) ", r" in this lineage"),
    ("cannot_apply", "cannot be written here", r"^the brain cannot apply it here: ", r"^$"),
    ("forbidden", "excluded", r"^forbidden when ", r"^$"),
    ("not_observed", "not observed", r": \S+ was not observed$|cannot be compared$", r"^requires "),
    ("precondition", "precondition not met", r"^requires .*: not met$", r"^requires |: not met$"),
)
COLLAPSED = {"not_observed", "precondition"}  # many, and rarely the reason a reader looks: one line each

# Brain messages meant for developers, and what they mean to a user.
_INTERNAL = (
    (re.compile(r"unknown technique"), "the recipe brain has no recipe for it"),
    (re.compile(r"torch\.fx cannot capture"), "the recipe brain cannot trace the reference with torch.fx"),
    (re.compile(r"the reference does not run"), "the reference does not run"),
)


def user_reason(reason: str) -> str:
    """A rejection reason as a user reads it: the brain's internal messages become what they mean."""
    text = re.sub(r"^the brain cannot apply it here: ", "", reason)
    if text == reason:
        return reason
    for pattern, meaning in _INTERNAL:
        if pattern.search(text):
            return meaning
    return _short(text, 120)


def group_rejections(rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rejections by kind, in REJECTION_KINDS order, as
    {kind, title, collapsed, items: [{technique, reason}], lines: [{techniques, why}]}: `lines` merges
    the techniques rejected for the same reason, said without the words of the title."""
    groups: dict[str, dict[str, Any]] = {}
    for r in rejected:
        kind, title, _, said = next((k for k in REJECTION_KINDS if re.search(k[2], r["reason"])),
                                    ("other", "other", "", r"^$"))
        group = groups.setdefault(kind, {"kind": kind, "title": title, "collapsed": kind in COLLAPSED,
                                         "items": [], "lines": {}})
        reason = user_reason(r["reason"])
        group["items"].append({"technique": r["technique"], "reason": reason})
        group["lines"].setdefault(re.sub(said, "", reason), []).append(r["technique"])
    order = [k[0] for k in REJECTION_KINDS] + ["other"]
    for g in groups.values():
        g["lines"] = [{"techniques": names, "why": why} for why, names in g["lines"].items()]
    return [groups[k] for k in order if k in groups]


def names_line(names: list[str], shown: int = SHOWN_NAMES) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" (+{more} more)" if more > 0 else "")


# --- text ---------------------------------------------------------------------------------------

def render_text(audit: dict[str, Any]) -> str:
    lines = [f"run {audit['run']}  problem={audit['problem']}  status={audit['status']}"]
    note = representativeness_note(audit["summary"]["representative"])
    if note:
        lines.append(f"  {note}")
    for a in audit["attempts"]:
        lines += ["", headline(a)]
        d = a["decision"]
        if d:
            lines += _decision_lines(a, d)
        lines.append(f"  outcome: {outcome(a)}")
        if a["failure"]:
            for p in a["failure"]["patterns"]:
                lines.append(f"    failure pattern {p['id']} ({p['name']}): {p['remedy']}")
    params = audit["cypher"]["params"]
    name, value = next(iter(params.items()))
    lines += ["", "In Neo4j Browser:", f":param {name} => '{value}'", audit["cypher"]["query"]]
    return "\n".join(lines)


def _decision_lines(a: dict[str, Any], d: dict[str, Any]) -> list[str]:
    shown = [o for o in d["observations"] if o["available"]]
    lines = [f"  observations: {len(shown)} measured or extracted, {len(d['observations']) - len(shown)} unavailable"]
    for b in d["matched"]:
        held = "; ".join(f"{c['text']} (observed {c['observed']!r})" for c in b["conditions"])
        lines.append(f"  conditions matched -> bottleneck {b['bottleneck']}: {held}")
    if d["selected"]:
        s = d["selected"]
        lines.append(f"  selected: {s['technique']} for {s['bottleneck'] or '(fallback)'} [{d['tier']}] - {d['case']}")
    for g in d["rejected_groups"]:
        if g["collapsed"]:
            names = [i["technique"] for i in g["items"]]
            lines.append(f"  rejected ({g['title']}): {len(names)} technique(s): {names_line(names)}")
        else:
            lines += [f"  rejected ({g['title']}): {', '.join(line['techniques'])}: {line['why']}"
                      for line in g["lines"]]
    for e in d["evidence"]:
        lines.append(f"    evidence ({e['about']}): \"{_short(e['quote'], 160)}\" - {e['source']}"
                     f"{', ' + e['location'] if e['location'] else ''}")
    return lines


def representativeness_note(representative: bool | None) -> str:
    if representative is False:
        return "timings not representative: measured without a GPU (Triton's interpreter on the CPU)"
    if representative is None:
        return "whether the timings are representative is unknown: the run directory has no reviews"
    return ""


def headline(a: dict[str, Any]) -> str:
    parent = "" if a["parent"] is None else f" from attempt {a['parent']}"
    added = f" +{a['technique']}" if a["technique"] else ""
    return f"attempt {a['n']}: {a['kind']}{added}{parent}  [{a['code_hash']}]"


def outcome(a: dict[str, Any]) -> str:
    if a["status"] == "verified":
        return f"verified, {a['speedup']:.3f}x the reference" if a["speedup"] is not None else "verified"
    if a["failure"]:
        return f"failed ({a['failure']['class']}): {_short(a['failure']['message'] or '', 200)}"
    return a["status"]


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
