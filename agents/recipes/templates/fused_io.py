"""Reading an anchor's input through its prologue, writing its result through its epilogue.

Shared by the reduction, softmax, normalisation, scan, pooling and loss templates, so each of
them only writes its own arithmetic: operands are collected once, pointer arguments named once,
and the launcher text (contiguous inputs, output allocation, the launch) is built here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kskill.agents.recipes.gemm_epilogue_fusion import ACC, CHANNELS_LAST_OPS, anchor_inputs, product_text
from kskill.agents.recipes.graph import Graph, Node, Ref
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.kernel_fusion import body_shape
from kskill.agents.recipes.templates.common import (
    MEMORY_FORMATS, Body, channels_last_order, emit_body, operand_key, to_channels_last, wide_index)
from kskill.agents.recipes.templates.unit import (
    KernelUnit, alloc, arg_name, pointer_args, prepare, store_cast)


@dataclass
class FusedIO:
    """Operands and outputs of one region's kernel."""

    region: Region
    graph: Graph
    perm: tuple[int, ...] | None = None  # the memory order of the iteration domain (channels-last), if not row-major
    perm_out: bool = True  # results stored in that order too; False: in the NCHW order of the result
    operands: list[Any] = field(default_factory=list)
    ptrs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        r = self.region
        if r.prologue is not None:
            self.add_all(r.prologue.external(self.graph))
        else:
            op = r.extra.get("prologue_operand")
            if op is not None:
                self.add(op)
        if r.epilogue is not None:
            self.add_all(epilogue_operands(r, self.graph))

    def add(self, operand: Any) -> str:
        key = operand_key(operand)
        if key not in self.ptrs:
            self.operands.append(operand)
            self.ptrs[key] = "acc_ptr" if key == ACC else pointer_args([operand])[key]
        return self.ptrs[key]

    def launcher_inputs(self) -> list[Any]:
        """What the launcher is called with: the operands, with an adopted product's inputs in place of
        the product itself (builder._adopt_products), which the launcher computes first."""
        adopted = self.region.extra.get("adopted")
        if adopted is None:
            return list(self.operands)
        a, w, _ = anchor_inputs(adopted)
        rest = [o for o in self.operands if operand_key(o) != ACC]
        return [a, w] + [o for o in rest if o not in (a, w)]

    def add_all(self, operands: list[Any]) -> None:
        for op in operands:
            self.add(op)

    @property
    def wide(self) -> bool:
        """Whether any tensor this kernel reads or writes needs 64-bit offsets."""
        adopted = self.region.extra.get("adopted")
        shapes = [adopted.shape if operand_key(o) == ACC else self.graph.shape_of(o) for o in self.operands]
        shapes += [n.shape for n in self.outputs()]
        return wide_index(*shapes)

    def load_input(self, offs: str, mask: str, other: str = "0.0", var: str = "x",
                   prefix: str = "p") -> tuple[list[str], str]:
        """Statements giving the anchor's input value at `offs` (fp32): named `var`, or with a prologue, its
        last variable (all of them named `prefix`...), so that a second load can keep the first one's value."""
        r = self.region
        if r.prologue is not None:
            em = emit_body(r.prologue, self.graph, self.ptrs, offs, mask, perm=self.perm, prefix=prefix)
            value = em.var_of[r.prologue.outputs[0]]
            return em.lines, value
        ptr = self.ptrs[operand_key(r.extra["prologue_operand"])]
        return [f"{var} = tl.load({ptr} + {offs}, mask={mask}, other={other}).to(tl.float32)"], var

    def outputs(self) -> list[Node]:
        r = self.region
        if r.epilogue is not None:
            return [self.graph.by_name[o] for o in r.epilogue.outputs]
        return [self.graph.by_name[r.extra.get("output", r.anchor.name)]]

    def store_result(self, value: str, offs: str, mask: str, loaded: str | None = None) -> list[str]:
        """Statements applying the epilogue to `value` and storing every output at `offs`. `loaded`: the variable
        holding the anchor's input at `offs`, which an epilogue that reads an adopted product again is given."""
        r = self.region
        anchor_out = r.extra.get("output", r.anchor.name)
        var_of = {anchor_out: value}
        lines: list[str] = []
        if r.epilogue is not None:
            # the epilogue may read the result through reshapes (epilogue_input): the same value at offs
            provided = {anchor_out: value, r.extra.get("epilogue_input", anchor_out): value}
            if r.extra.get("reread"):
                if loaded is None:
                    raise ValueError(f"{r.kind} template does not hand its input to an epilogue that reads it again")
                provided[r.extra["reread"]] = loaded
            em = emit_body(r.epilogue, self.graph, self.ptrs, offs, mask, provided=provided,
                           perm=self.perm if self.perm_out else None, prefix="e")
            lines += em.lines
            var_of = em.var_of
        for i, node in enumerate(self.outputs()):
            lines.append(f"tl.store(out{i}_ptr + {offs}, {var_of[node.name]}.to({store_cast(node.dtype)}), "
                         f"mask={mask})")
        return lines

    def input_ptrs(self) -> str:
        """The kernel parameters of the operands alone (a statistics or partials kernel writes no output)."""
        return ", ".join(self.ptrs[operand_key(o)] for o in self.operands)

    def operand_names(self) -> list[str]:
        """The launcher's names of the operands, in the kernels' order."""
        return [arg_name(o) for o in self.operands]

    def kernel_args(self, extra: list[str] = ()) -> str:
        outs = [f"out{i}_ptr" for i in range(len(self.outputs()))]
        return ", ".join([self.ptrs[operand_key(o)] for o in self.operands] + list(extra) + outs)

    def launcher(self, name: str, grid: str, sizes: str, body_before: list[str] = (),
                 extra_args: list[str] = (), launch_opts: str = "", repair: str = "",
                 body_after: list[str] = ()) -> str:
        """def name(operands): contiguous inputs, allocate outputs, launch, return outputs. `repair`: launch
        options of a second launch with the same arguments (templates/exchange.py). `body_after`: lines after
        the launches, which may read the first launch's compiled kernel as `launched`."""
        params = self.operand_names()
        src = [f"def {name}({', '.join(arg_name(o) for o in self.launcher_inputs())}):"]
        adopted = self.region.extra.get("adopted")
        if adopted is not None:
            a, w, _ = anchor_inputs(adopted)
            a_text, w_text = arg_name(a), arg_name(w)
            if self.perm is not None:  # cuDNN's channels-last kernels; the kernel reads their output as it lies
                fmt = MEMORY_FORMATS[len(self.perm)]
                a_text, w_text = to_channels_last(a_text), f"{w_text}.contiguous(memory_format={fmt})"
            src.append(f"    {arg_name(Ref(ACC))} = {product_text(adopted, a_text, w_text)}"
                       "  # cuBLAS/cuDNN without its bias: the bias is added as this kernel reads it")
        for o in self.operands:
            src.append(f"    {arg_name(o)} = {self._prepare(o)}")
        src += [f"    {line}" for line in body_before]
        like = params[0]
        for i, node in enumerate(self.outputs()):
            src.append(f"    out{i} = {alloc(tuple(node.shape or ()), node.dtype, like)}")
        outs = [f"out{i}" for i in range(len(self.outputs()))]
        args = params + list(extra_args) + outs
        for i, options in enumerate([launch_opts] + ([repair] if repair else [])):
            opts = ", ".join(x for x in (sizes, options) if x)
            keep = "launched = " if body_after and i == 0 else ""
            src.append(f"    {keep}{name}_kernel[{grid}]({', '.join(args)}, {opts})")
        src += [f"    {line}" for line in body_after]
        src.append(f"    return {', '.join(outs)}")
        return "\n".join(src) + "\n"

    def _prepare(self, operand: Any) -> str:
        """Launcher text for an operand; in a channels-last region, the prologue's operands in that memory
        order (the product as cuDNN left it, a per-channel bias as C contiguous values), and the epilogue's own
        in the order its results are stored in."""
        prologue = self.region.prologue
        if self.perm is None or prologue is None:
            return prepare(operand, self.graph)
        if operand_key(operand) == ACC:
            return f"{arg_name(operand)}.permute{self.perm}.contiguous()"
        if not self.perm_out and operand_key(operand) not in {operand_key(o) for o in prologue.external(self.graph)}:
            return prepare(operand, self.graph)
        return prepare(operand, self.graph, prologue.domain, True, body_shape(prologue, self.graph, operand))

    def unit(self, name: str, kernel: str, launcher: str, params: dict[str, Any]) -> KernelUnit:
        return KernelUnit(name, kernel, launcher, self.launcher_inputs(), [n.name for n in self.outputs()],
                          params, self.region.technique)


