"""Partition a captured graph into regions: what becomes one Triton kernel, what stays in PyTorch.

A `Region` is an anchor op (a reduction, a normalisation, a GEMM...) with an optional pointwise
prologue computing its input and an optional pointwise epilogue applied to its result, or a
plain pointwise chain. Regions are placed at the position of their last node; `placement_ok`
refuses any grouping whose intermediate values would be needed by PyTorch code placed earlier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.pointwise_ops import BINARY, UNARY, data_operands, is_identity_dropout, triton_expr
from kskill.agents.recipes.templates.common import Body, aligned

FLOAT = ("torch.float32", "torch.float16", "torch.bfloat16")
# Ops that give the same values in the same logical (row-major) order, only shaped otherwise.
RESHAPES = ("view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous")
# Region kinds whose kernels read their input and write their result at logical row-major offsets:
# a pointwise prologue or epilogue can reach them through a reshape, whose offsets are the same.
ROW_MAJOR_KINDS = ("softmax", "scan", "norm", "reduce", "pool", "loss", "row_loss")
# Those whose launcher is FusedIO's own, which can compute a library product first (builder._adopt_products).
ADOPTING_KINDS = ("softmax", "scan", "norm", "reduce", "pool")


@dataclass
class Region:
    """Nodes that become one kernel unit."""

    kind: str
    technique: str
    anchor: Node | None = None
    prologue: Body | None = None
    epilogue: Body | None = None
    body: Body | None = None  # a plain pointwise region
    extra: dict[str, Any] = field(default_factory=dict)

    def names(self) -> set[str]:
        out = set()
        for b in (self.prologue, self.epilogue, self.body):
            if b is not None:
                out |= b.names()
        if self.anchor is not None:
            out.add(self.anchor.name)
        out |= set(self.extra.get("covers", ()))
        return out


def is_pointwise(node: Node, graph: Graph) -> bool:
    """A float op whose output has the broadcast shape of its tensor operands."""
    if node.op not in UNARY and node.op not in BINARY and node.op != "pow":
        return False
    if str(node.dtype) not in FLOAT or node.shape is None or node.multi:
        return False
    if node.op == "dropout" and not is_identity_dropout(node):
        return False
    if node.attrs.get("inplace"):
        target = data_operands(node)[0]
        if not isinstance(target, Ref) or len(graph.users(target.name)) > 1:
            return False
        if graph.by_name[target.name].op == "input":
            return False
    operands = data_operands(node)
    if not operands:
        return False
    tensor_seen = False
    for index, operand in enumerate(operands):
        if isinstance(operand, (Ref, Attr)):
            shape = node.attrs.get("arg_shapes", {}).get(index) or graph.shape_of(operand)
            if shape is None or str(graph.dtype_of(operand)) not in FLOAT + ("torch.bool",):
                return False
            if len(shape) > len(node.shape) or not _broadcasts(tuple(shape), node.shape):
                return False
            tensor_seen = True
        elif isinstance(operand, bool) or not isinstance(operand, (int, float)):
            return False
    if not tensor_seen:
        return False
    return triton_expr(node, ["x"] * len(operands), operands) is not None


def _broadcasts(shape: tuple[int, ...], domain: tuple[int, ...]) -> bool:
    return all(s in (1, d) for s, d in zip(aligned(shape, len(domain)), domain))


def placement_ok(graph: Graph, covered: set[str], outputs: set[str]) -> bool:
    """True when the covered nodes can run as one unit at the position of the last of them."""
    place = max(graph.position[n] for n in covered)
    for name in covered:
        for user in graph.users(name):
            if user in covered:
                continue
            if name not in outputs or graph.position[user] < place:
                return False
        if graph.is_output(name) and name not in outputs:
            return False
    return True


def external_users(graph: Graph, covered: set[str]) -> set[str]:
    """Covered nodes whose values are needed outside (by PyTorch code or as module outputs)."""
    return {n for n in covered
            if graph.is_output(n) or any(u not in covered for u in graph.users(n))}


def group_pointwise(graph: Graph, allowed: set[str]) -> list[Body]:
    """Greedy maximal pointwise groups over nodes in `allowed`, each one valid kernel.

    A node joins (and so merges) every group it reads from that has its shape, when the union
    can still run as one unit; otherwise it starts a group of its own.
    """
    groups: dict[int, list[Node]] = {}
    group_of: dict[str, int] = {}
    for node in graph.nodes:
        if node.name not in allowed:
            continue
        candidates = []
        for operand in data_operands(node):
            if isinstance(operand, Ref) and operand.name in group_of:
                gi = group_of[operand.name]
                if gi not in candidates and groups[gi][0].shape == node.shape:
                    candidates.append(gi)
        merged: list[Node] = [node]
        taken: list[int] = []
        for gi in candidates:
            trial = groups[gi] + merged
            covered = {m.name for m in trial}
            if placement_ok(graph, covered, external_users(graph, covered)):
                merged = trial
                taken.append(gi)
        gid = taken[0] if taken else len(group_of) + len(groups) + 1
        for gi in taken:
            groups.pop(gi)
        members = sorted(merged, key=lambda m: graph.position[m.name])
        groups[gid] = members
        for m in members:
            group_of[m.name] = gid
    bodies = []
    for members in sorted(groups.values(), key=lambda ms: graph.position[ms[0].name]):
        covered = {m.name for m in members}
        outputs = [m.name for m in members if m.name in external_users(graph, covered)]
        bodies.append(Body(members, tuple(members[0].shape), outputs))
    return bodies


def single_consumer_body(bodies: list[Body], producer: str, graph: Graph) -> Body | None:
    """The body whose first node consumes `producer` as its only user (an epilogue candidate)."""
    users = graph.users(producer)
    if not users or graph.is_output(producer):
        return None
    for body in bodies:
        if set(users) <= body.names():
            return body
    return None


def body_feeding(bodies: list[Body], consumer: Node, operand: Any, graph: Graph) -> Body | None:
    """The body producing `operand` whose only externally used value is that operand, used only by
    `consumer`: it can run as the consumer's prologue."""
    if not isinstance(operand, Ref):
        return None
    for body in bodies:
        if operand.name in body.names():
            if body.outputs == [operand.name] and graph.users(operand.name) == [consumer.name] \
                    and not graph.is_output(operand.name):
                return body
    return None


