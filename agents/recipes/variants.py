"""Launch and precision variants worth timing for a technique sequence on one reference.

The defaults of every template are one point each; where a region has a second form that can
win or lose depending on the GPU and the shapes (a Triton GEMM with tensor-core "tf32x3" dots
against cuBLAS's fp32 CUDA-core GEMM; flash attention with "tf32x3" dots against exact fp32
dots), the alternatives are listed here as params for `build_candidate`, so a caller times
them side by side and keeps what measures faster. Both forms hold fp32 tolerances.
"""

from __future__ import annotations

from typing import Any, Sequence

from kskill.agents.recipes import analysis
from kskill.agents.recipes.capture import capture
from kskill.agents.recipes.errors import CaptureError


def param_variants(problem_source: str, techniques: Sequence[str]) -> list[dict[str, Any]]:
    """Alternative params (besides the defaults, `{}`) for `build_candidate(source, techniques, params)`."""
    try:
        graph = capture(problem_source)
    except CaptureError:
        return []
    out: list[dict[str, Any]] = []
    if "gemm_epilogue_fusion" in techniques and any(_triton_gemm_site(n, graph) for n in graph.nodes):
        out.append({"gemm_backend": "triton", "dot_precision": "tf32x3"})
    if "flash_attention" in techniques and any(analysis.attention_region(n, graph) for n in graph.nodes):
        out.append({"dot_precision": "tf32x3"})
    return out


def _triton_gemm_site(node: Any, graph: Any) -> bool:
    """A 2-d linear / matmul with an epilogue: the only GEMMs the Triton backend takes."""
    return (node.op in ("linear", "matmul") and len(node.shape or ()) == 2
            and analysis.gemm_region(node, graph) is not None)
