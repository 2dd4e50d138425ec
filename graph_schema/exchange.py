"""Export the whole graph as a Cypher script that Neo4j (cypher-shell, Browser) loads, and import
such a script into any store.

The script holds one statement per line: `UNWIND [...] AS row MERGE ...` batches of literal
rows, nodes first, then relationships, so running it twice changes nothing. Literal values
are written here and only here; everywhere else Cypher takes `$params`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, TextIO

from . import queries
from .errors import GraphError, SchemaError
from .model import NODE_TYPES, RELATIONSHIPS
from .store import GraphStore

PAGE = 1000
HEADER = "// kskill graph export: load with cypher-shell -f FILE, Neo4j Browser, or `kskill graph import FILE`"
_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def literal(value: Any) -> str:
    """A Cypher literal for a property value (string, number, bool, null, list or map)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SchemaError(f"{value} cannot be written as a Cypher literal")
        return repr(value)
    if isinstance(value, str):
        escaped = (value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
                   .replace("\r", "\\r").replace("\t", "\\t"))
        return f"'{escaped}'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise SchemaError(f"a value of type {type(value).__name__} cannot be written as a Cypher literal")


def _key(name: str) -> str:
    if _BARE_KEY.match(name):
        return name
    if "`" in name:
        raise SchemaError(f"property name {name!r} cannot be exported")
    return f"`{name}`"


def export_graph(store: GraphStore, out: TextIO) -> dict[str, int]:
    """Write every node and relationship; return the counts written."""
    counts: dict[str, int] = {}
    out.write(HEADER + "\n")
    for label in NODE_TYPES:
        for rows in _pages(store, queries.all_nodes(label)):
            batch = [row["props"] for row in rows]
            out.write(f"UNWIND {literal(batch)} AS row MERGE (n:{label} {{id: row.id}}) SET n += row;\n")
            counts[label] = counts.get(label, 0) + len(batch)
    for rel in RELATIONSHIPS:
        by_shape: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for rows in _pages(store, queries.all_edges(rel)):
            for row in rows:
                by_shape.setdefault((row["start_label"], row["end_label"]), []).append(
                    {"s": row["start"], "e": row["end"], "p": row["props"]})
        for (start, end), batch in by_shape.items():
            for i in range(0, len(batch), PAGE):
                part = batch[i:i + PAGE]
                out.write(f"UNWIND {literal(part)} AS row MATCH (a:{start} {{id: row.s}}) "
                          f"MATCH (b:{end} {{id: row.e}}) MERGE (a)-[r:{rel}]->(b) SET r += row.p;\n")
            counts[rel] = counts.get(rel, 0) + len(batch)
    return counts


def import_graph(store: GraphStore, path: Path) -> int:
    """Run an exported script in one transaction; return the number of statements."""
    statements = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphError(f"cannot read {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("//"):
            continue
        if not text.endswith(";"):
            raise GraphError(f"{path}:{number}: a statement must end with ';' on its line")
        statements.append(text[:-1])
    try:
        with store.transaction() as tx:
            for text in statements:
                tx.write(text)
    except GraphError as exc:
        raise GraphError(f"{path}: nothing imported: {exc} (statements are counted without comments)") from exc
    return len(statements)


def _pages(store: GraphStore, query: str):
    skip = 0
    while True:
        rows = store.run(query, {"skip": skip, "limit": PAGE})
        if not rows:
            return
        yield rows
        skip += len(rows)
