"""cuda_graph: the whole forward captured once as a CUDA graph on static buffers, then replayed.

Removes the per-launch CPU cost of every kernel of the forward (the launch overhead of networks
made of many short kernels, and of recurrent models' time loops). Declined when an op is random
or synchronises with the host, since a replay would repeat its first result or never sync.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import Applicability, Recipe
from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.pointwise_ops import is_identity_dropout

RANDOM_OR_SYNC = ("dropout", "rand", "randn", "rand_like", "randn_like", "bernoulli", "multinomial",
                  "nonzero", "item", "tolist", "unique", "masked_select", "randint", "normal")


def graph_capture_blocker(graph: Graph) -> str | None:
    """Why the forward cannot be captured as a CUDA graph, or None."""
    if not graph.inputs():
        return "the forward takes no tensor input"
    for node in graph.nodes:
        if node.op in RANDOM_OR_SYNC and not (node.op == "dropout" and is_identity_dropout(node)):
            return f"{node.name} ({node.op}) is random or synchronises with the host"
        if node.op == "input" and str(node.dtype) == "None":
            return f"input {node.name} is not a tensor"
    return None


CUDA_GRAPH_METHODS = '''
    def _replay(self, *inputs):
        """Runs the whole forward as one CUDA graph replay on static input buffers.

        Captured once per input signature after one warm-up run (which compiles the kernels);
        the module's buffers are restored after the warm-up so running statistics advance
        exactly once per call, as in the reference. Returns fresh tensors, never the graph's
        static output buffers.
        """
        key = tuple((tuple(t.shape), t.dtype, t.device) for t in inputs)
        if getattr(self, "_graph_key", None) != key:
            static_inputs = [t.clone() for t in inputs]
            saved = [b.clone() for b in self.buffers()]
            with torch.no_grad():
                self._forward(*static_inputs)
                for buffer, value in zip(self.buffers(), saved):
                    buffer.copy_(value)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_output = self._forward(*static_inputs)
            self._graph, self._graph_key = graph, key
            self._static_inputs, self._static_output = static_inputs, static_output
        for static, t in zip(self._static_inputs, inputs):
            static.copy_(t)
        self._graph.replay()
        return _fresh(self._static_output)
'''

FRESH = '''
def _fresh(value):
    """Copies of a graph's static outputs, so a later replay cannot overwrite what was returned."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    return type(value)(_fresh(v) for v in value)
'''


class CudaGraph(Recipe):
    id = "cuda_graph"
    summary = "capture the whole forward as one CUDA graph on static buffers (removes launch overhead)"

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        blocker = graph_capture_blocker(graph)
        if blocker:
            return Applicability(False, blocker)
        return Applicability(True, f"{sum(1 for n in graph.nodes if n.op != 'input')} ops per forward "
                                   "would replay as one graph launch")

    def configure(self, ctx: Any) -> None:
        if graph_capture_blocker(ctx.graph) is None:
            ctx.flags["cuda_graph"] = True
            ctx.mark(self.id)


RECIPE = CudaGraph()
