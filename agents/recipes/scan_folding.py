"""Scans written around a plain cumsum / cumprod, folded into one scan node that fused_scan lowers whole.

- `flip(scan(flip(x, d), d), d)` -> a reverse scan of x (`reverse`): element i combines x[i:].
- `cat((I, scan(x[0 : L-1 along d])), d)`, with I the scan's identity (zeros for cumsum, ones
  for cumprod) of length 1 along d -> an exclusive scan of x (`exclusive`): element i combines
  x[:i]. Its mirror, `cat((reverse_scan(x[1 : L along d]), I), d)`, is an exclusive reverse scan.
  The window may be written as `x.narrow(d, start, length)` or as a slice (`x[..., :-1]`).

Without the fold, the flips, the window's copy, the identity block and the cat are each a pass
over memory around the scan kernel; folded, the kernel reads x (shifted by one element for an
exclusive scan) and writes the result once. The folded node keeps the name of the node it
replaces (the outer flip, the cat) and PyTorch text that computes the same value.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.graph import Graph, Node, Ref, operand_code
from kskill.agents.recipes.matching import arg, first_operand, is_float, normalise_dims

IDENTITY = {"cumsum": 0.0, "cumprod": 1.0}
FILLS = {"zeros": 0.0, "zeros_like": 0.0, "ones": 1.0, "ones_like": 1.0}


def scan_dim(node: Node) -> int | None:
    """The (non-negative) dim of a float cumsum / cumprod without a dtype cast, or None."""
    if node.op not in IDENTITY or not is_float(node) or node.attrs.get("dtype") or not node.shape:
        return None
    dim = arg(node, "dim", 1)
    return dim % len(node.shape) if isinstance(dim, int) and not isinstance(dim, bool) else None


def scan_text(op: str, source: Any, dim: int, size: int, reverse: bool = False, exclusive: bool = False) -> str:
    """PyTorch text of a scan of `source` (of `size` along `dim`), as the folded forms write it."""
    x = operand_code(source)
    inner = f"{x}.narrow({dim}, {int(reverse)}, {size - 1})" if exclusive else x
    text = f"torch.{op}({inner}.flip({dim}), dim={dim}).flip({dim})" if reverse else f"torch.{op}({inner}, dim={dim})"
    if not exclusive:
        return text
    identity = f"torch.{'zeros_like' if op == 'cumsum' else 'ones_like'}({x}.narrow({dim}, 0, 1))"
    first, second = (text, identity) if reverse else (identity, text)
    return f"torch.cat(({first}, {second}), dim={dim})"


def fold_scans(graph: Graph) -> list[str]:
    """Fold every reverse, then every exclusive, scan in place; returns what was folded."""
    done = []
    for fold in (_fold_reverse, _fold_exclusive):
        for node in list(graph.nodes):
            description = fold(graph, node)
            if description is not None:
                done.append(description)
                graph.reindex()
                graph.drop_unused()  # the bypassed nodes, so that the next fold sees the window's only user
    return done


def _fold_reverse(graph: Graph, outer: Node) -> str | None:
    dim = _flip_dim(outer)
    scan = _sole_producer(graph, first_operand(outer), outer)
    if dim is None or scan is None or scan_dim(scan) != dim or scan.attrs.get("reverse") or scan.attrs.get("exclusive"):
        return None
    inner = _sole_producer(graph, first_operand(scan), scan)
    if inner is None or _flip_dim(inner) != dim:
        return None
    _become_scan(outer, scan.op, first_operand(inner), dim, reverse=True, exclusive=False)
    return f"{outer.name}: flip, {scan.op}, flip as a reverse {scan.op} along dim {dim}"


def _fold_exclusive(graph: Graph, cat: Node) -> str | None:
    if cat.op != "cat" or not cat.shape:
        return None
    tensors, dim = arg(cat, "tensors", 0), arg(cat, "dim", 1, 0)
    if not isinstance(tensors, (tuple, list)) or len(tensors) != 2 or not isinstance(dim, int):
        return None
    dim %= len(cat.shape)
    size = cat.shape[dim]
    for reverse in (False, True):
        scan_ref, identity_ref = (tensors[0], tensors[1]) if reverse else (tensors[1], tensors[0])
        scan = _sole_producer(graph, scan_ref, cat)
        if scan is None or scan_dim(scan) != dim or bool(scan.attrs.get("reverse")) != reverse \
                or scan.attrs.get("exclusive"):
            continue
        window = _sole_producer(graph, first_operand(scan), scan)
        identity = _sole_producer(graph, identity_ref, cat)
        if window is None or identity is None or _window(window, graph) != (dim, int(reverse), size - 1):
            continue
        source = first_operand(window)
        one = cat.shape[:dim] + (1,) + cat.shape[dim + 1:]
        if graph.shape_of(source) != cat.shape or _fill(identity) != IDENTITY[scan.op] \
                or identity.shape != one or not (identity.dtype == scan.dtype == cat.dtype == graph.dtype_of(source)):
            continue
        _become_scan(cat, scan.op, source, dim, reverse=reverse, exclusive=True)
        form = "exclusive reverse" if reverse else "exclusive"
        return f"{cat.name}: cat of the identity and a shifted {scan.op} as an {form} scan along dim {dim}"
    return None


def _become_scan(node: Node, op: str, source: Any, dim: int, reverse: bool, exclusive: bool) -> None:
    node.op, node.args = op, (source,)
    node.attrs = {"input": source, "dim": dim, "dtype": None, "reverse": reverse, "exclusive": exclusive}
    node.code = scan_text(op, source, dim, node.shape[dim], reverse, exclusive)


def _sole_producer(graph: Graph, operand: Any, user: Node) -> Node | None:
    """The node behind `operand` when `user` is all that reads it (so a fold may drop it)."""
    if not isinstance(operand, Ref) or graph.users(operand.name) != [user.name] or graph.is_output(operand.name):
        return None
    node = graph.by_name[operand.name]
    return None if node.multi or node.attrs.get("inplace") else node


def _flip_dim(node: Node) -> int | None:
    if node.op != "flip" or not node.shape:
        return None
    dims = arg(node, "dims", 1)
    dims = normalise_dims(dims, len(node.shape)) if dims is not None else None
    return dims[0] if dims is not None and len(dims) == 1 else None


def _window(node: Node, graph: Graph) -> tuple[int, int, int] | None:
    """(dim, start, length) of a narrow, or of a slice that narrows one dim with step 1."""
    shape = graph.shape_of(first_operand(node))
    if not shape:
        return None
    if node.op == "narrow":
        dim, start, length = arg(node, "dim", 1), arg(node, "start", 2), arg(node, "length", 3)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dim, start, length)):
            return None
        dim %= len(shape)
        return dim, start % shape[dim], length
    if node.op != "getitem" or len(node.args) != 2:
        return None
    index = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
    if index.count(Ellipsis) > 1 or len(index) - index.count(Ellipsis) > len(shape) \
            or not all(isinstance(i, slice) or i is Ellipsis for i in index):
        return None
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - len(index) + 1) + index[at + 1:]
    narrowed = []
    for dim, (part, size) in enumerate(zip(index, shape)):
        try:
            start, stop, step = part.indices(size)
        except TypeError:  # a bound that is not a number
            return None
        if step != 1:
            return None
        if (start, stop) != (0, size):
            narrowed.append((dim, start, max(stop - start, 0)))
    return narrowed[0] if len(narrowed) == 1 else None


def _fill(node: Node) -> float | None:
    """The value a constant-filled tensor (zeros, ones_like, full...) holds, or None."""
    if node.op in FILLS:
        return FILLS[node.op]
    if node.op in ("full", "full_like"):
        value = arg(node, "fill_value", 1)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return None