def adopted_channels_last(region: Region, graph: Graph) -> tuple[int, ...] | None:
    """The memory order (NHWC, NDHWC) in which a region can read the convolution product it adopted
    (builder._adopt_products), so that cuDNN writes the product channels-last and converts neither its input
    nor its output between layouts; each template then checks that its own walk suits it, and stores its
    results in their NCHW order (FusedIO.perm_out false: the epilogue's operands are indexed so). None when
    the region adopted no convolution with a channels-last format or its prologue does not span the product."""
    conv = region.extra.get("adopted")
    if conv is None or conv.op not in CHANNELS_LAST_OPS or region.prologue is None or _read_in_both_orders(region, graph):
        return None
    perm = channels_last_order(len(conv.shape))
    return perm if perm is not None and region.prologue.domain == tuple(conv.shape) else None


def _read_in_both_orders(region: Region, graph: Graph) -> bool:
    """Whether the epilogue reads a tensor the prologue reads too, of two dims or more above 1 (a per-channel or
    a one-value operand lies the same in either order): FusedIO prepares an operand once, in the prologue's
    channels-last order, where the epilogue would index it in NCHW order."""
    if region.epilogue is None:
        return False
    prologue = {operand_key(o) for o in region.prologue.external(graph)}
    return any(operand_key(o) in prologue and sum(d > 1 for d in graph.shape_of(o) or ()) >= 2
               for o in epilogue_operands(region, graph))


def epilogue_operands(region: Region, graph: Graph) -> list[Any]:
    """What the region's epilogue reads from memory: its external operands but the anchor's result (and the views
    of it the epilogue reads) and an adopted product it reads again (`reread`), which are in registers."""
    in_registers = {region.extra.get("output", region.anchor.name), region.extra.get("epilogue_input"),
                    region.extra.get("reread")}
    return [o for o in region.epilogue.external(graph) if not (isinstance(o, Ref) and o.name in in_registers)]


def dtype_of(node: Node) -> torch.dtype:
    return node.dtype or torch.float32
