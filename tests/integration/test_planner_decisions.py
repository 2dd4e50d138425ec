"""The Planner's choices on the built-in skill base, one row per described kernel.

Each row gives the observations the Reviewer and Feature Extractor would report for a kernel
(vocabulary names of graph_schema/skills/metrics.yaml), the technique the Planner must select,
the bottleneck it must select it for, and why the literature agrees. Techniques that the
built-in base never ranks first on fresh observations are reached through a trajectory whose
earlier steps (applied techniques, failed or flat children) make the higher ones tabu, as a real
optimization run would.

Corpus files cited as `corpus:<file>` are under /work/shared/corpus (SOURCES.md gives origin).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kskill.agents.observations import fused_ops
from kskill.agents.planner import Planner
from kskill.graph_schema import queries
from kskill.graph_schema.model import Bottleneck, Metric, Technique
from kskill.graph_schema.skillbase import ensure_builtin, read_builtin
from kskill.graph_schema.store import GraphStore, open_store

# --- trajectories ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """An attempt derived from the parent: what it applied and how it ended."""

    technique: str
    speedup: float | None = None
    status: str = "verified"
    correct: bool = True
    variant: str = ""  # the named variant it was written with ('' for the technique's only form)


@dataclass(frozen=True)
class Lineage:
    """Seed -> applied steps (technique, speedup) -> parent; then the parent's children."""

    applied: tuple[tuple[str, float], ...] = ()
    children: tuple[Child, ...] = ()
    seed_speedup: float = 1.0


DELETE_RUN = "MATCH (a:Attempt {run_id: $run}) DETACH DELETE a WITH count(*) AS n MATCH (r:Run {id: $run}) DETACH DELETE r"


def write_trajectory(store: GraphStore, run: str, lineage: Lineage) -> str:
    """Write the Run, its Attempts and their HAS_ATTEMPT, DERIVED_FROM and APPLIED edges; return the parent id."""
    attempts = [{"id": f"{run}:a0", "props": {"run_id": run, "n": 0, "kind": "seed", "code_hash": f"{run}:h0",
                                              "status": "verified", "correct": True, "speedup": lineage.seed_speedup}}]
    derived, applied = [], []
    for n, (technique, speedup) in enumerate(lineage.applied, start=1):
        attempts.append({"id": f"{run}:a{n}", "props": {"run_id": run, "n": n, "kind": "optimize",
                                                        "code_hash": f"{run}:h{n}", "status": "verified",
                                                        "correct": True, "speedup": speedup}})
        derived.append({"start": f"{run}:a{n}", "end": f"{run}:a{n - 1}", "props": {}})
        applied.append({"start": f"{run}:a{n}", "end": technique, "props": {}})
    parent = f"{run}:a{len(lineage.applied)}"
    for n, child in enumerate(lineage.children, start=len(lineage.applied) + 1):
        props: dict[str, Any] = {"run_id": run, "n": n, "kind": "optimize", "code_hash": f"{run}:h{n}",
                                 "status": child.status, "correct": child.correct}
        if child.speedup is not None:
            props["speedup"] = child.speedup
        if child.variant:
            props["variant"] = child.variant
        attempts.append({"id": f"{run}:a{n}", "props": props})
        derived.append({"start": f"{run}:a{n}", "end": parent, "props": {}})
        applied.append({"start": f"{run}:a{n}", "end": child.technique, "props": {}})
    with store.transaction() as tx:
        tx.write(queries.merge_nodes("Run"), {"rows": [{"id": run, "props": {"problem": run, "status": "running"}}],
                                              "now": "2025-01-01T00:00:00+00:00"})
        tx.write(queries.merge_nodes("Attempt"), {"rows": attempts, "now": "2025-01-01T00:00:00+00:00"})
        tx.write(queries.merge_edges("HAS_ATTEMPT", "Run", "Attempt"),
                 {"rows": [{"start": run, "end": a["id"], "props": {}} for a in attempts]})
        tx.write(queries.merge_edges("DERIVED_FROM", "Attempt", "Attempt"), {"rows": derived})
        tx.write(queries.merge_edges("APPLIED", "Attempt", "Technique"), {"rows": applied})
    return parent


def delete_trajectory(store: GraphStore, run: str) -> None:
    store.write(DELETE_RUN, {"run": run})


# --- observation fragments --------------------------------------------------------------------

HOPPER = {"gpu_name": "NVIDIA H200", "gpu_arch": "hopper", "gpu_sm_count": 132}
KB_FP32 = {"dtype": "float32", "atol": 0.01, "rtol": 0.01}  # KernelBench's default correctness check
TIGHT_FP32 = {"dtype": "float32", "atol": 1e-05, "rtol": 1e-05}
FP16 = {"dtype": "float16", "atol": 0.01, "rtol": 0.01}
BF16 = {"dtype": "bfloat16", "atol": 0.01, "rtol": 0.01}
_NO_TRICKS = {"code_uses_autotune": False, "code_uses_cuda_graph": False, "code_uses_tf32": False,
              "code_uses_channels_last": False, "code_eviction_hints": False, "code_uses_fast_math": False,
              "code_uses_torch_compile": False}
# A seed that calls PyTorch operators only, as the Feature Extractor reports it.
TORCH = {"code_language": "torch", "code_triton_kernels": 0, "code_cuda_kernels": 0, "code_custom_kernels": 0,
         "static_shapes": True, "capture_method": "fx", "simplifiable_patterns": 0, **_NO_TRICKS}


def triton(kernels: int = 1, **more: Any) -> dict[str, Any]:
    """Static features of a candidate with `kernels` Triton kernels."""
    return {"code_language": "triton", "code_triton_kernels": kernels, "code_cuda_kernels": 0,
            "code_custom_kernels": kernels, "static_shapes": True, "simplifiable_patterns": 0,
            **_NO_TRICKS, **more}


def cuda(kernels: int = 1, vector_width: int = 1, **more: Any) -> dict[str, Any]:
    """Static features of a candidate with `kernels` load_inline CUDA kernels."""
    return {"code_language": "cuda", "code_triton_kernels": 0, "code_cuda_kernels": kernels,
            "code_custom_kernels": kernels, "code_vector_width": vector_width, "static_shapes": True,
            "simplifiable_patterns": 0, **_NO_TRICKS, **more}


def memory_bound(sm: float, mem: float, dram: float, **more: Any) -> dict[str, Any]:
    """Speed-of-light numbers of a memory-bound kernel (memory >= 60% of peak and above SM)."""
    return {"sm_throughput_pct": sm, "memory_throughput_pct": mem, "dram_throughput_pct": dram,
            "memory_bound": True, "compute_bound": False, **more}


