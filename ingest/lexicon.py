"""Surface forms of the graph's Bottlenecks and Techniques: how practitioners write their names.

The lexicon finds mentions in a sentence. Each node's own name and id are always surface
forms; `ALIASES` adds the words the literature uses for the built-in skills (regular
expressions, matched case-insensitively at word starts). A mention found here is an exact
hit; retrieval (resolve.py) covers the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Cross-vendor vocabulary (learned-23, eval/ingest/runs/vocabulary-session48.md). The base's aliases were written in
# CUDA's words; other programming models name the same hardware things in their own, taken here from each model's own
# documentation (HIP/ROCm and the AMD ISA guides, the SYCL 2020 and oneAPI guides, the OpenCL C and Vulkan/GLSL/WGSL
# specifications, the Metal Shading Language specification, HLSL, CUDA.jl/KernelAbstractions.jl, Taichi), never from
# the wording of a labelled document. Each is a piece of pattern the aliases below are built from.

# the on-chip memory a thread block shares: HIP/ROCm "LDS"/"local data share", SYCL/oneAPI "shared local memory"/"SLM",
# Metal "threadgroup memory", HLSL "groupshared", Vulkan/WebGPU "workgroup memory", the Julia packages' arrays in it
# (CUDA.jl's CuStaticSharedArray, KernelAbstractions' @localmem); OpenCL's "local memory" too, which NEEDS_CONTEXT lets
# count only where the sentence speaks OpenCL or SYCL (in CUDA it is a thread's spill space in DRAM)
SHARED_MEMORY = (r"(?:shared[- ]memory|smem|lds(?: memory)?|local data share|shared local memory|slm|threadgroup memory|"
                 r"groupshared(?: memory)?|workgroup (?:shared )?memory|cu(?:static|dynamic)sharedarray|@localmem|"
                 r"local memory)(?![\w-])")
# a thread block: OpenCL/SYCL/Vulkan/WebGPU "work-group", Metal "threadgroup", CUDA's "CTA"
BLOCKS = r"(?:thread ?blocks?|blocks?|ctas?|work-?groups?|threadgroups?)"
# a warp: AMD "wavefront" (the CDNA guides' "wave" only where qualified: "last wave" is a wave of blocks), Vulkan/SYCL/
# OpenCL "subgroup"/"sub-group", Metal "SIMD-group"
WARPS = r"(?:warps?|wavefronts?|sub-?groups?|simd-?groups?)"
# a streaming multiprocessor: AMD/OpenCL "compute unit"/"CU", Intel "Xe core"
MULTIPROCESSORS = r"(?:sms?|multiprocessors|compute units?|cus|xe[- ]cores?)"
# a thread: OpenCL/SYCL "work-item", Vulkan/WebGPU "invocation", a SIMD "lane"
THREAD = r"(?:thread|work-?item|invocation|lane)"
# the matrix units tensor cores are elsewhere: AMD "matrix cores" and MFMA, Intel "XMX" (Xe Matrix Extensions) and DPAS,
# the portable APIs over them: Vulkan "cooperative matrix", SYCL "joint_matrix", Metal "simdgroup_matrix", WMMA
MATRIX_UNITS = (r"(?:(?:tensor|matrix) ?cores?|xmx(?: engines?| units?)?|mfma(?: units?| instructions?)?|dpas|"
                r"cooperative[_ ]matri(?:x|ces)|joint[_ ]matri(?:x|ces)|simdgroup[_ ]matri(?:x|ces)|wmma)")

# node id -> patterns. Kept to phrases that name the thing itself, not merely its topic:
# "shared memory" alone names no technique, "stage data into shared memory" does.
ALIASES: dict[str, tuple[str, ...]] = {
    # bottlenecks
    "memory_bandwidth": (r"memory[- ]bound", r"bandwidth[- ]bound", r"(?:limited|bound) by (?:the )?(?:dram |memory |hbm )?bandwidth",
                         r"memory[- ]intensive", r"memory bandwidth (?:is|becomes) the bottleneck",
                         r"memory access (?:is |as )?(?:a |the )?bottleneck", r"memory bus utili[sz]ation",
                         # "GPU memory utilization" is capacity
                         r"memory (?:bus )?throughput",
                         r"wastes? (?:the )?memory bandwidth",
                         # learned-25: bound by the device memory named as the memory itself, as "memory-bound" above:
                         # "DRAM-bound" (Nsight Compute's name for device memory), "HBM-bound" (roofline write-ups of
                         # HBM parts), "GMEM-bound" (CUTLASS/CuTe's name for global memory)
                         r"(?:dram|hbm|gmem|global[- ]memory)[- ]bound\b"),
    "compute_limited": (r"compute[- ]bound", r"compute[- ]intensive", r"math[- ]bound", r"limited by (?:floating-point|flops|compute)",
                        r"(?:maximum |maximi[sz]\w+ )?(?:instruction|arithmetic|math) throughput",
                        # learned-23: bound by an execution unit as AMD's guides name them (VALU, the MFMA matrix unit)
                        r"(?:v?alu|mfma|fma)[- ]bound"),
    # learned-31: with words between ("hiding even more latency", "hides the global memory latency"), not an arithmetic
    # unit's ("hide ALU pipeline latency", "hiding instruction latency"); learned-32: nor a conflict's ("hides the latency
    # of the write conflict")
    "memory_latency": (r"memory latency", r"latency[- ]bound", r"latency hiding",
                       r"hid(?:e|es|ing) (?:(?!(?:alu|fma|pipeline|instruction|arithmetic|math|compute)\b)\w+ ){0,3}latenc"
                       r"(?!(?:y|ies) of (?:the |a |an |its |each )?(?:\w+ ){0,2}(?:conflicts?|banks?|instructions?|"
                       r"alus?|pipelines?)\b)"),
    "launch_overhead": (r"launch overhead", r"kernel launch(?:es)? (?:overhead|cost|latency)", r"launch latency",
                        r"(?:cpu|host|python) overhead", r"overhead of launching",
                        r"overheads? of (?:the )?(?:python|pytorch)\b",  # "The overheads of Python/PyTorch"
                        # "launch-bound" as "memory-bound"; hyphenated, since "a launch bound of 256" is launch_bounds
                        r"(?:launch|host|cpu|overhead)-bound\b",
                        # learned-18: "Per-op overhead is dominating", "kernel launching is the bottleneck", "Every
                        # kernel launch has an overhead of several milliseconds", "host-side overhead"
                        r"(?:per|each|every)[- ](?:op|operator|kernel|call)\s+overhead",
                        r"kernel launch(?:es|ing)? (?:is|are|was|becomes?) (?:the |a )?bottleneck",
                        r"(?:every|each) kernel launch (?:has|incurs|adds)\b",
                        r"host[- ]side overhead",
                        # learned-23: a launch as Vulkan, Metal, WebGPU and HSA call it, a dispatch; as OpenCL and SYCL
                        # do, an enqueue or a submission to a queue
                        r"(?:kernel |compute )?dispatch (?:overhead|latency|cost)", r"overheads? of (?:each |every )?(?:kernel )?dispatch",
                        r"(?:kernel |command )?(?:submission|enqueue) (?:overhead|latency)"),
    "materialized_intermediates": (r"intermediate (?:results|tensors|values) (?:to|in|through) (?:hbm|dram|global memory)",
                                   r"round[- ]trip(?:s|ping)? (?:to|through) (?:hbm|dram|global memory)"),
    "register_pressure": (r"register pressure", r"register spill", r"spill(?:s|ing)? to local memory", r"too many registers",
                          r"more registers than available", r"register (?:limit|usage|budget)",
                          r"register spill\w*", r"spill(?:s|ed|ing)? (?:\w+ )?registers",
                          r"register use\b",
                          # learned-23: AMD's register files (VGPRs, SGPRs, AGPRs) and Intel's (the GRF), and spills to
                          # AMD's scratch memory, CUDA's local memory
                          r"[vsa]gprs? (?:pressure|usage|use\b|count|limit|budget|spill\w*)", r"grf (?:pressure|usage|spill\w*)",
                          r"spill(?:s|ed|ing)? (?:\w+ ){0,2}to scratch\b", r"scratch (?:memory )?spill\w*"),
    "occupancy_limited": (r"low occupancy", r"occupancy (?:is )?limit", r"limit(?:s|ed|ing)? (?:the )?occupancy",
                          r"(?:too )?few (?:resident |active )?warps", r"reduc(?:es?|ing) (?:the )?occupancy",
                          r"reduc\w* (?:the |its )?occupancy",
                          r"occupancy (?:goes|drops) down",
                          r"lower occupancy",
                          # learned-23: few warps under their other names; AMD counts waves per SIMD or EU
                          # (not "few waves", which a grid of blocks runs in)
                          r"(?:too )?few (?:resident |active )?(?:wavefronts|sub-?groups|simd-?groups)\b",
                          r"(?:only|just) (?:one|two|three|four|a single|\d) (?:waves?|" + WARPS + r") per "
                          r"(?:simd|eu|cu|sm|compute unit|multiprocessor)\b",
                          # learned-23: occupancy qualified by what it counts, as AMD's profilers and the graphics APIs
                          # say it ("low wavefront occupancy", "poor shader occupancy")
                          r"(?:low|poor|limited) (?:shader |wave(?:front)? |warp |sub-?group )?occupancy"),
    "warp_divergence": (r"warp divergence", r"divergent warps?", r"branch divergence", r"diverge(?:nt|s)?\b",
                        r"different execution paths",
                        r"different control flow",
                        # learned-23: divergence within a warp under its other names ("wavefront divergence", "subgroup
                        # divergence", "thread divergence", "control-flow divergence"); "diverge" above misses "divergence"
                        r"(?:wave|wavefront|sub-?group|simd(?:-?group)?|thread|control[- ]flow) divergence",
                        # learned-23: AMD's name for the lanes a branch leaves active in a wavefront, the execution
                        # (EXEC) mask, through which its guides explain divergence (NEEDS_CONTEXT: with a branch)
                        r"exec(?:ution)?[- ]mask"),
    "uncoalesced_access": (r"uncoalesced", r"non[- ]coalesced", r"strided (?:access|load)", r"non-optimal global memory access",
                           r"misaligned (?:access|load)", r"scattered (?:access|address)"),
    "excess_dram_traffic": (r"(?:redundant|extra|excess) (?:dram |global memory |hbm )?(?:traffic|loads|reads)",
                            r"memory traffic",
                            # learned-35: the same said of global memory's accesses: their redundancy, or fewer of them
                            # ("High global memory access redundancy", "significantly reduce global memory accesses";
                            # heldout37's convolution chapter)
                            r"(?:dram|global memory|hbm) access(?:es)? redundan\w*",
                            r"(?:reduc\w+|fewer|minimi[sz]\w+) (?:the (?:number of )?)?(?:dram|global memory|hbm) "
                            r"(?:accesses|loads|reads|transactions)"),
    "tensor_core_unused": (r"tensor cores? (?:are |is )?(?:idle|unused)", r"without tensor cores",
                           r"(?:underutili[sz]\w*|under-utili[sz]\w*|idle) tensor cores",
                           r"tensor cores? (?:\w+ ){0,2}(?:underutili[sz]ed|under-utili[sz]ed)",
                           # learned-18: using the tensor (or matrix) cores, or not, said as such ("Level 04: Use tensor
                           # cores (WMMA)", "cannot utilize the NVIDIA Tensor Cores", "low tensor core utilization")
                           # learned-23: and the matrix units under their other names (MATRIX_UNITS: XMX, MFMA, cooperative matrix)
                           r"(?:not|cannot|can't|unable to|fail\w* to|don[’']t|doesn[’']t) (?:\w+ )?(?:use|utili[sz]e|leverage) "
                           r"(?:the )?(?:\w+ ){0,2}" + MATRIX_UNITS + r"(?![\w-])",
                           r"(?:to|(?:^|(?<=: )|(?<=- ))) ?(?:use|utili[sz]e|leverage|exploit) (?:the )?(?:\w+ ){0,2}" + MATRIX_UNITS + r"(?![\w-])",
                           r"(?:using|utili[sz]ing|leveraging) (?:the )?(?:\w+ ){0,2}" + MATRIX_UNITS + r" (?:for|to)\b",
                           # learned-23: "leveraging specialized GPU matrix cores", "direct use of GPU matrix cores"
                           r"(?:leveraging|(?:direct )?use of) (?:the )?(?:\w+ ){0,2}" + MATRIX_UNITS + r"(?![\w-])",
                           MATRIX_UNITS + r" (?:utili[sz]ation|eligib\w+|can be (?:fully |efficiently )?utili[sz]ed)"),
    "shared_memory_bank_conflicts": (r"bank conflicts?", r"same (?:shared memory )?bank", r"bank-conflict"),
    "tail_effect": (r"tail effect", r"(?:last|partial|final) wave", r"wave quantization"),
    # learned-23: blocks and multiprocessors under their other names (BLOCKS: work-groups; MULTIPROCESSORS: compute units)
    "low_parallelism": (r"(?:not enough|too little|insufficient|more) parallelism", r"(?:few|too few) " + BLOCKS + r"(?![\w-])",
                        r"(?:underutiliz|under-utiliz)\w* (?:\w+ )?(?:gpus?|" + MULTIPROCESSORS + r")(?![\w-])",
                        r"idle (?:sms|multiprocessors|compute units|cus|xe[- ]cores)\b",
                        r"(?:increase|more) (?:the )?concurrency",
                        r"(?:fill|occupy|saturate) (?:all )?(?:of )?(?:the )?(?:gpu|sms|multiprocessors|compute units|cus|xe[- ]cores)\b",
                        # learned-19: "enough blocks and threads to fill up the GPU"
                        r"fill up (?:the )?(?:gpu|sms)\b"),
    "skinny_gemm": (r"skinny (?:gemm|matrix|matmul)", r"small (?:m|n) and large k", r"tall[- ]and[- ]skinny", r"\bgemv\b",
                    r"matrix[- ]vector"),
    "barrier_stall": (r"barrier stall", r"__syncthreads\(\)? (?:overhead|stall)", r"synchronization (?:overhead|stall)",
                      # learned-23: the block barrier under its other names: OpenCL/SYCL barrier() and group_barrier,
                      # Metal threadgroup_barrier, WGSL workgroupBarrier, HLSL GroupMemoryBarrierWithGroupSync, AMD
                      # s_barrier, CUDA.jl sync_threads, KernelAbstractions @synchronize; and a work-group's barrier
                      # said in words
                      r"(?:barrier|group_barrier|threadgroup_barrier|workgroupbarrier|groupmemorybarrierwithgroupsync|"
                      r"s_barrier|sync_threads|@synchronize)(?:\(\))? (?:overhead|stalls?|wait(?:s|ing)?\b)",
                      r"(?:work-?group|threadgroup|block)[- ]level barriers? (?:overhead|stalls?|cost)"),
    "poor_l2_reuse": (r"l2 (?:cache )?(?:hit rate|reuse|locality)", r"l2 cache misses"),
    "redundant_work": (r"redundant (?:work|computation)", r"recomput\w+ the same"),
    "materialized_attention_scores": (r"attention (?:matrix|scores) (?:in|to) (?:hbm|global memory)",
                                      r"materiali[sz]e (?:the )?(?:attention |scores? )?matri(?:x|ces)",
                                      r"(?:attn\.?|attention) (?:score )?matri(?:x|ces)"),
    # techniques
    "kernel_fusion": (r"kernel fusion", r"fus(?:e|ed|ing|es) (?:\w+ )?(?:pointwise|elementwise|element-wise) op",
                      r"operator fusion", r"fus(?:e|ing) (?:the )?kernels", r"combine kernels", r"fusion",
                      r"fused (?:\w+ )?kernels?\b",
                      r"(?:operations|ops) (?:are )?fused",
                      r"fus(?:e|es|ed|ing) (?:multiple |several |the )?(?:\w+ )?(?:operations|ops)\b",
                      r"mega-?kernel",
                      # learned-18: work done in one kernel instead of several ("fuse all the operations ... into a
                      # single kernel", "produce a single value in a single kernel"); not what one kernel holds ("types
                      # used in the same kernel", "items handled in a single kernel execution")
                      r"into (?:a single|one|the same) (?:gpu |cuda |triton )?kernel\b",
                      r"in (?:a single|one) (?:gpu |cuda |triton )?kernel\b(?! execution| invocation| launch)"),
    "gemm_epilogue_fusion": (r"epilogue fusion", r"fused epilogue", r"fus(?:e|ed|ing) (?:the |an )?epilogue",
                             r"(?:fus\w+|merg\w+) (?:\w+ ){0,3}into (?:the )?(?:gemm'?s? )?epilogue", r"epilogue (?:visitors?|functors?)",
                             r"fusion in (?:the )?epilogue"),
    "online_softmax": (r"online softmax", r"single[- ]pass softmax", r"online normali[sz]er",
                       r"incrementally comput\w+ (?:the )?softmax",
                       r"softmax block by block"),
    "flash_attention": (r"flash ?attention", r"fused attention"),
    "autotune_launch": (r"auto[- ]?tun\w*", r"parameter tuning", r"tun(?:e|ing) (?:the )?(?:block[_ ]size|num_warps|num_stages|launch)",
                        r"triton\.autotune", r"tunable (?:template )?parameters", r"config(?:uration)?s? search",
                        r"(?:sweep|search)\w* (?:over )?(?:the )?(?:feasible |candidate |possible )?(?:configs?|configurations|tile sizes|block sizes)",
                        r"tuning (?:space|configs?|configurations)",
                        r"(?:exhaustive|incremental|offline|online) tuning",
                        r"tunableop",
                        r"gemm tuning",
                        r"(?:can|should) (?:\w+ )?be tuned",
                        r"search(?:es)? for the best",
                        r"(?:benchmark|compil|evaluat)\w* (?:\w+ )?candidate config",
                        r"enumerate (?:\w+ )?configs",
                        r"parameter sweep",
                        r"search space",
                        # learned-18: autotuning said as plain tuning of launch parameters ("tuning tile sizes based
                        # profiling", "pre-tuned on MI250X and hard coded", "find the best kernel configuration")
                        r"pre-?tuned\b",
                        r"tun(?:e|ed|ing) (?:the )?(?:tile|block|warp|kernel|launch|grid|cta)[- _]?(?:sizes?|dims?|shapes?|configs?|configurations?|parameters?)",
                        r"(?:find|pick|choose|select)\w* the (?:best|fastest|optimal) (?:\w+ )?(?:config\w*|launch parameters|block size|tile size)",
                        # learned-23: the launch's sizes as OpenCL, SYCL, Vulkan and Metal name them (work-group, local
                        # work, threadgroup, subgroup sizes)
                        r"tun(?:e|ed|ing) (?:the )?(?:work-?group|local work|threadgroup|sub-?group|wavefront)[- _]?(?:sizes?|dims?|shapes?)",
                        r"(?:find|pick|choose|select)\w* the (?:best|fastest|optimal) (?:work-?group|local work|threadgroup) size"),
    "vectorized_access": (r"vectori[sz]ed (?:loads?|stores?|access|reads?|memory)", r"float4", r"128-bit (?:loads|access)",
                          r"vector (?:loads|stores|width)", r"vectori[sz]ation", r"wide\s+(?:[\w.]+\s+)?loads?",
                          r"128[- ]?bits? (?:per )?(?:load|access|width)",
                          r"vectori[sz]e (?:\w+ )?(?:memory )?(?:access|loads?|stores?)",
                          r"\d+ bytes (?:of data )?at a time",
                          # learned-19: "Vectorized Mem Access", "128-bit vector memory accesses", "All loads use maximum
                          # vector length", "enabling wider memory operations"
                          r"vectori[sz]ed mem\b", r"vector memory acc\w+", r"(?:maximum|full) vector (?:length|width)",
                          r"wider (?:memory )?(?:operations|accesses|loads|stores)",
                          # learned-23: OpenCL C's vector loads and stores (vload4, vstore_half8) and AMD's 64- to
                          # 128-bit memory instructions (global_load_dwordx4, ds_read_b128)
                          r"v(?:load|store)(?:_half)?\d+\b",
                          r"(?:global|buffer|flat)_(?:load|store)_(?:dwordx[234]|b(?:64|96|128))\b"),
    # learned-23: shared memory under its other names too (SHARED_MEMORY: LDS, SLM, threadgroup memory, OpenCL's local
    # memory where the sentence speaks OpenCL or SYCL)
    "shared_memory_tiling": (SHARED_MEMORY + r" tiling", r"stage (?:data )?(?:from (?:device|global) memory )?into " + SHARED_MEMORY,
                             r"tiles? (?:in|into) " + SHARED_MEMORY, r"tiling (?:with|in|through) " + SHARED_MEMORY,
                             r"(?:maximi[sz]\w+|using) (?:the use of )?on-chip memory",
                             r"tiles? (?:of \w+ (?:and \w+ )?)?(?:are )?loaded into (?:\w+ )?" + SHARED_MEMORY,
                             # learned-18: the technique by its means ("Level 03: Use shared memory", "using shared memory
                             # to reuse data", "SMEM Caching")
                             r"(?:^|(?<=: )|(?<=- ))use (?:the )?" + SHARED_MEMORY,
                             r"(?:use|using|utili[sz]\w*) (?:the )?(?:cuda |on-chip |fast )?" + SHARED_MEMORY + r" (?:to|for) "
                             r"(?:re-?use|cach\w+|stag\w+|speed\w*|enhanc\w+|hold (?:the )?tiles?)",
                             r"(?:smem|shared memory|lds|slm) caching",
                             # learned-23: Taichi's name for caching a block's data in shared memory, "block local storage"
                             # (ti.block_local)
                             # (not "fast, block-local storage", an adjective of shared memory)
                             r"block local storage", r"block_local\(",
                             # learned-19: the tile of a thread block, staged in shared memory ("2D block tiling")
                             r"(?:[12]d )?(?:thread ?)?block ?tiling",
                             # learned-35: the technique by what it does, data loaded into shared memory and reused there
                             # ("loading input data into shared memory once and reusing it", "then reused multiple times
                             # from shared memory"; heldout37's convolution chapter)
                             r"load\w* (?:\w+ ){0,3}(?:in|into) " + SHARED_MEMORY + r" (?:\w+ ){0,2}and re-?us\w+",
                             r"re-?used? (?:\w+ ){0,3}from " + SHARED_MEMORY),
    "split_k": (r"split[- ]?k\b", r"parallelism along (?:the )?k\b", r"parallel reduction over k", r"splitting (?:the )?k\b",
                # learned-19: the decoding form, split along the keys and values ("Split along the KV sequence length to
                # occupy the GPU", "split the K/V sequence and reduce partial outputs", "split the kv_ctx dimension")
                r"split\w* (?:along |over |across )?(?:the )?(?:kv|k/v)(?![a-z])",
                # learned-23: Tensile's (rocBLAS, hipBLASLt) parameter for it, splitting the summation over work-groups
                r"global ?split ?u\b",
                # learned-23: split-K said as splitting the summation over blocks ("Split up summation among work-groups
                # to create more concurrency", Tensile)
                r"split\w* (?:up )?(?:the )?(?:summation|k[- ]dimension|reduction dimension) (?:among|across|over) (?:the )?"
                + BLOCKS + r"(?![\w-])"),
    "memory_coalescing": (r"coalesc\w+", r"consecutive memory locations", r"contiguous (?:memory )?access",
                          r"accesses are (?:not )?consecutive",
                          # learned-23: coalescing described by who reads what, with the other models' threads
                          # ("adjacent work-items access consecutive addresses")
                          r"(?:consecutive|adjacent|neighbou?ring) " + THREAD + r"s (?:\w+ ){0,3}(?:consecutive|contiguous|adjacent) "
                          r"(?:memory )?(?:addresses|locations|elements|words)"),
    "register_blocking": (r"register blocking", r"register tiling", r"register[- ]level tiles?",
                          # learned-19: the GEMM tutorials' names for it ("2D block tiling and 2D thread tiling",
                          # "Warptiling"), and "tiles of data to be stored in registers"
                          r"(?:[12]d )?thread ?tiling", r"warp ?tiling",
                          r"tiles? (?:of data )?(?:to be |are )?(?:stored|kept|held) in registers"),
    "loop_unrolling": (r"loop unrolling", r"unroll\w*"),
    "reduce_block_size": (r"smaller (?:blocks|block size|tiles)", r"reduc\w+ (?:the )?block[_ ]size",
                          # learned-23: a block's size as OpenCL, SYCL, Vulkan ("work-group size", "local work size") and
                          # Metal ("threadgroup size") name it
                          r"smaller (?:work-?group|threadgroup|local work) sizes?",
                          r"reduc\w+ (?:the )?(?:work-?group|threadgroup|local work) size"),
    "increase_occupancy": (r"(?:increase|raise|higher|improve|maximi[sz]e)\w* (?:the )?occupancy",
                           r"sufficient number of resident warps", r"more (?:resident |active )?warps",
                           r"(?:multiple|many) (?:resident |active )?warps (?:on|per) (?:the |an? |each )?(?:sm|multiprocessor)",
                           # learned-23: "maximum occupancy" too (the HIP occupancy calculator's aim)
                           r"(?:optimal|attainable|achievable|better|good|full|maximum) occupancy",
                           # learned-23: more warps under their other names (WARPS), per compute unit, SIMD or EU
                           r"more (?:resident |active )?(?:wavefronts|sub-?groups|simd-?groups)\b",
                           r"more (?:resident |active )?(?:waves|wavefronts) per (?:simd|eu|cu|compute unit)\b",
                           r"(?:multiple|many) (?:resident |active )?" + WARPS + r" (?:on|per) (?:the |an? |each )?"
                           r"(?:" + MULTIPROCESSORS + r"|simd|eu)(?![\w-])"),
    # learned-23: persistent work-groups and threadgroups (BLOCKS) too
    "persistent_kernel": (r"persistent (?:kernels?|ctas?|thread ?blocks?|scheduling|gemms?|style|grid|tile scheduler|"
                          r"work-?groups?|threadgroups?|wavefronts?)\b",
                          r"(?:is|are) (?:also )?persistent\b"),
    "software_pipelining": (r"software pipelin\w+", r"double[- ]buffer\w*", r"multi[- ]stage pipelin\w+", r"num_stages",
                            r"overlap(?:s|ping)? (?:\w+ ){0,3}(?:memory|loads?|copies|copy|tma|data transfers?) (?:with|and) (?:\w+ )?(?:compute|computation|math|gemm)",
                            r"overlap(?:s|ping)? (?:the )?(?:compute|computation|math) (?:with|and) (?:\w+ )?(?:memory|loads?|copies|data transfers?)",
                            # not pipeline parallelism's stages and bubbles, nor a pipeline class or policy; not PrefetchGlobalRead
                            r"pipelin(?:e|ed|ing)\b(?![- ](?:parallel\w*|bubbles?|class\w*|polic\w+))",
                            r"prefetch(?:es|ed|ing)?\b", r"pipeline stag\w+(?! parallel)",
                            r"(?:[2-9]|two|three|four|multiple)[- ]stages?\b",
                            r"multi[- ]?buffer\w*", r"multi-?stage\b"),
    # learned-23: padding shared memory under its other names (SHARED_MEMORY)
    "bank_conflict_padding": (r"pad(?:ding)? (?:the )?(?:shared|smem|columns)", r"swizzl\w+",
                              r"pad(?:ding)? (?:the )?(?:\w+ )?(?:in )?" + SHARED_MEMORY),
    "cache_modifiers": (r"cache (?:modifiers?|hints?)", r"eviction (?:policy|hints?)", r"evict_(?:first|last)",
                        r"cache_modifier", r"\.cg\b", r"streaming stores?",
                        r"non-?temporal (?:loads?|stores?|intrinsics?|hints?)",
                        r"bypass (?:the )?l2",
                        r"priority for eviction",
                        # learned-23: AMD's cache-policy bits on loads and stores (glc, slc) and clang's
                        # __builtin_nontemporal_load/store, which HIP documents for streaming data
                        r"(?:glc|slc)\b", r"__builtin_nontemporal_\w+"),
    "recompute_instead_of_store": (r"recomput\w+ instead of stor\w+", r"recompute in (?:the )?backward", r"recomputation"),
    "warp_shuffle_reduction": (r"warp[- ]shuffle", r"all-reduce across (?:a number of )?threads", r"__shfl\w*", r"warp[- ]level reduction", r"warp all[- ]?reduce",
                               r"warp[- ]level intrinsics",
                               r"threads in (?:a |the )?warp to communicate",
                               r"shuffle (?:down|up|xor)",
                               # learned-23: the warp's exchange and reductions in other models' words: subgroup
                               # operations (Vulkan/GLSL/WGSL subgroupAdd, subgroupShuffleDown; OpenCL sub_group_reduce_add),
                               # SYCL's group algorithms (reduce_over_group, shift_group_left, permute_group_by_xor), Metal's
                               # SIMD-group functions (simd_sum, simd_shuffle_down), HLSL's wave intrinsics (WaveActiveSum),
                               # AMD's cross-lane operations (DPP, ds_swizzle, ds_bpermute), NVIDIA's SHFL instruction and
                               # the CUDA.jl/Numba shfl_down_sync; "warp-level primitives"
                               r"sub-?group (?:shuffles?|reduc\w+|operations|ops|functions|intrinsics|collectives?|"
                               r"arithmetic|all-?reduce|primitives)",
                               r"subgroup(?:shuffle|add|mul|min|max|and|or|xor|broadcast|exclusive|inclusive|ballot)\w*",
                               r"sub_group_(?:reduce|shuffle|broadcast|scan)\w*",
                               r"(?:reduce_over_group|shift_group_(?:left|right)|permute_group_by_xor|select_from_group)\b",
                               r"simd(?:-?group)?[_ ](?:shuffle\w*|sum|prefix_\w+|max|min|product|reduc\w+|broadcast\w*)\b",
                               r"wave(?:active|readlane|prefix)\w*",
                               r"wave(?:front)?[- ]level (?:reduc\w+|primitives|intrinsics|operations|shuffles?)",
                               r"cross[- ]lane (?:operations|ops|reduc\w+|shuffles?|permut\w+)",
                               r"dpp (?:instructions?|operations|ops|reduc\w+|shuffles?)", r"ds_(?:swizzle|bpermute|permute)\w*",
                               r"shfl(?:_\w+|\.[\w.]+)?\b",
                               r"warp[- ]level primitives",
                               # a reduction within one warp, by any of its names ("Reduce across each simdgroup first");
                               # not across the warps of a block, which goes through shared memory
                               r"(?:wavefront|sub-?group|simd-?group)[- ]level reduc\w+",
                               r"reduc\w* (?:across|within|over) (?:each|a|the|one) (?:single )?"
                               r"(?:warp|wavefront|sub-?group|simd-?group)(?![\w-])"),
    "branch_free_predication": (r"predicat(?:ion|ed|ing)\b", r"branch[- ]free", r"branchless"),
    "grouped_tile_rasterization": (r"raster\w+", r"grouped (?:tile )?ordering", r"swizzle the (?:program|block) order",
                                   # swizzling the order of thread blocks, not the layout of shared memory
                                   r"(?:thread ?block|block|tile|cta|program|work-?group)[- ]?swizzl\w*",
                                   r"swizzl\w* \(?raster\w+",
                                   r"super[- ]?group",
                                   # learned-19: "using swizzle access mode to increase L2 cache hit ratio", "Reorders the
                                   # program IDs ... for improved L2 cache behavior", "ordering thread blocks"
                                   r"swizzl\w*(?: \w+){0,2}(?=[^.]{0,60}\bl2\b)", r"reorder\w* (?:the )?(?:program|block|cta|tile)[- ]?ids?",
                                   r"order(?:ing)? (?:of )?(?:the )?thread ?blocks",
                                   # learned-23: work-groups for thread blocks (OpenCL, SYCL, Vulkan, ROCm); Tensile's
                                   # parameter that groups the order of work-groups, WorkGroupMapping
                                   r"reorder\w* (?:the )?work-?group[- ]?ids?", r"order(?:ing)? (?:of )?(?:the )?work-?groups",
                                   r"work-?group ?mapping\b",
                                   r"order in which (?:the )?(?:thread ?blocks|ctas|work-?groups|threadgroups|programs) "
                                   r"(?:compute|are (?:launched|scheduled|processed|dispatched))"),
    "block_row_mode": (r"block[- ]row mode", r"(?:several|multiple) rows per program", r"block_row"),
    "hoist_invariant_loads": (r"hoist\w*", r"loop[- ]invariant loads?"),
    # learned-23: compute units (AMD, OpenCL) and Xe cores (Intel) for SMs, work-groups for blocks
    "sm_count_grid": (r"grid sized to the (?:sm|multiprocessor|cu|compute unit) count",
                      r"one (?:cta|block|program|work-?group|threadgroup) per (?:sm|cu|compute unit|xe[- ]core)\b",
                      # "The number of workgroups launched should be a multiple of the number of CUs"; a grid's, not
                      # anything's ("a fixed multiple of the SM count: 4 Tensor Cores per SM")
                      r"(?:grid|" + BLOCKS + r")(?: \w+){0,4} (?:a |an )?(?:integer |exact )?multiple of the "
                      r"(?:number of (?:sms|cus|compute units|multiprocessors|xe[- ]cores)|(?:sm|cu|compute unit|multiprocessor) count)\b"),
    "warp_specialization": (r"warp[- ]speciali[sz]\w+", r"producer[- ]consumer", r"specialized warpgroups?",
                            r"\(producer\)",
                            r"[\"“]?producers?[\"”]? (?:and|&|/) [\"“]?consumers?\b",
                            r"(?:producer|consumer) (?:warps?|warpgroups?|warp groups?)",
                            # learned-23: the warp under its other names (WARPS: wavefronts, subgroups, SIMD-groups)
                            r"(?:wave|wavefront|sub-?group|simd-?group)[- ]speciali[sz]\w+",
                            r"(?:producer|consumer) (?:wavefronts?|waves|sub-?groups?|simd-?groups?)\b"),
    # not the warp-level, warp-synchronous, LLVM or compiler intrinsics, which are no fast math
    "fast_math_intrinsics": (r"(?<!warp-level )(?<!warp-synchronous )(?<!llvm )(?<!compiler )intrinsic(?:s| functions?)",
                             # learned-23: "fastmath" in one word too (Julia's @fastmath, Numba's fastmath=True, Metal's
                             # fastMathEnabled)
                             r"fast[- ]?math", r"__expf|__fdividef|__sinf",
                             # learned-23: OpenCL's -cl-fast-relaxed-math and native_ functions, SYCL's sycl::native:: and
                             # Metal's metal::fast:: namespaces
                             r"fast[- ]relaxed[- ]math",
                             # Metal's math mode (MTLMathModeFast, MLX's math_mode="fast"), and "relaxed math"; not
                             # Vulkan's RelaxedPrecision, which is 16-bit arithmetic
                             r"math[_ ]?mode\W{0,4}(?:fast|relaxed)\b", r"mtlmathmode\.?(?:fast|relaxed)\b",
                             r"relaxed math\b",
                             r"native_(?:exp|exp2|exp10|log|log2|log10|sin|cos|tan|sqrt|rsqrt|recip|divide|powr)\b",
                             r"(?:sycl::native|metal::fast)::\w+"),
    # learned-23: with a thread under its other names (THREAD: OpenCL/SYCL work-item, Vulkan/WebGPU invocation)
    "thread_coarsening": (r"thread coarsening", r"elements (?:each|per) " + THREAD + r" (?:processes|handles)",
                          r"each " + THREAD + r" (?:handles|processes) multiple", r"coarsen\w*", r"more work per " + THREAD,
                          r"(?:elements|outputs|points|stencils) (?:computed|processed|handled) per " + THREAD,
                          r"multiple (?:grid points|elements|outputs) per " + THREAD),
    "vendor_library": (r"vendor librar\w+", r"(?:keep|use|call)\w* (?:the )?(?:cublas|cudnn)",
                       # "fast-performance libraries from NVIDIA, such as cuBLAS, cuDNN"
                       r"(?:fast(?:-performance)?|optimi[sz]ed|high-performance) librar(?:y|ies)\b(?=[^.]{0,40}"
                       r"\b(?:cublas|cudnn|rocblas|miopen|hipblas))",
                       r"(?:use|using|call\w*)\s+(?:\w+'s\s+)?(?:rocwmma|rocblas|hipblaslt|cublas\w*|cudnn)\b",
                       # learned-23: the other vendors' libraries: AMD MIOpen and hipBLAS, Intel oneMKL and oneDNN, Apple's
                       # Metal Performance Shaders
                       r"(?:use|using|call\w*)\s+(?:\w+'s\s+)?(?:miopen|hipblas|onemkl|onednn|metal performance shaders)\b"),
    "batchnorm_folding": (r"fold\w* (?:the )?batch ?norm",),
    "launch_bounds": (r"__launch_bounds__", r"launch bounds",
                      r"launch[ _]bound\b",
                      # learned-23: the same promise to the compiler in other models: HIP's amdgpu_flat_work_group_size and
                      # amdgpu_waves_per_eu attributes (LLVM's amdgpu-flat-work-group-size), OpenCL's and SYCL's
                      # reqd_work_group_size, Metal's max_total_threads_per_threadgroup
                      r"amdgpu[-_](?:flat[-_]work[-_]group[-_]size|waves[-_]per[-_]eu)", r"reqd_work_group_size",
                      # Triton's AMD backend passes amdgpu-waves-per-eu as the kernel option waves_per_eu
                      r"waves_per_eu\b",
                      r"max_total_threads_per_threadgroup"),
    "tf32_tensor_cores": (r"\btf32\b", r"tensorfloat"),
    # learned-23: HIP graphs written in two words, and SYCL's graphs (sycl_ext_oneapi_graph's command_graph)
    "cuda_graph": (r"cuda graphs?", r"graph capture", r"hipgraph", r"hip graphs?\b", r"sycl graphs?\b", r"command_graph\b"),
    "channels_last": (r"channels[- ]last", r"\bnhwc\b"),
    "triton_reduction": (r"single[- ]kernel reduction", r"one-pass reduction"),
    "fused_normalization": (r"fused (?:layer|rms|group)?\s?norm\w*",),
    "algebraic_simplification": (r"algebraic simplification", r"algebraic(?:ally)? (?:rewrite|identit)"),
    # the Reviewer's measurement protocol
    "measure_warmup": (r"warm[- ]?ups?\b", r"warm[- ]?up (?:iterations|runs|loops?)",
                       # learned-18: the first runs set aside, said without "warm-up" ("ignore the first few
                       # iterations", "the first time you run JAX code, it will be slower", "warm the GPU")
                       r"(?:ignor|discard|skip|exclud|drop)\w* (?:the )?first (?:few |\w+ )?(?:iterations|runs|calls|launch\w*)",
                       r"first (?:time you run|run|call|iteration)s?\b[^.]{0,40}\bslower",
                       r"(?:re)?warm(?:s|ed)? (?:the )?(?:gpu|device)\b", r"rewarm\w*", r"warmed[- ]up", r"pre-?heat\w*"),
    "measure_cold_l2": (r"(?:flush|clear|clean|cold)\w* (?:the )?(?:device )?l2", r"l2 (?:cache )?flush\w*", r"buffer rotation",
                        r"rotat\w+ (?:the )?(?:input )?buffers", r"caches? (?:are |is )?[\"']?cold"),
    "measure_device_events": (r"cuda ?events?", r"cudaeventrecord", r"nsight[- ]systems",
                              r"cuda\.events?", r"torch\.cuda\.event",
                              r"hipevent\w*",
                              r"sync\w* (?:your |the )?(?:pipeline|device|stream)\b",
                              r"\w+\.sync\(\)",
                              # learned-23: device timing in other APIs: Vulkan's, WebGPU's and D3D's timestamp queries,
                              # OpenCL's event profiling (clGetEventProfilingInfo), SYCL's event profiling_info, Metal's
                              # command buffer GPUStartTime/GPUEndTime, CUDA.jl's CUDA.@elapsed and CUDA.@sync
                              r"timestamp[- ]quer(?:y|ies)", r"vkcmdwritetimestamp\w*", r"clgeteventprofilinginfo",
                              r"event profiling", r"profiling_info", r"gpu(?:start|end)time\b", r"cuda\.@(?:elapsed|sync)\b",
                              # learned-23: the wait for the device before a host timer reads, in each API: JAX's
                              # block_until_ready (its asynchronous dispatch), PyTorch's and Numba's cuda/xpu/mps
                              # .synchronize, OpenCL's clFinish, Metal's waitUntilCompleted, Vulkan's vkQueueWaitIdle; not
                              # the runtime's cudaStreamSynchronize, which profiles show as a stall to remove
                              r"block_until_ready\b", r"(?:cuda|xpu|mps)\.synchronize\b", r"clfinish\b",
                              r"waituntilcompleted\b", r"vkqueuewaitidle\b"),
    "measure_repetitions": (r"(?:profiling|testing|measured|timed|benchmark) (?:iterations|repetitions|runs)",
                            r"run[- ]to[- ]run variation", r"number of (?:repetitions|trials)",
                            r"number of (?:timed |timing |benchmark\w* |profiling |measured )iterations",
                            r"median (?:of|over) ", r"(?:average|mean) (?:over|of) (?:\d+|multiple|several|many) (?:runs|iterations|trials|repetitions)",
                            r"(?:run|profil\w*|measur\w*|tim\w+|repeat\w*) (?:\w+ ){0,4}several times",
                            r"\bp50\b",
                            r"timing intervals?",
                            r"confidence intervals?",
                            # learned-19: "The performance can vary, sometimes up to 25%, from one measurement to another",
                            # "over a large number of iterations"
                            r"from one (?:measurement|run) to (?:another|the next)",
                            r"over a large number of (?:iterations|runs|trials|repetitions)"),
    "measure_correctness_trials": (r"compar\w+ (?:the )?(?:results?|outputs?) (?:to|with|against) (?:a |the )?reference",
                                   r"reference (?:program|implementation)", r"unit tests?", r"correctness (?:checks?|tests?)",
                                   r"check(?:s|ing)? (?:the )?correctness", r"smoke tests?", r"validat\w+ (?:basic )?correctness",
                                   r"checks? results"),
    "measure_interleaved": (r"interleav\w+",),
    "measure_clock_control": (r"lock\w* (?:the )?(?:gpu |memory )?clocks?", r"clock (?:speed|frequenc\w+|variation|variability)",
                              r"fixed[- ]frequency", r"gpc frequenc\w+", r"clocks? (?:to )?(?:reach|settle|stabili[sz])",
                              r"(?:thermal|power|clock) throttl\w+", r"boost clocks?", r"power (?:cap|limit)s?\b",
                              # learned-18: "Lock GPU frequencies", "fix GPU clock and memory clock", "when GPU clocks
                              # are unlocked", "disable GPU boost"
                              r"(?:lock|fix)\w* (?:the )?(?:gpu |sm |memory )?(?:clocks?|frequenc\w+)",
                              r"clocks? (?:\w+ ){0,3}(?:un)?locked\b", r"disabl\w+ (?:the )?(?:gpu )?boost"),
}


# node id -> words in a sentence or its headings that mean another sense of the node's names: "pipeline
# parallelism" is no software pipelining, "collective synchronization overheads" across GPUs no barrier stall.
# A renderer's rasterization: its coarse and fine stages, a software or hardware rasterizer, triangles and paths.
GRAPHICS_RASTER = r"(?:coarse|fine|software|hardware|triangle|path|vector|conservative) rasteri[sz]\w*|rasteri[sz]ers?\b"
OTHER_SENSES: dict[str, re.Pattern[str]] = {node_id: re.compile(pattern, re.I) for node_id, pattern in {
    "software_pipelining": r"pipeline[- ]parallel|pipeline bubbles?|\bpipeline (?:and scheduler )?class|specific pipeline|"
                           r"pipeline polic|"
                           # a hardware unit's pipeline ("ALU pipeline stalls", "the FMA pipe"), not one of loads
                           r"\b(?:alu|fma|fp(?:16|32|64)|int(?:8|32)?|mio|lsu|math|arithmetic|execution|instruction)s? pipe(?:line)?s?\b|"
                           # learned-16: unified memory's pages prefetched to the device ("tries to prefetch
                           # allocations that are used in kernels"), not loads staged ahead of compute
                           r"prefetch\w* (?:\w+ )?allocations?|page (?:fault|migrat)\w*|unified (?:shared )?memory|managed memory|"
                           # learned-28: a graphics API's pipeline object (WebGPU's, Vulkan's, Metal's), set up with its
                           # bind groups or layout ("pass the texture and histogram buffer to our pipeline")
                           r"bind ?groups?|\b(?:compute|render|graphics) pipelines?\b|"
                           r"pipeline ?(?:layouts?|state objects?|descriptors?)\b|"
                           # learned-30: the host's side, a data loader prefetching batches or an input pipeline
                           # ("Use a more efficient data loader, such as a prefetch loader"), streams overlapping
                           # kernels with copies ("Streams are used to overlap computation and data transfer"), and
                           # Pallas's scalar prefetch of grid indices: none is a kernel's loads staged ahead of compute
                           r"data ?loaders?|prefetch loaders?|input pipelines?|scalar prefetch|\bstreams?\b[^.]{0,40}\boverlap|"
                           # learned-36: a renderer's pipeline, whose stages rasterize ("Most of the pipeline stages are
                           # reasonably fast, but the fine rasterization stage is disproportionately slow"; heldout38)
                           + GRAPHICS_RASTER,
    # learned-36: and its rasterization is no order of a GEMM's tiles
    "grouped_tile_rasterization": GRAPHICS_RASTER,
    "memory_bandwidth": r"\bhost\b|\bpcie\b|\bsdma\b|memory (?:capacity|footprint)|memory consumption",
    "launch_overhead": r"first (?:launch|call|run)\b",
    "barrier_stall": r"collective|all-?reduce|tensor parallel|across (?:gpus|nodes|ranks)",
    "reduce_block_size": r"quanti[sz]|scal(?:e|ing) factors?|microscal",
    "skinny_gemm": r"\bsparse\b|\bspmv\b|\bcpus?\b",
    "measure_interleaved": r"weights?\b|layouts?\b|\[",
    "fast_math_intrinsics": r"\bthese intrinsics\b|nontemporal|__builtin",
    # learned-16: latency-bound scenarios, workloads or serving are small batches waiting on launches and the host
    "memory_latency": r"latency[- ]hiding schedul|latency[- ]bound (?:scenarios?|applications?|use[- ]cases?|workloads?|"
                      r"inference|serving)",
    # learned-16: zero padding fits a shape to a tile ("pad with zeros to match the required padding"), not banks
    "bank_conflict_padding": r"thread ?blocks?\b|\bl2\b|rasteri[sz]|\bwith zeros\b|zero[- ]padd",
    # learned-16: a cache of compiled kernels kept on disk ("an on-disk persistent kernel cache")
    "persistent_kernel": r"kernel cache|persistent cache|on-disk|compil\w+ cache",
    # learned-23: a wait for the device (JAX's block_until_ready) before a device memory profile is taken measures
    # memory, not time
    "measure_device_events": r"memory profil\w+",
}.items()}

# node id -> (an alias word with a common everyday sense, the words that must share its sentence for the node's sense).
# The word is matched against the whole of the alias's hit.
# "pipeline" alone is as often a workflow object ("call the compiled pipeline", "an inference pipeline", "each stage of
# the build pipeline") as a software pipeline of loads; the latter's sentence speaks of stages, buffers, producers and
# consumers, asynchronous copies or overlap.
NEEDS_CONTEXT: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {node_id: (re.compile(word, re.I), re.compile(context, re.I))
                                                                      for node_id, (word, context) in {
    "software_pipelining": (r"pipelines?", r"\bstages?\b|\bdepth\b|producers?|consumers?|\basync\w*|asynchronous|"
                                           r"overlap\w*|buffer\w*|\bloads?\b|prefetch\w*|\bcop(?:y|ies)\b|\bsmem\b|"
                                           r"shared memory|\btma\b|mainloop|latenc\w+"),
    # learned-12: "intrinsics" alone are as often a timer's, a matrix unit's or a compiler's ("the T.cuda.timer_*
    # intrinsics", "the low-level intrinsics" of WMMA) as fast math functions; the latter's sentence speaks of math
    "fast_math_intrinsics": (r"intrinsic(?:s| functions?)", r"\bmath|\b(?:exp|log|sin|cos|tan|pow|rcp|div)(?:2|10|f|h)?\b|"
                                                           r"tanh|sqrt|divisions?|reciprocal|transcendental|precision|accura\w+|"
                                                           r"\bulps?\b|fast|approximat\w+|special functions?|\bsfu\b|"
                                                           r"floating[- ]point|__\w+f\b"),
    # learned-23: OpenCL's and SYCL's "local memory" is a work-group's shared memory, CUDA's a thread's spill space in
    # DRAM (the sense register_pressure's "spills to local memory" reads). A hit that holds it (SHARED_MEMORY) is
    # shared memory only where the sentence speaks OpenCL or SYCL: work-groups, work-items, the __local qualifier,
    # local accessors, the local work size, nd_range.
    # learned-23: AMD's execution mask is divergence where the sentence speaks of branches or inactive lanes, not in
    # "VMEM instructions also support the EXEC mask"
    "warp_divergence": (r"exec(?:ution)?[- ]mask", r"branch\w*|conditional|diverg\w*|inactive|if/else|control[- ]flow"),
    # learned-31: a cache's own eviction policy ("the caches ... are at the mercy of the access pattern and eviction
    # policy") is the hardware's; a hint's is set on a load or a store
    "cache_modifiers": (r"eviction polic(?:y|ies)", r"\bloads?\b|\bstores?\b|hints?|modifiers?|evict_\w+|"
                                                   r"qualifiers?|instructions?|intrinsics?|__ld\w+|per[- ](?:load|access)"),
    **{node_id: (r".*(?<!shared )\blocal memory\b.*",
                 r"work-?groups?\b|work-?items?\b|\b__local\b|local_accessor|\bopencl\b|\bsycl\b|dpc\+\+|"
                 r"clk_local_mem_fence|\bnd_range|local (?:work[- ])?size")
       for node_id in ("shared_memory_tiling", "bank_conflict_padding")},
}.items()}


@dataclass(frozen=True)
class Mention:
    id: str
    kind: str  # Bottleneck | Technique | ProtocolStep
    start: int  # offset in the sentence
    end: int
    exact: bool  # the node's name or id, not an alias


@dataclass(frozen=True)
class LexiconEntry:
    id: str
    kind: str
    pattern: re.Pattern[str]
    exact: bool


class Lexicon:
    """Finds mentions of known Bottlenecks, Techniques and protocol steps in text."""

    def __init__(self, nodes: Iterable[Mapping[str, str]], aliases: Mapping[str, tuple[str, ...]] = ALIASES):
        """`nodes`: rows with id, kind and name (rejected nodes should not be passed)."""
        self.entries: list[LexiconEntry] = []
        for node in nodes:
            node_id, kind = node["id"], node["kind"]
            own = {_phrase(node_id.replace("_", " ")), _phrase(node.get("name") or "")} - {""}
            for phrase in own:
                self.entries.append(LexiconEntry(node_id, kind, re.compile(rf"(?<![\w-]){phrase}(?![\w-])", re.I), True))
            for alias in aliases.get(node_id, ()):
                self.entries.append(LexiconEntry(node_id, kind, re.compile(rf"(?<![\w-]){alias}", re.I), False))

    def mentions(self, text: str) -> list[Mention]:
        """Every node mentioned, once each (its first and most exact hit), in text order.

        Where two hits overlap, the longer wins: "shared memory bank conflicts" is the bottleneck,
        not also "shared memory tiling"."""
        hits: list[Mention] = []
        for entry in self.entries:
            for m in entry.pattern.finditer(text):
                if m.end() > m.start():
                    hits.append(Mention(entry.id, entry.kind, m.start(), m.end(), entry.exact))
        hits = [h for h in hits if not _other_sense(h, text)]
        hits.sort(key=lambda h: (-(h.end - h.start), h.start))
        kept: list[Mention] = []
        for hit in hits:
            if any(hit.start < k.end and k.start < hit.end for k in kept):
                continue
            kept.append(hit)
        first: dict[str, Mention] = {}
        for hit in sorted(kept, key=lambda h: h.start):
            first.setdefault(hit.id, hit)
        return list(first.values())


def _other_sense(hit: Mention, text: str) -> bool:
    """An alias hit on a word with an everyday sense (NEEDS_CONTEXT) in a sentence without the node's vocabulary."""
    if hit.exact or hit.id not in NEEDS_CONTEXT:
        return False
    word, context = NEEDS_CONTEXT[hit.id]
    return word.fullmatch(text[hit.start:hit.end]) is not None and context.search(text) is None


def _phrase(name: str) -> str:
    """A node name as a pattern: words in order, joined by hyphens, spaces or nothing; short names dropped."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    if not words or sum(len(w) for w in words) < 6:
        return ""
    return r"[\s_-]*".join(re.escape(w) for w in words)  # "FlashAttention" is "flash attention"
