"""The recipe brain's graph of ops: what a captured reference looks like to the recipes.

Each node is one op of the reference's forward with its static shape and dtype and the PyTorch
text that computes it, so any node a recipe leaves alone is re-emitted faithfully. Operands are
`Ref`s to other nodes, `Attr`s naming a parameter or buffer of the module (`self.fc.weight`), or
plain Python constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import torch


@dataclass(frozen=True)
class Ref:
    """The value of another node, by name."""

    name: str


@dataclass(frozen=True)
class Attr:
    """A parameter or buffer of the reference module, by dotted path (`fc1.weight`)."""

    path: str

    @property
    def code(self) -> str:
        # nn.Sequential children are named by index: self.net[0].weight
        return "self" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in self.path.split("."))


@dataclass(frozen=True)
class DeviceOf:
    """The device a forward input lives on, where the reference read a device off a tensor
    (`torch.tensor(v, device=x.device)`): the capture saw the meta device, the candidate runs where
    its inputs are (one device for all of a problem's tensors)."""

    input: str

    @property
    def code(self) -> str:
        return f"{self.input}.device"


@dataclass
class Node:
    """One op: canonical name, operands, normalised attributes, static shape and PyTorch text."""

    name: str
    op: str
    args: tuple[Any, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None
    code: str = ""
    module: str | None = None  # dotted path of the nn.Module a call_module node runs
    multi: bool = False  # the op returns a tuple (read through getitem nodes)

    def tensor_args(self) -> list[Ref | Attr]:
        return [a for a in self.args if isinstance(a, (Ref, Attr))]


@dataclass
class Graph:
    """Nodes in execution order, the output structure, and metadata about parameters."""

    nodes: list[Node]
    output: Any  # Ref, or a tuple/list of Refs (and constants)
    attr_meta: dict[str, tuple[tuple[int, ...], torch.dtype]]
    module_types: dict[str, str]

    def __post_init__(self) -> None:
        self.reindex()

    def reindex(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.position = {n.name: i for i, n in enumerate(self.nodes)}
        self._users: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for ref in iter_refs((n.args, list(n.attrs.values()))):
                users = self._users.setdefault(ref.name, [])
                if n.name not in users:
                    users.append(n.name)

    def users(self, name: str) -> list[str]:
        return self._users.get(name, [])

    def is_output(self, name: str) -> bool:
        return any(r.name == name for r in iter_refs(self.output))

    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    def shape_of(self, operand: Any) -> tuple[int, ...] | None:
        if isinstance(operand, Ref):
            return self.by_name[operand.name].shape
        if isinstance(operand, Attr):
            return self.attr_meta[operand.path][0]
        return None

    def dtype_of(self, operand: Any) -> torch.dtype | None:
        if isinstance(operand, Ref):
            return self.by_name[operand.name].dtype
        if isinstance(operand, Attr):
            return self.attr_meta[operand.path][1]
        return None

    def drop_unused(self) -> None:
        """Remove the nodes nothing uses any more, after a rewrite bypassed them. An in-place op
        stays: its effect is the tensor it writes, not its result."""
        while True:  # each pass drops what is unused now; the nodes they alone used go in the next
            dead = {n.name for n in self.nodes if n.op != "input" and not n.attrs.get("inplace")
                    and not self.users(n.name) and not self.is_output(n.name)}
            if not dead:
                return
            self.nodes[:] = [n for n in self.nodes if n.name not in dead]
            self.reindex()


def iter_refs(value: Any) -> Iterator[Ref]:
    """Every Ref inside a nested structure of tuples, lists and dicts."""
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from iter_refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_refs(v)


def operand_code(value: Any) -> str:
    """Python text for an operand or constant inside emitted PyTorch code."""
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, (Attr, DeviceOf)):
        return value.code
    if isinstance(value, float):
        if value != value:
            return "float('nan')"
        if value in (float("inf"), float("-inf")):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(operand_code(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(operand_code(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {operand_code(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, torch.Size):
        return operand_code(tuple(value))
    if value is Ellipsis:
        return "..."
    if isinstance(value, slice):
        return f"slice({operand_code(value.start)}, {operand_code(value.stop)}, {operand_code(value.step)})"
    return repr(value)