def compute_bound(sm: float, mem: float, dram: float, **more: Any) -> dict[str, Any]:
    """Speed-of-light numbers of a compute-bound kernel (SM >= 60% of peak and not below memory)."""
    return {"sm_throughput_pct": sm, "memory_throughput_pct": mem, "dram_throughput_pct": dram,
            "memory_bound": False, "compute_bound": True, **more}


def balanced(sm: float, mem: float, dram: float, **more: Any) -> dict[str, Any]:
    """Speed-of-light numbers of a kernel that is neither memory- nor compute-bound."""
    return {"sm_throughput_pct": sm, "memory_throughput_pct": mem, "dram_throughput_pct": dram,
            "memory_bound": False, "compute_bound": False, **more}


def obs(*parts: dict[str, Any], **more: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        merged.update(part)
    merged.update(more)
    if "max_pointwise_chain" in merged:  # derived from it by the Feature Extractor's merge
        merged.setdefault("max_fused_ops", fused_ops(merged["max_pointwise_chain"], merged.get("row_op_pointwise_chain")))
    return merged


# --- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    kernel: str  # what was profiled
    observations: dict[str, Any]
    technique: str
    bottleneck: str
    why: str  # the literature's reason, with its source
    lineage: Lineage | None = None
    tabu: dict[str, str] = field(default_factory=dict)  # technique -> words its rejection reason holds


CASES = [
    # -- row operators split over several kernels (unfused_reduction) and memory-bound references
    Case("softmax_scaled_4096x4096_fp32",
         "x * scale then softmax(dim=-1) over 4096x4096 fp32, eager: 2 kernels, memory bound",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(28.4, 89.1, 87.6), has_softmax=True, has_pointwise=True,
             reduction_like_op_count=1, reduction_length=4096, max_pointwise_chain=1, code_launches_per_forward=2,
             kernel_launches_per_forward=2, cpu_overhead_pct=6.0, transcendental_op_count=1, has_contraction=False),
         "online_softmax", "unfused_reduction",
         "corpus:liger-optimization-strategies.md 3.1: 'naive softmax vs online softmax'; Milakov & Gimelshein 2018"),
    Case("log_softmax_vocab_32x50257_fp32",
         "log_softmax over 32x50257 fp32 logits, one eager kernel reading each row twice, memory bound",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(22.0, 81.5, 80.2), has_softmax=True, reduction_like_op_count=1,
             reduction_length=50257, max_pointwise_chain=0, code_launches_per_forward=1,
             kernel_launches_per_forward=1, cpu_overhead_pct=9.0),
         "online_softmax", "memory_bandwidth",
         "corpus:liger-optimization-strategies.md 2: memory-bound kernels gain only from moving fewer bytes; "
         "online softmax makes one pass per row"),
    Case("softmax_2048x4096_fp32_compute_bound",
         "softmax(dim=-1) over 2048x4096 fp32, one eager kernel; ncu on an H200: SM 65.6%, DRAM 33.7%",
         obs(TORCH, TIGHT_FP32, HOPPER, compute_bound(65.6, 33.7, 33.7), has_softmax=True, reduction_like_op_count=1,
             reduction_length=4096, max_pointwise_chain=0, code_launches_per_forward=1,
             kernel_launches_per_forward=1, has_contraction=False, transcendental_op_count=1),
         "online_softmax", "compute_limited",
         "corpus:liger-optimization-strategies.md 3 (compute-bound, 'NCU compute throughput > 60%'), 3.1: "
         "'naive softmax vs online softmax'; TF32 and vendor libraries do not apply without a contraction"),
    Case("layernorm_gelu_8192x4096_bf16",
         "LayerNorm(4096) then GELU on 8192x4096 bf16, eager: 2 kernels, memory bound",
         obs(TORCH, BF16, HOPPER, memory_bound(31.0, 91.3, 90.1), has_normalization=True, has_pointwise=True,
             reduction_like_op_count=1, reduction_length=4096, max_pointwise_chain=1, code_launches_per_forward=2,
             kernel_launches_per_forward=2, cpu_overhead_pct=4.0, transcendental_op_count=1),
         "fused_normalization", "unfused_reduction",
         "corpus:liger-optimization-strategies.md 5.1: 'Norm + activation' fusion; 3.1 Welford single pass"),
    Case("cross_entropy_4096x32000_fp32",
         "F.cross_entropy on 4096x32000 fp32 logits: log_softmax and nll_loss kernels, memory bound",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(25.0, 86.0, 85.2), has_loss=True, has_softmax=False,
             reduction_like_op_count=1, reduction_length=32000, max_pointwise_chain=0,
             code_launches_per_forward=2, kernel_launches_per_forward=3, cpu_overhead_pct=5.0),
         "fused_loss", "unfused_reduction",
         "corpus:liger-optimization-strategies.md 5.1: kernels that write intermediates to HBM for the next "
         "to read are fused (Liger's fused cross entropy)"),
    Case("cumsum_exp_1024x8192_fp32",
         "torch.cumsum(x, 1) then exp on 1024x8192 fp32, eager: 2 kernels",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(18.0, 74.0, 72.3), has_scan=True, has_pointwise=True,
             reduction_like_op_count=1, reduction_length=8192, max_pointwise_chain=1,
             code_launches_per_forward=2, kernel_launches_per_forward=2, cpu_overhead_pct=12.0),
         "fused_scan", "unfused_reduction",
         "corpus:liger-optimization-strategies.md 2.3: intermediates consumed once should not round-trip "
         "through memory; the scan and its pointwise op fit one pass per row"),
    Case("scale_avgpool_64x256x128x128_fp32",
         "x * 0.5 then avg_pool2d(2) on 64x256x128x128 fp32, eager: 2 kernels",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(20.5, 88.0, 87.0), has_pooling=True, has_pointwise=True,
             reduction_like_op_count=1, reduction_length=4, max_pointwise_chain=1,
             code_launches_per_forward=2, kernel_launches_per_forward=2, cpu_overhead_pct=3.0),
         "fused_pooling", "unfused_reduction",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.17: eager does 'load input, compute, store "
         "output' per op; fusing the pointwise op into the pooling pass removes a round trip"),
    Case("row_sum_abs_16384x16384_fp32",
         "torch.sum(x, -1).abs() on 16384x16384 fp32, eager: 2 kernels",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(12.0, 92.0, 91.4), has_reduction=True, reduction_op_count=1,
             reduction_like_op_count=1, reduction_length=16384, has_pointwise=True, max_pointwise_chain=1,
             code_launches_per_forward=2, kernel_launches_per_forward=2, cpu_overhead_pct=2.0),
         "triton_reduction", "unfused_reduction",
         "corpus:liger-optimization-strategies.md 2.3: 'writes intermediate results that are only consumed once'"),
    # -- pointwise chains and algebra
    Case("gelu_scale_bias_chain_16384x16384_fp32",
         "GELU -> *scale -> +bias -> clamp on 16384x16384 fp32, eager: 4 kernels, memory bound",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(19.0, 90.2, 89.7), has_pointwise=True, pointwise_op_count=4,
             max_pointwise_chain=4, code_launches_per_forward=4, kernel_launches_per_forward=4,
             cpu_overhead_pct=3.0, transcendental_op_count=1, reduction_like_op_count=0),
         "kernel_fusion", "materialized_intermediates",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.17: 'fusing pointwise operations into one kernel'"),
    Case("swish_chain_static_only_cpu",
         "x * sigmoid(x) * 2 + 1 on 4096x4096 fp32, static features only (no GPU to profile on)",
         obs(TORCH, KB_FP32, has_pointwise=True, pointwise_op_count=4, max_pointwise_chain=4,
             code_launches_per_forward=4, est_kernel_launches=4, transcendental_op_count=1,
             reduction_like_op_count=0),
         "kernel_fusion", "materialized_intermediates",
         "corpus:liger-optimization-strategies.md 5.1: kernels on the same data writing intermediates to "
         "HBM are fused; the static chain alone shows it"),
    Case("scalar_chain_x_times_2_div_4_plus_0",
         "((x * 2) / 4) + 0 on 8192x8192 fp32: three scalar ops, eager: 3 kernels",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(15.0, 91.0, 90.4), has_pointwise=True, pointwise_op_count=3,
             max_pointwise_chain=3, simplifiable_patterns=1, code_launches_per_forward=3,
             kernel_launches_per_forward=3, cpu_overhead_pct=5.0),
         "algebraic_simplification", "redundant_work",
         "corpus:liger-optimization-strategies.md 3.2: the same sub-expression computed repeatedly is removed "
         "first; folding constants beats fusing the ops that compute them (expected gain 2.0 vs 1.8)"),
    Case("gemm_then_sum_fp16_8192",
         "Linear(8192->8192) then sum over output columns, fp16 on tensor cores, compute bound",
         obs(TORCH, FP16, HOPPER, compute_bound(81.0, 44.0, 30.0), has_gemm=True, has_contraction=True,
             gemm_m=8192, gemm_n=8192, gemm_k=8192, gemm_mn=67108864, simplifiable_patterns=1,
             has_reduction=True, reduction_like_op_count=1, reduction_length=8192, tensor_pipe_utilization_pct=71.0,
             code_launches_per_forward=2, kernel_launches_per_forward=2, epilogue_chain_after_contraction=0,
             max_pointwise_chain=0, data_reuse=5461.0),
         "algebraic_simplification", "redundant_work",
         "corpus:liger-optimization-strategies.md 3.1: 'a naive algorithm where a more efficient one exists': "
         "sum(x @ W.T) = x @ W.sum(0) turns O(NK) per row into O(K)"),
    # -- contractions
    Case("linear_relu_fp16_8192",
         "Linear(8192->8192) then ReLU in fp16, eager: GEMM + separate ReLU kernel",
         obs(TORCH, FP16, HOPPER, compute_bound(84.0, 40.0, 28.0), has_gemm=True, has_contraction=True,
             gemm_m=8192, gemm_n=8192, gemm_k=8192, gemm_mn=67108864, epilogue_chain_after_contraction=1,
             max_pointwise_chain=1, has_pointwise=True, tensor_pipe_utilization_pct=68.0,
             code_launches_per_forward=2, kernel_launches_per_forward=2, data_reuse=5461.0),
         "gemm_epilogue_fusion", "unfused_epilogue",
         "corpus:cutlass-efficient-gemm.md Epilogue: 'elementwise operations may be conveniently computed "
         "using the matrix product results as inputs'"),
    Case("gemm_fp32_8192_kernelbench_tolerance",
         "torch.matmul 8192^3 fp32 at atol=rtol=1e-2, tensor pipe idle, compute bound",
         obs(TORCH, KB_FP32, HOPPER, compute_bound(93.0, 38.0, 22.0), has_gemm=True, has_contraction=True,
             gemm_m=8192, gemm_n=8192, gemm_k=8192, gemm_mn=67108864, tensor_pipe_utilization_pct=0.0,
             epilogue_chain_after_contraction=0, max_pointwise_chain=0, code_launches_per_forward=1,
             kernel_launches_per_forward=1, data_reuse=5461.0),
         "tf32_tensor_cores", "tensor_core_unused",
         "corpus:liger-optimization-strategies.md 3.3: matmul-like work 'could leverage tensor cores'; TF32 "
         "keeps fp32 range with a 10-bit mantissa, inside a 1e-2 tolerance"),
    Case("naive_triton_gemm_fp32_tight_tolerance",
         "Triton fp32 matmul 4096^3 with tl.dot in ieee precision, atol=rtol=1e-5, compute bound, no tensor cores",
         obs(triton(1, code_uses_tl_dot=True, code_uses_shared_memory=True, code_k_loops=1), TIGHT_FP32, HOPPER,
             compute_bound(88.0, 35.0, 18.0), has_gemm=True, has_contraction=True, gemm_m=4096, gemm_n=4096,
             gemm_k=4096, gemm_mn=16777216, tensor_pipe_utilization_pct=0.0, data_reuse=2730.0,
             code_launches_per_forward=1, kernel_launches_per_forward=1, epilogue_chain_after_contraction=0),
         "vendor_library", "compute_limited",
         "TF32 is ruled out by the 1e-5 tolerance; corpus:pallas-blackwell-matmul.md: beating cuBLAS takes a "
         "state-of-the-art kernel. Both matched bottlenecks give vendor_library priority 80; the tie goes "
         "to the first bottleneck id"),
    Case("skinny_gemm_fp16_256x256x65536",
         "fp16 matmul M=N=256, K=65536: 4 output tiles on 132 SMs",
         obs(TORCH, FP16, HOPPER, balanced(9.0, 21.0, 20.0), has_gemm=True, has_contraction=True, gemm_m=256,
             gemm_n=256, gemm_k=65536, gemm_mn=65536, waves_per_sm=0.03, wave_efficiency=0.03,
             tensor_pipe_utilization_pct=6.0, code_launches_per_forward=1, kernel_launches_per_forward=1),
         "split_k", "skinny_gemm",
         "corpus:cutlass-efficient-gemm.md: 'If both M and N are small while K is large, this scheme may "
         "launch relatively few threadblocks'; corpus:tilelang-gemv.md: parallelism along K"),
    Case("attention_b16_h16_s2048_d64_fp16",
         "attention as bmm -> *scale -> softmax -> bmm, B=16 H=16 S=2048 D=64 fp16, score matrix in DRAM",
         obs(TORCH, FP16, HOPPER, memory_bound(35.0, 84.0, 83.0), has_attention=True, has_softmax=True,
             has_gemm=True, has_contraction=True, reduction_like_op_count=1, reduction_length=2048,
             max_pointwise_chain=1, code_launches_per_forward=4, kernel_launches_per_forward=4,
             cpu_overhead_pct=3.0, epilogue_chain_after_contraction=1),
         "flash_attention", "materialized_attention_scores",
         "Dao et al. 2022 (FlashAttention): tiling to avoid HBM reads/writes of the score matrix; "
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.25"),
    # -- launch overhead
    Case("small_gathers_9_launches_32x512",
         "9 small gathers, cats and pointwise steps on a 32x512 fp32 input; ~3 us per kernel, GPU idle 78%",
         obs(TORCH, KB_FP32, HOPPER, balanced(3.0, 6.0, 4.0), kernel_launches_per_forward=9,
             launches_per_forward=9, code_launches_per_forward=9, cpu_overhead_pct=78.0, max_pointwise_chain=1, has_pointwise=True,
             reduction_like_op_count=0, gpu_kernel_time_ms=0.027),
         "cuda_graph", "launch_overhead",
         "corpus:liger-optimization-strategies.md 5.3: 'very short execution time ... Launch overhead "
         "dominates'; CUDA graphs replay the launches"),
    Case("three_triton_kernels_256x1024",
         "three Triton kernels on a 256x1024 fp32 input, 4 us each, GPU idle 55% of the forward",
         obs(triton(3), KB_FP32, HOPPER, balanced(11.0, 24.0, 20.0), kernel_launches_per_forward=3,
             launches_per_forward=3, code_launches_per_forward=3, cpu_overhead_pct=55.0, max_pointwise_chain=1,
             reduction_like_op_count=0),
         "cuda_graph", "launch_overhead",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.18: 'Kernel Launch: ~3us'; graph capture "
         "removes per-launch CPU cost (corpus:liger-optimization-strategies.md 5.3)"),
    # -- access patterns and memory hierarchy
    Case("triton_column_read_transpose_add",
         "Triton kernel adding x.T to y, reading x by columns: 28.5 sectors per request, memory bound",
         obs(triton(1), KB_FP32, HOPPER, memory_bound(14.0, 83.0, 81.0), global_load_sectors_per_request=28.5,
             dram_traffic_excess=3.4, data_reuse=1.0, max_pointwise_chain=1, code_launches_per_forward=1,
             layout_op_count=1),
         "memory_coalescing", "uncoalesced_access",
         "CUDA C++ Best Practices Guide: 'the single most important performance consideration ... is the "
         "coalescing of global memory accesses'; corpus:hardware-effects-memory-coalescing.md"),
    Case("naive_triton_matmul_one_program_per_output",
         "Triton fp32 matmul 4096^3, one program per output element re-reading rows from DRAM: 11x compulsory",
         obs(triton(1), KB_FP32, HOPPER, memory_bound(21.0, 88.0, 87.0), has_gemm=True, has_contraction=True,
             gemm_m=4096, gemm_n=4096, gemm_k=4096, gemm_mn=16777216, dram_traffic_excess=11.0, gemm_flop_share=1.0,
             data_reuse=2730.0, global_load_sectors_per_request=4.0, code_uses_autotune=True,
             epilogue_chain_after_contraction=0, max_pointwise_chain=0, code_launches_per_forward=1),
         "shared_memory_tiling", "excess_dram_traffic",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.22: 'every input used n times, naively n times "
         "from main memory'; tiles on chip read each element once per tile"),
    Case("triton_gemm_k128_poor_l2",
         "Triton fp16 GEMM M=N=16384 K=128 in row-major program order: L2 hit rate 31%, memory bound",
         obs(triton(1, code_uses_tl_dot=True, code_uses_shared_memory=True, code_k_loops=1), FP16, HOPPER,
             memory_bound(38.0, 79.0, 77.0), has_gemm=True, has_contraction=True, gemm_m=16384, gemm_n=16384,
             gemm_k=128, gemm_mn=268435456, l2_hit_rate_pct=31.0, dram_traffic_excess=2.6, data_reuse=16384.0,
             tensor_pipe_utilization_pct=35.0, code_launches_per_forward=1, epilogue_chain_after_contraction=0),
         "grouped_tile_rasterization", "poor_l2_reuse",
         "corpus:cutlass-efficient-gemm.md Threadblock Rasterization; Triton matmul tutorial: block order "
         "'affects the L2 cache hit rate'"),
    Case("triton_row_scale_streaming_poor_l2",
         "Triton kernel x * w[None, :] over 65536x4096 fp32 streaming x once: L2 hit 22%, memory bound",
         obs(triton(1), KB_FP32, HOPPER, memory_bound(9.0, 86.0, 85.5), l2_hit_rate_pct=22.0,
             max_pointwise_chain=1, code_launches_per_forward=1, data_reuse=1.0),
         "cache_modifiers", "poor_l2_reuse",
         "corpus:liger-optimization-strategies.md 2.2: data 'used exactly once (stream through)' vs "
         "'reused many times'; corpus:flashmla-new-kernel-deep-dive.md: EVICT_FIRST improves L2 hit rates"),
    Case("cuda_smem_transpose_32x32_no_padding",
         "CUDA shared-memory transpose with float tile[32][32]: 1.6M bank conflicts",
         obs(cuda(1, code_uses_shared_memory=True, code_syncthreads=1), KB_FP32, HOPPER,
             memory_bound(30.0, 71.0, 64.0), shared_bank_conflicts=1600000, code_launches_per_forward=1),
         "bank_conflict_padding", "shared_memory_bank_conflicts",
         "CUDA C++ Best Practices Guide, Shared Memory and Memory Banks; corpus:cutlass-efficient-gemm.md: "
         "'access to shared memory should be bank conflict free'"),
    Case("triton_gather_long_scoreboard",
         "Triton GEMV-like kernel looping over K with dependent loads: long-scoreboard stalls 52%, DRAM 35%",
         obs(triton(1), KB_FP32, HOPPER, balanced(20.0, 40.0, 35.0), warp_stall_long_scoreboard_pct=52.0,
             achieved_occupancy_pct=61.0, theoretical_occupancy_pct=75.0, code_launches_per_forward=1),
         "software_pipelining", "memory_latency",
         "corpus:cutlass-efficient-gemm.md Pipelining: 'software pipelining to overlap memory accesses with "
         "other computation'"),
    Case("triton_vector_add_default_blocks",
         "Triton vector add with the default BLOCK_SIZE=128, num_warps=4 on 2^28 fp32 elements, memory bound",
         obs(triton(1, code_block_size=128, code_num_warps=4), KB_FP32, HOPPER, memory_bound(12.0, 71.0, 70.5),
             max_pointwise_chain=1, code_launches_per_forward=1),
         "autotune_launch", "memory_bandwidth",
         "corpus:liger-optimization-strategies.md 1: 'Parameter tuning is the cheapest technique ... and "
         "frequently delivers the largest single improvement'"),
    Case("two_triton_kernels_exp_buffer",
         "two autotuned Triton kernels: the first writes exp(x) to a buffer the second re-reads, memory bound",
         obs(triton(2, code_uses_autotune=True), KB_FP32, HOPPER, memory_bound(17.0, 84.0, 83.0),
             max_pointwise_chain=1, code_launches_per_forward=2, transcendental_op_count=1),
         "recompute_instead_of_store", "memory_bandwidth",
         "corpus:liger-optimization-strategies.md 2.3: 'Recomputation trades memory for compute. Only "
         "beneficial when the kernel is memory-bound'"),
    # -- occupancy, registers, divergence, barriers, waves
    Case("cuda_48kb_smem_occupancy",
         "CUDA stencil kernel with 48 KB static shared memory per block: theoretical occupancy 25%",
         obs(cuda(1, code_uses_shared_memory=True), KB_FP32, HOPPER, balanced(34.0, 45.0, 41.0),
             theoretical_occupancy_pct=25.0, achieved_occupancy_pct=22.5, occupancy_limiter="shared_memory",
             shared_mem_per_block_bytes=49152, warp_stall_long_scoreboard_pct=21.0, code_launches_per_forward=1),
         "increase_occupancy", "occupancy_limited",
         "CUDA C++ Best Practices Guide, Occupancy: executing other warps is 'the only way to hide latencies'; "
         "corpus:hip-performance-guidelines.rst"),
    Case("triton_kernel_register_limited",
         "Triton kernel at 56 registers/thread, 128 threads: register-limited, achieved occupancy 34%",
         obs(triton(1), KB_FP32, HOPPER, balanced(41.0, 47.0, 40.0), registers_per_thread=56,
             theoretical_occupancy_pct=56.25, achieved_occupancy_pct=34.0, occupancy_limiter="registers",
             code_launches_per_forward=1),
         "autotune_launch", "register_pressure",
         "corpus:liger-optimization-strategies.md 3.4: high register usage or occupancy limited by register "
         "count; block sizes and num_warps are the first knob (section 1)"),
    Case("autotuned_triton_kernel_register_limited",
         "autotuned Triton kernel, register-limited at 56 registers/thread, achieved occupancy 34%",
         obs(triton(1, code_uses_autotune=True), KB_FP32, HOPPER, balanced(41.0, 47.0, 40.0),
             registers_per_thread=56, theoretical_occupancy_pct=56.25, achieved_occupancy_pct=34.0,
             occupancy_limiter="registers", code_launches_per_forward=1),
         "reduce_block_size", "register_pressure",
         "corpus:liger-optimization-strategies.md 3.4: smaller tiles cut registers per program once tuning "
         "is done; CUDA C++ Best Practices Guide, Register Pressure"),
    Case("cuda_sign_branch_divergence",
         "CUDA kernel branching per element on sign(x): branch efficiency 62%",
         obs(cuda(1, code_where_count=3), KB_FP32, HOPPER, balanced(48.0, 52.0, 50.0), branch_efficiency_pct=62.0,
             code_launches_per_forward=1),
         "branch_free_predication", "warp_divergence",
         "CUDA C++ Best Practices Guide: 'Avoid different execution paths within the same warp'; "
         "corpus:hip-performance-guidelines.rst: branch predication prevents divergence"),
    Case("cuda_shared_tree_reduction_barriers",
         "CUDA row reduction as a shared-memory tree with 10 __syncthreads: barrier stalls 48%",
         obs(cuda(1, code_uses_shared_memory=True, code_syncthreads=10), KB_FP32, HOPPER,
             balanced(35.0, 50.0, 47.0), warp_stall_barrier_pct=48.0, has_reduction=True,
             reduction_like_op_count=1, reduction_length=4096, code_launches_per_forward=1),
         "warp_shuffle_reduction", "barrier_stall",
         "corpus:tilelang-gemv.md: a warp all-reduce 'should outperform our plain smem + atomicAdd'; "
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.9"),
    Case("triton_rows_160_programs_on_132_sms",
         "Triton row kernel with 160 programs on 132 SMs: 1.21 waves, last wave 21% full",
         obs(triton(1), KB_FP32, HOPPER, balanced(33.0, 45.0, 44.0), grid_size=160, waves_per_sm=1.21,
             wave_efficiency=0.605, code_launches_per_forward=1),
         "sm_count_grid", "tail_effect",
         "corpus:liger-optimization-strategies.md 3.5/5.2: 'A 1D grid may leave SMs idle when the number of "
         "programs is not a multiple of SM count'"),
    Case("triton_softmax_64_rows",
         "Triton softmax, one program per row over only 64 rows of 32768: 0.06 waves",
         obs(triton(1), KB_FP32, HOPPER, balanced(4.0, 9.0, 8.0), has_softmax=True, reduction_like_op_count=1,
             reduction_length=32768, grid_size=64, waves_per_sm=0.06, wave_efficiency=0.06,
             code_launches_per_forward=1),
         "sm_count_grid", "tail_effect",
         "corpus:liger-optimization-strategies.md 5.2: 'grid size ... much smaller than the SM count'; a "
         "partial wave is also a tail, and sizing the grid to the SMs (80) outranks smaller blocks (75)"),
    Case("gemm_fp16_1024x1024x16384_half_wave",
         "fp16 matmul M=N=1024, K=16384: 64 output tiles of 128x128 on 132 SMs, 0.48 waves",
         obs(TORCH, FP16, HOPPER, balanced(31.0, 27.0, 25.0), has_gemm=True, has_contraction=True, gemm_m=1024,
             gemm_n=1024, gemm_k=16384, gemm_mn=1048576, grid_size=64, waves_per_sm=0.48,
             tensor_pipe_utilization_pct=30.0, code_launches_per_forward=1, kernel_launches_per_forward=1),
         "split_k", "low_parallelism",
         "corpus:cutlass-efficient-gemm.md Parallelized Reductions: 'For small problems, however, there are "
         "too few threadblocks to efficiently occupy the entire GPU'"),
    Case("conv3x3_fp16_nchw",
         "Conv2d 3x3 64->128 on 32x64x128x128 fp16 in NCHW; cuDNN inserts layout transforms",
         obs(TORCH, FP16, HOPPER, balanced(55.0, 58.0, 50.0), has_convolution=True, has_contraction=True,
             conv_op_count=1, tensor_pipe_utilization_pct=38.0, code_launches_per_forward=1,
             kernel_launches_per_forward=3, epilogue_chain_after_contraction=0, max_pointwise_chain=0),
         "channels_last", "nchw_convolution_layout",
         "PyTorch channels-last tutorial: channels become the densest dimension; tensor-core convolutions "
         "run in NHWC"),
    # -- techniques the base ranks lower, reached through the trajectory (tabu, lineage, conflicts)
    Case("eval_conv_bn_after_flat_channels_last",
         "Conv2d + eval-mode BatchNorm2d, fp32 NCHW; channels_last gave 1.00x and a fused BatchNorm failed",
         obs(TORCH, KB_FP32, HOPPER, balanced(52.0, 49.0, 45.0), has_convolution=True, has_contraction=True,
             has_batchnorm=True, has_normalization=True, batchnorm_training=False, reduction_like_op_count=1,
             conv_op_count=1, code_launches_per_forward=2, kernel_launches_per_forward=2,
             epilogue_chain_after_contraction=0, max_pointwise_chain=0, tensor_pipe_utilization_pct=0.0),
         "batchnorm_folding", "nchw_convolution_layout",
         "PyTorch BatchNorm2d docs: eval mode uses running statistics, so scale and shift fold into the "
         "convolution's weights",
         lineage=Lineage(children=(Child("channels_last", speedup=1.0),
                                   Child("fused_normalization", status="numeric", correct=False))),
         tabu={"channels_last": "no gain", "fused_normalization": "numeric"}),
    Case("tiled_autotuned_triton_gemm_fp32_tight",
         "autotuned, shared-memory-tiled Triton fp32 GEMM 4096^3 at 1e-5 tolerance, compute bound, no tensor cores",
         obs(triton(1, code_uses_autotune=True, code_uses_tl_dot=True, code_uses_shared_memory=True, code_k_loops=1),
             TIGHT_FP32, HOPPER, compute_bound(90.0, 33.0, 15.0), has_gemm=True, has_contraction=True,
             gemm_m=4096, gemm_n=4096, gemm_k=4096, gemm_mn=16777216, tensor_pipe_utilization_pct=0.0,
             data_reuse=2730.0, gemm_flop_share=1.0, code_launches_per_forward=1, epilogue_chain_after_contraction=0),
         "register_blocking", "compute_limited",
         "corpus:cutlass-efficient-gemm.md Thread-level GEMM: each thread computes an outer product from "
         "registers once tiles are staged in shared memory",
         lineage=Lineage(applied=(("shared_memory_tiling", 0.7), ("autotune_launch", 0.85))),
         tabu={"vendor_library": "conflicts with shared_memory_tiling",
               "shared_memory_tiling": "already applied", "autotune_launch": "forbidden when code_uses_autotune"}),
    Case("fused_gelu_silu_compute_bound",
         "autotuned Triton GELU(tanh)*SiLU kernel on 8192x8192 fp32, compute bound on transcendentals",
         obs(triton(1, code_uses_autotune=True, code_transcendentals=3), KB_FP32, HOPPER,
             compute_bound(79.0, 45.0, 44.0), transcendental_op_count=3, has_pointwise=True,
             max_pointwise_chain=1, data_reuse=1.0, code_launches_per_forward=1),
         "fast_math_intrinsics", "compute_limited",
         "corpus:hip-performance-guidelines.rst: intrinsics 'executed faster than equivalent arithmetic "
         "operations (subject to some input or accuracy restrictions)'; rtol 1e-2 allows them",
         lineage=Lineage(applied=(("kernel_fusion", 2.1), ("autotune_launch", 2.3)),
                         children=(Child("software_pipelining", speedup=2.31),)),
         tabu={"software_pipelining": "no gain"}),
    Case("fused_gelu_silu_after_fast_math_failed",
         "the same kernel after fast-math intrinsics broke the tolerance",
         obs(triton(1, code_uses_autotune=True, code_transcendentals=3), KB_FP32, HOPPER,
             compute_bound(79.0, 45.0, 44.0), transcendental_op_count=3, has_pointwise=True,
             max_pointwise_chain=1, data_reuse=1.0, code_launches_per_forward=1),
         "loop_unrolling", "compute_limited",
         "corpus:hip-performance-guidelines.rst Arithmetic instructions: expressing parallelism explicitly "
         "(unrolling) improves instruction throughput",
         lineage=Lineage(applied=(("kernel_fusion", 2.1), ("autotune_launch", 2.3)),
                         children=(Child("software_pipelining", speedup=2.31),
                                   Child("fast_math_intrinsics", status="numeric", correct=False))),
         tabu={"software_pipelining": "no gain", "fast_math_intrinsics": "numeric"}),
    Case("tail_after_sm_count_grid_gave_nothing",
         "autotuned Triton kernel, 1.21 waves on 132 SMs; sizing the grid to the SM count gained 0.5%",
         obs(triton(1, code_uses_autotune=True), KB_FP32, HOPPER, balanced(33.0, 45.0, 44.0), grid_size=160,
             waves_per_sm=1.21, wave_efficiency=0.605, code_launches_per_forward=1),
         "persistent_kernel", "tail_effect",
         "corpus:pallas-blackwell-matmul.md persistent kernel; corpus:flashmla-new-kernel-deep-dive.md: a "
         "tile scheduler 'ensures a balanced load across SMs'",
         lineage=Lineage(applied=(("kernel_fusion", 1.6),), children=(Child("sm_count_grid", speedup=1.608),)),
         tabu={"sm_count_grid": "no gain"}),
    Case("embedding_gather_latency_after_pipelining",
         "autotuned Triton embedding gather: long-scoreboard 61%, DRAM 38%; more occupancy crashed",
         obs(triton(1, code_uses_autotune=True), KB_FP32, HOPPER, balanced(12.0, 42.0, 38.0),
             warp_stall_long_scoreboard_pct=61.0, achieved_occupancy_pct=70.0, theoretical_occupancy_pct=100.0,
             code_launches_per_forward=1),
         "thread_coarsening", "memory_latency",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.24: how much work per thread (thread "
         "coarsening) puts more independent loads in flight",
         lineage=Lineage(applied=(("software_pipelining", 1.3),),
                         children=(Child("increase_occupancy", status="runtime", correct=False),)),
         tabu={"software_pipelining": "already applied", "increase_occupancy": "runtime"}),
    Case("cuda_scalar_loads_latency_bound",
         "CUDA gather kernel with scalar float loads: long-scoreboard 58%, DRAM 30%, after pipelining and coarsening",
         obs(cuda(1, vector_width=1), KB_FP32, HOPPER, balanced(15.0, 35.0, 30.0),
             warp_stall_long_scoreboard_pct=58.0, achieved_occupancy_pct=66.0, theoretical_occupancy_pct=100.0,
             code_launches_per_forward=1),
         "vectorized_access", "memory_latency",
         "corpus:tilelang-gemv.md: vectorized reads; corpus:liger-optimization-strategies.md: wide loads "
         "carry the same bytes in fewer instructions",
         lineage=Lineage(applied=(("software_pipelining", 1.2), ("thread_coarsening", 1.35)),
                         children=(Child("autotune_launch", speedup=1.35), Child("increase_occupancy", speedup=1.2))),
         tabu={"autotune_launch": "no gain", "increase_occupancy": "no gain",
               "thread_coarsening": "already applied"}),
    Case("triton_weight_scaled_stream_poor_l2_hints_in",
         "autotuned Triton kernel with eviction hints reloading a per-channel scale inside its loop, L2 hit 28%",
         obs(triton(1, code_uses_autotune=True, code_eviction_hints=True), KB_FP32, HOPPER,
             memory_bound(14.0, 80.0, 79.0), l2_hit_rate_pct=28.0, max_pointwise_chain=1,
             code_launches_per_forward=1),
         "hoist_invariant_loads", "poor_l2_reuse",
         "corpus:liger-optimization-strategies.md 2.4: 'A value is loaded inside a loop but does not change "
         "across iterations. Common with weight tensors and scaling factors'",
         lineage=Lineage(applied=(("kernel_fusion", 1.5),), children=(Child("recompute_instead_of_store", speedup=1.49),)),
         tabu={"recompute_instead_of_store": "no gain"}),
    Case("cuda_register_limited_after_coarsening",
         "CUDA kernel after thread coarsening: 56 registers/thread limit occupancy to 56%, achieved 31%",
         obs(cuda(1), KB_FP32, HOPPER, balanced(44.0, 46.0, 40.0), registers_per_thread=56,
             theoretical_occupancy_pct=56.25, achieved_occupancy_pct=31.0, occupancy_limiter="registers",
             code_launches_per_forward=1),
         "launch_bounds", "register_pressure",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.14: '__launch_bounds__ ... to advise compiler "
         "of # of threads for register allocation'",
         lineage=Lineage(applied=(("thread_coarsening", 1.4),), children=(Child("autotune_launch", speedup=1.39),)),
         tabu={"reduce_block_size": "conflicts with thread_coarsening", "autotune_launch": "no gain"}),
    Case("hopper_triton_gemm_barrier_stalls",
         "autotuned, pipelined Triton fp16 GEMM on H200 stalling at barriers 41%",
         obs(triton(1, code_uses_autotune=True, code_uses_tl_dot=True, code_uses_shared_memory=True,
                    code_k_loops=1, code_num_stages=4), FP16, HOPPER, balanced(58.0, 50.0, 42.0),
             has_gemm=True, has_contraction=True, gemm_m=8192, gemm_n=8192, gemm_k=8192, gemm_mn=67108864,
             warp_stall_barrier_pct=41.0, tensor_pipe_utilization_pct=55.0, code_launches_per_forward=1),
         "warp_specialization", "barrier_stall",
         "corpus:cutlass-efficient-gemm.md Hopper Warp Specialization: separate producer and consumer agents",
         lineage=Lineage(applied=(("autotune_launch", 1.1), ("software_pipelining", 1.3)),
                         children=(Child("warp_shuffle_reduction", status="compile", correct=False),
                                   Child("reduce_block_size", speedup=1.25))),
         tabu={"warp_shuffle_reduction": "compile", "reduce_block_size": "no gain",
               "software_pipelining": "already applied"}),
    Case("short_rows_softmax_plus_scale_after_online_softmax",
         "autotuned Triton online softmax over 1M rows of 128 plus a separate scale kernel, memory bound",
         obs(triton(2, code_uses_autotune=True), KB_FP32, HOPPER, memory_bound(16.0, 77.0, 76.0),
             has_softmax=True, reduction_like_op_count=1, reduction_length=128, max_pointwise_chain=1,
             code_launches_per_forward=2),
         "block_row_mode", "memory_bandwidth",
         "corpus:liger-optimization-strategies.md 2.5: 'each row is small (e.g., n_cols <= 256). This "
         "under-utilizes each SM'",
         lineage=Lineage(applied=(("online_softmax", 1.8),)),
         tabu={"online_softmax": "already applied"}),
    # -- rules read from the captured graph before any profile
    Case("lstm_6_layers_512_steps_static",
         "nn.LSTM, 6 layers, 512 steps, batch 10, fp32: 6147 launches of ~0.07 us of roofline work each (static)",
         obs(TORCH, KB_FP32, HOPPER, has_recurrence=True, has_contraction=True, est_kernel_launches=6147,
             launches_per_forward=6147, code_launches_per_forward=6147, est_launch_work_us=0.07),
         "cuda_graph", "recurrent_time_loop",
         "corpus:gpumode-lecture4-compute-memory-basics.pdf p.17: LSTMs and kernel fusion; NVIDIA CUDA Graph "
         "Best Practice for PyTorch: graphs reduce CPU overhead"),
    Case("resnet18_batch2_static_launch_estimate",
         "ResNet18 at batch 2, 224x224 fp32: 68 launches, 0.22 us of roofline work per launch (static estimate)",
         obs(TORCH, KB_FP32, HOPPER, has_convolution=True, has_contraction=True, conv_op_count=20,
             est_kernel_launches=68, launches_per_forward=68, code_launches_per_forward=68, est_launch_work_us=0.22),
         "cuda_graph", "launch_bound_estimate",
         "corpus:liger-optimization-strategies.md 5.3: '< 10 microseconds. Launch overhead dominates'; NVIDIA: "
         "'CUDA graphs primarily benefit CPU-bound workloads'"),
    Case("fp32_linear_gelu_8192_cuda_cores",
         "nn.Linear 8192x8192x8192 fp32 then GELU, compute bound, cuBLAS at the default 'highest' precision",
         obs(TORCH, TIGHT_FP32, HOPPER, compute_bound(78.0, 30.0, 12.0), has_gemm=True, has_contraction=True,
             gemm_flop_share=0.99, has_attention=False, epilogue_chain_after_contraction=1, max_pointwise_chain=1,
             code_launches_per_forward=2, data_reuse=2730.0),
         "gemm_epilogue_fusion", "fp32_gemm_on_cuda_cores",
         "torch.set_float32_matmul_precision: 'highest' (the default) is allow_tf32 = False; CUTLASS example 27: "
         "3xTF32 emulates an accurate SGEMM on tensor cores"),
    Case("mse_written_out_two_inputs",
         "torch.mean((p - t) ** 2) over two 32768x32768 fp32 inputs: the difference and square written, then read",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(20.0, 88.0, 86.0), has_loss=True, has_reduction=True,
             has_pointwise=True, reduction_like_op_count=1, row_op_pointwise_chain=2, max_pointwise_chain=2,
             code_launches_per_forward=3),
         "fused_loss", "unfused_row_chain",
         "corpus:liger-optimization-strategies.md 2.3: 'writes intermediate results that are only consumed once'"),
    Case("depthwise_conv3x3_128ch_nchw",
         "depthwise 3x3 conv2d, 128 channels, 64x256x512 fp32 NCHW, memory bound in cuDNN",
         obs(TORCH, KB_FP32, HOPPER, memory_bound(30.0, 75.0, 70.0), has_convolution=True, has_contraction=True,
             conv_op_count=1, conv_min_group_width=1, code_launches_per_forward=1),
         "depthwise_convolution", "narrow_grouped_convolution",
         "Qararyah et al. 2024: depthwise convolutions' memory accesses are the bottleneck; Lu et al. 2021: a "
         "direct GPU kernel 2-3x over cuDNN"),
    Case("vgg16_batch10_nchw_network",
         "VGG16 at batch 10, 13 convolutions in NCHW fp32, 16 us of roofline work per launch",
         obs(TORCH, KB_FP32, HOPPER, compute_bound(70.0, 40.0, 20.0), has_convolution=True, has_gemm=True,
             has_contraction=True, conv_op_count=13, gemm_flop_share=0.01, est_kernel_launches=38,
             launches_per_forward=38, code_launches_per_forward=38, est_launch_work_us=16.5),
         "channels_last", "nchw_convolution_network",
         "PyTorch blog (channels last): memory format propagates from the input, so a network converts once"),
    Case("tril_of_matmul_4096",
         "torch.tril(A @ B), 4096x4096 fp32: the GEMM computes the upper triangle only for it to be zeroed",
         obs(TORCH, TIGHT_FP32, HOPPER, compute_bound(80.0, 20.0, 10.0), has_gemm=True, has_contraction=True,
             gemm_flop_share=1.0, has_attention=False, triangular_gemm_count=1, simplifiable_patterns=1,
             epilogue_chain_after_contraction=1, max_pointwise_chain=1, code_launches_per_forward=2),
         "algebraic_simplification", "masked_product_work",
         "corpus:liger-optimization-strategies.md 3.1: 'a naive algorithm where a more efficient one exists'"),
    Case("sum_over_gemm_columns_8192",
         "(x @ W.T / 2).sum(dim=1) * 1.5 at 1024 x 8192 x 8192 fp32: a GEMM whose columns are only summed",
         obs(TORCH, KB_FP32, HOPPER, compute_bound(80.0, 20.0, 10.0), has_gemm=True, has_contraction=True,
             gemm_flop_share=1.0, has_attention=False, reduced_gemm_count=1, simplifiable_patterns=1,
             epilogue_chain_after_contraction=1, max_pointwise_chain=1, code_launches_per_forward=4),
         "algebraic_simplification", "reducible_product",
         "corpus:liger-optimization-strategies.md 3.1: 'a naive algorithm where a more efficient one exists'"),
]

EXPECTED_TECHNIQUES_MIN = 25


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def skill_store(graph_home: Path) -> Iterator[GraphStore]:
    """One graph with the built-in skill base for the whole table; each row removes what it writes."""
    store = open_store("embedded", graph_home, graph_name=f"planner_decisions{os.getpid()}")
    ensure_builtin(store)
    yield store
    store.drop_graph()
    store.close()


# --- tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_planner_selects(skill_store: GraphStore, case: Case):
    planner = Planner(skill_store)
    parent = None
    if case.lineage is not None:
        parent = write_trajectory(skill_store, f"run-{case.name.replace('_', '-')}", case.lineage)
    try:
        plan = planner.plan(case.observations, parent=parent)
    finally:
        if parent is not None:
            delete_trajectory(skill_store, f"run-{case.name.replace('_', '-')}")
    ranked = [(r.technique, r.bottleneck, r.priority) for r in plan.ranked[:4]]
    assert (plan.selected, plan.bottleneck) == (case.technique, case.bottleneck), (
        f"{case.kernel}: selected {plan.selected} for {plan.bottleneck}; top of the ranking {ranked}")
    assert plan.tier == "rule"
    assert case.bottleneck in {b.id for b in plan.matched}
    reasons = {r.technique: r.reason for r in plan.rejected}
    for technique, words in case.tabu.items():
        assert words in reasons.get(technique, ""), f"{technique}: {reasons.get(technique)!r} lacks {words!r}"


def test_table_covers_every_bottleneck_and_enough_techniques():
    nodes = read_builtin().payload.nodes.values()
    bottlenecks = {n.id for n in nodes if isinstance(n, Bottleneck)}
    techniques = {n.id for n in nodes if isinstance(n, Technique)}
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES), "row names are unique"
    assert bottlenecks - {c.bottleneck for c in CASES} == set(), "every bottleneck is expected in some row"
    selected = {c.technique for c in CASES}
    assert selected <= techniques
    assert len(selected) >= EXPECTED_TECHNIQUES_MIN


def test_rows_speak_the_vocabulary():
    """Every observation is a vocabulary name with a value of its metric's type, and the boundness
    flags agree with the throughput numbers the way metrics.yaml defines them."""
    vocabulary = {n.id: n for n in read_builtin().payload.nodes.values() if isinstance(n, Metric)}
    python_type = {"number": (int, float), "bool": (bool,), "string": (str,)}
    for case in CASES:
        for name, value in case.observations.items():
            assert name in vocabulary, f"{case.name}: {name} is not in metrics.yaml"
            kind = vocabulary[name].type
            ok = isinstance(value, python_type[kind]) and not (kind == "number" and isinstance(value, bool))
            assert ok, f"{case.name}: {name} is a {kind}, got {value!r}"
        o = case.observations
        if "memory_throughput_pct" in o and "sm_throughput_pct" in o:
            mem, sm = o["memory_throughput_pct"], o["sm_throughput_pct"]
            assert o["memory_bound"] == (mem >= 60 and mem > sm), case.name
            assert o["compute_bound"] == (sm >= 60 and sm >= mem), case.name
