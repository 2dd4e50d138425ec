"""GPU performance jargon: abbreviations and synonyms mapped to shared concepts.

Practitioners write "SMEM", "float4 loads" or "HBM traffic" where the skill base says
"shared memory", "vectorized access" or "memory bandwidth". Each concept lists the
phrases that mean it; the lexical ranker adds a concept token wherever one appears (in
documents and queries alike), and the vector ranker appends the concept's plain name to
a query that uses only jargon. The table is general CUDA/Triton vocabulary, not a copy
of any evaluation query.
"""

from __future__ import annotations

# concept -> (plain phrase used to expand queries for the embedding model, aliases)
CONCEPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "shared_memory": ("shared memory", (
        "shared memory", "smem", "shmem", "__shared__", "lds", "local data share", "scratchpad",
        "on-chip memory", "shared mem", "shared buffer")),
    "global_memory": ("global memory", (
        "global memory", "gmem", "hbm", "dram", "device memory", "off-chip memory", "vram",
        "main memory", "global load", "global store")),
    "vectorized": ("vectorized wide memory access", (
        "float4", "float2", "int4", "half2", "bfloat162", "ldg.128", "ld.global.v4", "128-bit",
        "64-bit load", "vector load", "vector store", "vectorized", "vectorization", "vectorize",
        "wide load", "wide store", "packed load")),
    "register": ("registers", ("register", "regs", "register file", "vgpr", "sgpr", "registers per thread")),
    "spill": ("register spills to local memory", ("spill", "spilling", "spilled", "lmem", "local memory")),
    "tensor_core": ("tensor cores", (
        "tensor core", "mma", "wmma", "hmma", "mma.sync", "wgmma", "tcgen05", "matrix core", "mfma",
        "tensor pipe")),
    "gemm": ("matrix multiplication gemm", (
        "gemm", "sgemm", "hgemm", "matmul", "matrix multiply", "matrix multiplication", "bmm",
        "linear layer", "addmm", "dot product")),
    "launch": ("kernel launch overhead", (
        "kernel launch", "launch overhead", "launch latency", "dispatch overhead", "cpu overhead",
        "host overhead", "launch bound", "launches", "many small kernels",
        "many kernels", "python overhead", "framework overhead")),
    "cuda_graph": ("cuda graph capture and replay", (
        "cuda graph", "cudagraph", "cudagraphs", "graph capture", "stream capture", "graph replay",
        "reduce-overhead")),
    "fusion": ("kernel fusion", (
        "fuse", "fused", "fusion", "fusing", "merge kernels", "combine kernels", "single kernel",
        "one kernel", "in one go")),
    "occupancy": ("occupancy", (
        "occupancy", "warps in flight", "active warps", "resident warps", "resident blocks",
        "blocks per sm", "warps per sm")),
    "thread_block": ("thread block", ("thread block", "threadblock", "cta", "ctas", "workgroup", "block size")),
    "warp": ("warp", ("warp", "wavefront", "wave64", "wave32")),
    "sm": ("streaming multiprocessor", ("streaming multiprocessor", "sm", "sms", "compute unit", "multiprocessor")),
    "coalescing": ("coalesced memory access", (
        "coalesce", "coalesced", "coalescing", "uncoalesced", "contiguous access", "consecutive addresses", "sectors per request", "strided access", "strided load", "stride")),
    "bank_conflict": ("shared memory bank conflicts", ("bank conflict", "bank conflicts", "bank-conflict", "banks")),
    "divergence": ("warp divergence", (
        "divergence", "divergent", "branch divergence", "diverge", "branchy",
        "branch efficiency")),
    "tiling": ("tiling", ("tiling", "tile", "tiled", "blocking", "blocked", "micro-tile", "microtile")),
    "normalization": ("normalization layer", (
        "layernorm", "layer norm", "rmsnorm", "rms norm", "batchnorm", "batch norm", "bn", "groupnorm",
        "group norm", "instancenorm", "normalization", "normalize")),
    "attention": ("attention", (
        "attention", "sdpa", "scaled dot product attention", "flashattention", "flash attention", "mha",
        "self-attention")),
    "reduction": ("reduction", (
        "reduction", "reduce", "mean over", "row sum", "argmax", "max over", "warp reduce")),
    "scan": ("prefix scan", ("prefix sum", "cumsum", "cumprod", "scan", "cumulative sum", "cummax")),
    "pooling": ("pooling", ("pooling", "maxpool", "max pool", "avgpool", "avg pool", "average pool", "max_pool2d")),
    "loss": ("loss function", (
        "cross entropy", "cross-entropy", "nll", "kl divergence", "mse loss", "hinge loss", "loss",
        "triplet loss", "smooth l1", "huber")),
    "tf32": ("tf32 tensor float", ("tf32", "allow_tf32", "set_float32_matmul_precision", "tensorfloat-32", "tensorfloat32")),
    "half_precision": ("half precision", ("fp16", "half", "float16", "bf16", "bfloat16")),
    "channels_last": ("channels last memory format", ("nhwc", "channels_last", "channels last", "ndhwc")),
    "autotune": ("autotuning launch configuration", (
        "autotune", "autotuning", "num_warps", "num_stages", "triton.autotune", "tuning configs",
        "launch configuration", "launch config", "block_size", "parameter sweep")),
    "pipelining": ("software pipelining", (
        "double buffering", "double buffer", "multi-buffering", "cp.async", "async copy", "prefetch",
        "software pipelining", "pipelined", "overlap loads with compute", "multistage")),
    "unroll": ("loop unrolling", ("unroll", "unrolled", "unrolling", "#pragma unroll", "static_range")),
    "persistent": ("persistent kernel", ("persistent kernel", "persistent", "stream-k")),
    "split_k": ("split-k", ("split-k", "splitk", "split k")),
    "memory_bound": ("memory bandwidth bound", (
        "memory-bound", "memory bound", "bandwidth bound", "bandwidth-bound", "dram bound", "hbm bound",
        "memory throughput", "bytes moved", "memory traffic")),
    "compute_bound": ("compute bound", (
        "compute-bound", "compute bound", "math bound", "alu bound", "flops bound", "peak flops",
        "math pipe", "fma throughput", "arithmetic bound")),
    "latency": ("memory latency stalls", (
        "long scoreboard", "stall", "stalled", "stalls", "latency bound", "latency-bound", "latency hiding",
        "waiting on memory")),
    "tail": ("tail effect partial last wave", (
        "tail effect", "wave quantization", "partial wave", "last wave", "tail", "waves per sm")),
    "l2_cache": ("l2 cache", ("l2", "l2 cache", "last-level cache", "cache reuse", "cache hit rate")),
    "rasterization": ("grouped tile rasterization order", (
        "swizzle", "swizzled", "grouped ordering", "raster order", "rasterization", "block order", "program id remap", "super-grouping")),
    "cache_hint": ("cache modifiers and eviction hints", (
        "evict_first", "evict_last", ".cg", ".cs", "ld.global.nc", "__ldg", "ldg", "cache modifier",
        "cache hint", "eviction policy", "cache_modifier", "eviction_policy", "streaming load")),
    "redundant": ("redundant work", (
        "redundant", "recomputed", "duplicate computation", "same computation",
        "wasted work", "unnecessary work", "dead code")),
    "oom": ("out of memory", ("oom", "out of memory", "outofmemoryerror", "cannot allocate", "tried to allocate")),
    "illegal_address": ("illegal memory access", (
        "illegal memory access", "illegal address", "illegaladdress", "segfault", "segmentation fault",
        "out of bounds", "out-of-bounds", "oob", "misaligned address", "invalid address")),
    "mismatch": ("numerical mismatch with the reference", (
        "mismatch", "allclose", "max abs diff", "wrong result", "incorrect output", "tolerance",
        "does not match", "don't match", "not close", "mismatched elements")),
    "nan": ("nan or inf values", ("nan", "nans", "inf", "infinity", "overflow", "underflow")),
    "timeout": ("timeout or hang", ("timeout", "timed out", "hang", "hangs", "deadlock", "never finishes", "stuck")),
    "compile_error": ("compilation error", (
        "compilation error", "compile error", "compileerror", "compilationerror", "ptxas", "nvcc",
        "syntax error", "failed to compile", "does not compile", "build failed")),
    "out_of_resources": ("too many resources requested for launch", (
        "too many resources", "out of resources", "outofresources", "launchoutofresources",
        "hardware limit", "resources requested")),
}
