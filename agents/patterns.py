"""Structural patterns of a captured reference that decide which skill applies.

Each function reads the OpGraph of one reference (nothing is run) and answers one question the
skill base's conditions ask: how much pointwise work follows a contraction or precedes a row
operator, whether a convolution is depthwise or narrowly grouped, whether a GEMM's result is
triangular, whether a scalar reduction is a loss written out, and how many kernels a recurrent
layer launches per forward. The feature names they feed are defined in
graph_schema/skills/metrics.yaml.
"""

from __future__ import annotations

import ast
import math

from kskill.agents.op_graph import ROW_FAMILIES, OpGraph, OpNode

CONTRACTIONS = ("gemm", "convolution")
TRIANGULAR = ("tril", "triu")
# Kernels a cuDNN/ATen recurrent layer launches per time step and direction: the step's hidden-state
# GEMM and its gate pointwise kernel (the input projection of all steps is one GEMM per layer).
RECURRENT_LAUNCHES_PER_STEP = 2
# Norms computed from statistics of their own input alone (not batch norm's running buffers, not RMSNorm)
SPLIT_NORMS = frozenset("""layernorm layer_norm native_layer_norm groupnorm group_norm native_group_norm instancenorm1d
    instancenorm2d instancenorm3d instance_norm""".split())


def epilogue_chain(graph: OpGraph) -> int:
    """Size of the largest pointwise group that takes every use of a GEMM or convolution result.

    The result may be used more than once inside the group (x * sigmoid(x), a residual x + y): an
    epilogue kernel holds it in registers for every use. A use outside the group (another op, or
    the forward's output) leaves the product to be written anyway, so that contraction counts 0.
    """
    return max((_epilogue_size(graph, n) for n in graph.compute_nodes() if n.family in CONTRACTIONS), default=0)


def row_op_chain(graph: OpGraph) -> int:
    """Size of the largest pointwise group a row operator's kernel (reduction, softmax, normalization,
    pooling, scan, loss) could absorb: one whose values only that operator reads (computed as it
    loads), or one that takes every use of the operator's result (applied before its store)."""
    group = graph.group_of()
    best = 0
    for row in graph.compute_nodes():
        if row.family not in ROW_FAMILIES:
            continue
        best = max(best, _epilogue_size(graph, row))
        for producer in graph.producers(row):
            if producer.family != "pointwise":
                continue
            members = graph.group_members(group[producer.name])
            inside = {m.name for m in members}
            readers = {c.name for m in members for c in graph.value_consumers(m) if c.name not in inside}
            if readers == {row.name}:
                best = max(best, len(members))
    return best


def norm_into_row_op(graph: OpGraph) -> int:
    """Layer, group and instance norms whose result reaches another row operator (a reduction, pooling, softmax, loss or
    norm) through pointwise ops alone. Split into statistics and a pointwise affine pass, such a norm's
    output need never be written: the affine pass runs as the row operator loads its input."""
    count = 0
    for norm in graph.compute_nodes():
        if norm.op not in SPLIT_NORMS:
            continue
        frontier, seen = list(graph.value_consumers(norm)), set()
        while frontier:
            node = frontier.pop()
            if node.name in seen:
                continue
            seen.add(node.name)
            if node.family in ROW_FAMILIES:
                count += 1
                break
            if node.family == "pointwise":
                frontier += graph.value_consumers(node)
    return count


def _epilogue_size(graph: OpGraph, node: OpNode) -> int:
    """Size of the pointwise group that takes every use of `node`'s result; 0 when any use is elsewhere."""
    users = graph.value_consumers(node)
    if not users or any(u.family != "pointwise" for u in users):
        return 0
    group = graph.group_of()
    return graph.pointwise_groups()[users[0].name] if len({group[u.name] for u in users}) == 1 else 0


def conv_groups(node: OpNode) -> tuple[int, int] | None:
    """(groups, input channels) of a non-transposed convolution, or None for any other op.

    Module calls carry `groups` as an attribute (torch.fx); ATen's `convolution(input, weight, bias,
    stride, padding, dilation, transposed, output_padding, groups)` carries it as its last operand.
    """
    if node.family != "convolution" or not node.input_shapes or len(node.input_shapes[0]) < 3:
        return None
    if "transpose" in node.op:
        return None
    if "groups" in node.attrs:
        groups = node.attrs["groups"]
    else:
        scalars = [c for c in node.constants if not isinstance(c, (list, tuple))]
        if len(scalars) < 2 or scalars[-2] is True:  # the `transposed` flag
            return None
        groups = scalars[-1]
    if not isinstance(groups, int) or isinstance(groups, bool):
        return None
    return groups, node.input_shapes[0][1]


