"""The reference's captured operators as the Feature Extractor reads them: one `OpNode` per op of the
forward, and an `OpGraph` of producer/consumer links in which views (and plain copies, where a
fused kernel would not copy) are transparent.

Op names are canonical (lower case, no in-place or private underscores) and each carries its family
(gemm, convolution, pointwise, ...) as features.py assigns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Ops that hand on their operand's values unchanged: a fused kernel reads the value in registers, so
# a `clone()` or `contiguous()` between a producer and its consumers does not separate them.
COPIES = frozenset({"clone", "contiguous", "detach", "alias", "copy"})
ROW_FAMILIES = ("reduction", "softmax", "normalization", "pooling", "scan", "loss")


@dataclass
class OpNode:
    """One operator of the reference forward as the feature pass sees it."""

    name: str
    op: str
    family: str
    inputs: list[str] = field(default_factory=list)  # names of producer nodes
    constants: list[Any] = field(default_factory=list)  # non-tensor positional operands
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] | None = None
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    itemsize: int = 0
    input_bytes: int = 0
    parameter_operand: bool = False  # one operand is a parameter or buffer (not an activation)


class OpGraph:
    """Producer/consumer links of the captured ops, with views made transparent."""

    def __init__(self, nodes: list[OpNode]):
        self.nodes = nodes
        self.by_name = {n.name: n for n in nodes}
        self.users: dict[str, list[str]] = {n.name: [] for n in nodes}
        for n in nodes:
            for producer in n.inputs:
                self.users.setdefault(producer, []).append(n.name)
        self._group_of: dict[str, str] | None = None

    def producers(self, node: OpNode) -> list[OpNode]:
        """Tensor-valued producers, looking through views; sizes and other scalars are left out."""
        found = []
        for name in node.inputs:
            p = self.by_name.get(name)
            if p is None or p.shape is None:
                continue
            found += self.producers(p) if p.family == "view" else [p]
        return found

    def consumers(self, node: OpNode) -> list[OpNode]:
        found = []
        for name in self.users.get(node.name, []):
            c = self.by_name[name]
            if c.shape is None and c.family in ("view", "other"):
                continue  # reads a size or other scalar, not the tensor's data
            found += self.consumers(c) if c.family == "view" else [c]
        return found

    def value_consumers(self, node: OpNode) -> list[OpNode]:
        """The ops that compute with this node's values, looking through views and plain copies."""
        found = []
        for c in self.consumers(node):
            found += self.value_consumers(c) if c.op in COPIES else [c]
        return found

    def compute_nodes(self) -> list[OpNode]:
        return [n for n in self.nodes if n.family not in ("view", "placeholder", "get_attr", "output")]

    def is_output(self, node: OpNode) -> bool:
        """Whether the node's value (or a view or copy of it) is returned by the forward."""
        return any(c.op == "output" for c in self.value_consumers(node))

    def group_of(self) -> dict[str, str]:
        """The connected pointwise group each pointwise node belongs to, named by one of its members."""
        if self._group_of is None:
            parent = {n.name: n.name for n in self.nodes if n.family == "pointwise"}

            def find(x: str) -> str:
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x

            for name in parent:
                for p in self.producers(self.by_name[name]):
                    if p.family == "pointwise":
                        parent[find(p.name)] = find(name)
            self._group_of = {name: find(name) for name in parent}
        return self._group_of

    def pointwise_groups(self) -> dict[str, int]:
        """Size of the connected pointwise group each pointwise node belongs to."""
        group = self.group_of()
        sizes: dict[str, int] = {}
        for root in group.values():
            sizes[root] = sizes.get(root, 0) + 1
        return {name: sizes[root] for name, root in group.items()}

    def group_members(self, root: str) -> list[OpNode]:
        return [self.by_name[name] for name, r in self.group_of().items() if r == root]
