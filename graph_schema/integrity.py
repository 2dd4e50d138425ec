"""`kskill graph check`: find what breaks the schema's promises in a stored graph."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from . import queries
from .model import NODE_TYPES, RELATIONSHIPS
from .store import GraphStore

BOOKKEEPING = {"origin", "created_at", "key", "loaded_at", "applied_at"}


@dataclass(frozen=True)
class Problem:
    kind: str
    detail: str


def check_graph(store: GraphStore, validate_limit: int = 100_000) -> list[Problem]:
    problems: list[Problem] = []
    for row in store.run(queries.CHECK_NODES_WITHOUT_ID):
        problems.append(Problem("node without id", f"{row['count']} node(s) labelled {row['labels']}"))
    for row in store.run(queries.CHECK_UNKNOWN_LABELS, {"labels": list(NODE_TYPES)}):
        problems.append(Problem("unknown label", f"{row['labels']} id={row['id']}"))
    for row in store.run(queries.CHECK_DUPLICATE_IDS):
        problems.append(Problem("duplicate id", f"{row['label']} {row['id']} x{row['count']}"))
    for row in store.run(queries.CHECK_EDGE_ENDPOINTS):
        allowed = RELATIONSHIPS.get(row["type"])
        if allowed is None or (row["start"], row["end"]) not in allowed:
            problems.append(Problem("relationship outside the schema",
                                    f"{row['count']} x ({row['start']})-[:{row['type']}]->({row['end']})"))
    simple = [
        ("evidence without source", queries.CHECK_EVIDENCE_WITHOUT_SOURCE, "{id}"),
        ("accepted skill without evidence", queries.CHECK_SKILLS_WITHOUT_EVIDENCE, "{label} {id}"),
        ("bottleneck without signature", queries.CHECK_BOTTLENECKS_WITHOUT_SIGNATURE, "{id}"),
        ("condition over a metric not in the vocabulary", queries.CHECK_CONDITIONS_UNKNOWN_METRIC,
         "{id} ({metric})"),
        ("attempt without run", queries.CHECK_ATTEMPTS_WITHOUT_RUN, "{id}"),
    ]
    for kind, query, fmt in simple:
        problems.extend(Problem(kind, fmt.format(**row)) for row in store.run(query))
    problems.extend(_invalid_properties(store, validate_limit))
    return problems


def _invalid_properties(store: GraphStore, limit: int) -> list[Problem]:
    """Validate each stored node against its pydantic model."""
    problems = []
    for label, model in NODE_TYPES.items():
        rows = store.run(queries.all_nodes(label), {"skip": 0, "limit": limit})
        for row in rows:
            props = {k: v for k, v in row["props"].items() if k not in BOOKKEEPING}
            try:
                model(**props)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                problems.append(Problem("schema violation", f"{label} {props.get('id')}: {where}: {err['msg']}"))
    return problems