def min_group_width(graph: OpGraph) -> int | None:
    """Input channels per group of the narrowest grouped 2-d convolution (1 for a depthwise one), or
    None when no 2-d convolution has more than one group."""
    widths = []
    for node in graph.compute_nodes():
        found = conv_groups(node)
        if found is not None and found[0] > 1 and len(node.input_shapes[0]) == 4:
            groups, channels = found
            widths.append(channels // groups)
    return min(widths) if widths else None


def triangular_gemms(graph: OpGraph) -> int:
    """torch.tril / torch.triu applied to a GEMM's result: half of the product's tiles are zero."""
    return sum(1 for node in graph.compute_nodes() if node.op in TRIANGULAR
               and any(p.family == "gemm" for p in graph.producers(node)))


def written_out_loss(graph: OpGraph) -> bool:
    """A reduction to one value of elementwise (and row) work over two or more of the forward's
    inputs, with no contraction in between: a loss written out (torch.mean((p - t) ** 2),
    torch.mean(torch.clamp(1 - p * t, min=0)))."""
    for node in graph.compute_nodes():
        if node.family != "reduction" or node.shape is None or math.prod(node.shape) != 1:
            continue
        inputs, seen, frontier = set(), set(), [node]
        while frontier:
            current = frontier.pop()
            for p in graph.producers(current):
                if p.name in seen:
                    continue
                seen.add(p.name)
                if p.family == "placeholder":
                    inputs.add(p.name)
                elif p.family in ("pointwise", "reduction", "other"):
                    frontier.append(p)
                elif p.family in CONTRACTIONS or p.family == "attention":
                    inputs.clear()
                    frontier = []
                    break
        if len(inputs) >= 2:
            return True
    return False


def recurrent_launches(node: OpNode) -> int:
    """Kernels a recurrent layer (nn.RNN, nn.LSTM, nn.GRU) launches per forward beyond one:
    RECURRENT_LAUNCHES_PER_STEP per time step, layer and direction. A cell runs one step."""
    if node.family != "recurrent" or "cell" in node.op or not node.input_shapes:
        return 0
    layers, bidirectional, batch_first = _recurrent_settings(node)
    shape = node.input_shapes[0]
    steps = shape[1] if batch_first and len(shape) == 3 else shape[0]
    return max(0, RECURRENT_LAUNCHES_PER_STEP * steps * layers * (2 if bidirectional else 1) - 1)


def _recurrent_settings(node: OpNode) -> tuple[int, bool, bool]:
    """(num_layers, bidirectional, batch_first): module attributes (torch.fx), or the operands of
    ATen's `lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)`."""
    if "num_layers" in node.attrs:
        return (int(node.attrs["num_layers"]), bool(node.attrs.get("bidirectional")),
                bool(node.attrs.get("batch_first")))
    scalars = [c for c in node.constants if isinstance(c, (bool, int, float))]
    if len(scalars) >= 6:  # has_biases, num_layers, dropout, train, bidirectional, batch_first
        return int(scalars[1]), bool(scalars[4]), bool(scalars[5])
    return 1, False, False


def has_time_loop(source: str) -> bool:
    """Whether Model.forward steps through a sequence in a Python loop: a `for` over `range(...)` whose
    body indexes a tensor with the loop variable and carries a value from one step to the next."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    forward = next((f for f in (model.body if model else []) if isinstance(f, ast.FunctionDef)
                    and f.name == "forward"), None)
    if forward is None:
        return False
    inputs = {a.arg for a in forward.args.args[1:]}
    return any(_is_time_loop(loop, inputs) for loop in ast.walk(forward) if isinstance(loop, ast.For))


def _is_time_loop(loop: ast.For, inputs: set[str]) -> bool:
    """`for t in range(...)` that reads an input at step t and carries a value to the next step."""
    if not (isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "range"
            and isinstance(loop.target, ast.Name)):
        return False
    step = loop.target.id
    steps_input = any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in inputs
                      and any(isinstance(m, ast.Name) and m.id == step for m in ast.walk(n.slice))
                      for stmt in loop.body for n in ast.walk(stmt))
    return steps_input and bool(_carried(loop.body) - {step})


def _carried(body: list[ast.stmt]) -> set[str]:
    """Names a loop body reads before it assigns them: values handed from one iteration to the next."""
    stored = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assigned_so_far: set[str] = set()
    carried: set[str] = set()
    for stmt in body:
        names = [n for n in ast.walk(stmt) if isinstance(n, ast.Name)]
        carried |= {n.id for n in names if isinstance(n.ctx, ast.Load) and n.id in stored
                    and n.id not in assigned_so_far}
        assigned_so_far |= {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return carried