def is_reshape(node: Node, graph: Graph) -> bool:
    """A reshape of one tensor (a view, flatten, squeeze...): the same elements in the same logical order."""
    source = node.args[0] if node.args else None
    if node.op not in RESHAPES or not isinstance(source, Ref) or node.shape is None or node.multi:
        return False
    before = graph.by_name[source.name]
    return before.shape is not None and math.prod(before.shape) == math.prod(node.shape) \
        and before.dtype == node.dtype


def reshapes_after(graph: Graph, name: str) -> list[str]:
    """The reshapes that follow `name` one after another, each the only user of the value before it."""
    chain: list[str] = []
    while not graph.is_output(name):
        users = graph.users(name)
        if len(users) != 1 or not is_reshape(graph.by_name[users[0]], graph):
            break
        name = users[0]
        chain.append(name)
    return chain


def reshapes_before(graph: Graph, operand: Any, consumer: Node) -> tuple[list[str], Any, Node]:
    """(reshapes, source, first consumer): the reshapes that lead to `operand`, each used only by the
    next one (the last by `consumer`), the value they start from, and the node that reads it."""
    chain: list[str] = []
    while isinstance(operand, Ref) and is_reshape(graph.by_name[operand.name], graph) \
            and graph.users(operand.name) == [consumer.name] and not graph.is_output(operand.name):
        consumer = graph.by_name[operand.name]
        chain.insert(0, consumer.name)
        operand = consumer.args[0]
    return chain, operand, consumer
