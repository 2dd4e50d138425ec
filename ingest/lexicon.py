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

# node id -> patterns. Kept to phrases that name the thing itself, not merely its topic:
# "shared memory" alone names no technique, "stage data into shared memory" does.
ALIASES: dict[str, tuple[str, ...]] = {
    # bottlenecks
    "memory_bandwidth": (r"memory[- ]bound", r"bandwidth[- ]bound", r"(?:limited|bound) by (?:the )?(?:dram |memory |hbm )?bandwidth",
                         r"memory[- ]intensive", r"memory bandwidth (?:is|becomes) the bottleneck",
                         r"memory access (?:is |as )?(?:a |the )?bottleneck", r"memory bus utili[sz]ation",
                         # "GPU memory utilization" is capacity
                         r"memory (?:bus )?throughput",
                         r"wastes? (?:the )?memory bandwidth"),
    "compute_limited": (r"compute[- ]bound", r"compute[- ]intensive", r"math[- ]bound", r"limited by (?:floating-point|flops|compute)",
                        r"(?:maximum |maximi[sz]\w+ )?(?:instruction|arithmetic|math) throughput"),
    "memory_latency": (r"memory latency", r"latency[- ]bound", r"hide (?:the )?latenc", r"latency hiding"),
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
                        r"host[- ]side overhead"),
    "materialized_intermediates": (r"intermediate (?:results|tensors|values) (?:to|in|through) (?:hbm|dram|global memory)",
                                   r"round[- ]trip(?:s|ping)? (?:to|through) (?:hbm|dram|global memory)"),
    "register_pressure": (r"register pressure", r"register spill", r"spill(?:s|ing)? to local memory", r"too many registers",
                          r"more registers than available", r"register (?:limit|usage|budget)",
                          r"register spill\w*", r"spill(?:s|ed|ing)? (?:\w+ )?registers",
                          r"register use\b"),
    "occupancy_limited": (r"low occupancy", r"occupancy (?:is )?limit", r"limit(?:s|ed|ing)? (?:the )?occupancy",
                          r"(?:too )?few (?:resident |active )?warps", r"reduc(?:es?|ing) (?:the )?occupancy",
                          r"reduc\w* (?:the |its )?occupancy",
                          r"occupancy (?:goes|drops) down",
                          r"lower occupancy"),
    "warp_divergence": (r"warp divergence", r"divergent warps?", r"branch divergence", r"diverge(?:nt|s)?\b",
                        r"different execution paths",
                        r"different control flow"),
    "uncoalesced_access": (r"uncoalesced", r"non[- ]coalesced", r"strided (?:access|load)", r"non-optimal global memory access",
                           r"misaligned (?:access|load)", r"scattered (?:access|address)"),
    "excess_dram_traffic": (r"(?:redundant|extra|excess) (?:dram |global memory |hbm )?(?:traffic|loads|reads)",
                            r"memory traffic"),
    "tensor_core_unused": (r"tensor cores? (?:are |is )?(?:idle|unused)", r"without tensor cores",
                           r"(?:underutili[sz]\w*|under-utili[sz]\w*|idle) tensor cores",
                           r"tensor cores? (?:\w+ ){0,2}(?:underutili[sz]ed|under-utili[sz]ed)",
                           # learned-18: using the tensor (or matrix) cores, or not, said as such ("Level 04: Use tensor
                           # cores (WMMA)", "cannot utilize the NVIDIA Tensor Cores", "low tensor core utilization")
                           r"(?:not|cannot|can't|unable to|fail\w* to|don[’']t|doesn[’']t) (?:\w+ )?(?:use|utili[sz]e|leverage) "
                           r"(?:the )?(?:\w+ ){0,2}(?:tensor|matrix) ?cores?\b",
                           r"(?:to|(?:^|(?<=: )|(?<=- ))) ?(?:use|utili[sz]e|leverage|exploit) (?:the )?(?:\w+ ){0,2}(?:tensor|matrix) ?cores?\b",
                           r"(?:using|utili[sz]ing|leveraging) (?:the )?(?:\w+ ){0,2}(?:tensor|matrix) ?cores? (?:for|to)\b",
                           r"(?:tensor|matrix) ?cores? (?:utili[sz]ation|eligib\w+|can be (?:fully |efficiently )?utili[sz]ed)"),
    "shared_memory_bank_conflicts": (r"bank conflicts?", r"same (?:shared memory )?bank", r"bank-conflict"),
    "tail_effect": (r"tail effect", r"(?:last|partial|final) wave", r"wave quantization"),
    "low_parallelism": (r"(?:not enough|too little|insufficient|more) parallelism", r"(?:few|too few) (?:thread )?blocks",
                        r"(?:underutiliz|under-utiliz)\w* (?:\w+ )?(?:gpu|sms?|multiprocessors)", r"idle (?:sms|multiprocessors)",
                        r"(?:increase|more) (?:the )?concurrency",
                        r"(?:fill|occupy|saturate) (?:all )?(?:of )?(?:the )?(?:gpu|sms|multiprocessors)\b",
                        # learned-19: "enough blocks and threads to fill up the GPU"
                        r"fill up (?:the )?(?:gpu|sms)\b"),
    "skinny_gemm": (r"skinny (?:gemm|matrix|matmul)", r"small (?:m|n) and large k", r"tall[- ]and[- ]skinny", r"\bgemv\b",
                    r"matrix[- ]vector"),
    "barrier_stall": (r"barrier stall", r"__syncthreads\(\)? (?:overhead|stall)", r"synchronization (?:overhead|stall)"),
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
                        r"(?:find|pick|choose|select)\w* the (?:best|fastest|optimal) (?:\w+ )?(?:config\w*|launch parameters|block size|tile size)"),
    "vectorized_access": (r"vectori[sz]ed (?:loads?|stores?|access|reads?|memory)", r"float4", r"128-bit (?:loads|access)",
                          r"vector (?:loads|stores|width)", r"vectori[sz]ation", r"wide\s+(?:[\w.]+\s+)?loads?",
                          r"128[- ]?bits? (?:per )?(?:load|access|width)",
                          r"vectori[sz]e (?:\w+ )?(?:memory )?(?:access|loads?|stores?)",
                          r"\d+ bytes (?:of data )?at a time",
                          # learned-19: "Vectorized Mem Access", "128-bit vector memory accesses", "All loads use maximum
                          # vector length", "enabling wider memory operations"
                          r"vectori[sz]ed mem\b", r"vector memory acc\w+", r"(?:maximum|full) vector (?:length|width)",
                          r"wider (?:memory )?(?:operations|accesses|loads|stores)"),
    "shared_memory_tiling": (r"shared[- ]memory tiling", r"stage (?:data )?(?:from device memory )?into shared memory",
                             r"tiles? (?:in|into) shared memory", r"tiling (?:with|in|through) shared memory",
                             r"(?:maximi[sz]\w+|using) (?:the use of )?on-chip memory",
                             r"tiles? (?:of \w+ (?:and \w+ )?)?(?:are )?loaded into (?:\w+ )?shared memory",
                             # learned-18: the technique by its means ("Level 03: Use shared memory", "using shared memory
                             # to reuse data", "SMEM Caching")
                             r"(?:^|(?<=: )|(?<=- ))use (?:the )?shared memory\b",
                             r"(?:use|using|utili[sz]\w*) (?:the )?(?:cuda |on-chip |fast )?shared memory (?:to|for) "
                             r"(?:re-?use|cach\w+|stag\w+|speed\w*|enhanc\w+|hold (?:the )?tiles?)",
                             r"(?:smem|shared memory) caching",
                             # learned-19: the tile of a thread block, staged in shared memory ("2D block tiling")
                             r"(?:[12]d )?(?:thread ?)?block ?tiling"),
    "split_k": (r"split[- ]?k\b", r"parallelism along (?:the )?k\b", r"parallel reduction over k", r"splitting (?:the )?k\b",
                # learned-19: the decoding form, split along the keys and values ("Split along the KV sequence length to
                # occupy the GPU", "split the K/V sequence and reduce partial outputs", "split the kv_ctx dimension")
                r"split\w* (?:along |over |across )?(?:the )?(?:kv|k/v)(?![a-z])"),
    "memory_coalescing": (r"coalesc\w+", r"consecutive memory locations", r"contiguous (?:memory )?access",
                          r"accesses are (?:not )?consecutive"),
    "register_blocking": (r"register blocking", r"register tiling", r"register[- ]level tiles?",
                          # learned-19: the GEMM tutorials' names for it ("2D block tiling and 2D thread tiling",
                          # "Warptiling"), and "tiles of data to be stored in registers"
                          r"(?:[12]d )?thread ?tiling", r"warp ?tiling",
                          r"tiles? (?:of data )?(?:to be |are )?(?:stored|kept|held) in registers"),
    "loop_unrolling": (r"loop unrolling", r"unroll\w*"),
    "reduce_block_size": (r"smaller (?:blocks|block size|tiles)", r"reduc\w+ (?:the )?block[_ ]size"),
    "increase_occupancy": (r"(?:increase|raise|higher|improve|maximi[sz]e)\w* (?:the )?occupancy",
                           r"sufficient number of resident warps", r"more (?:resident |active )?warps",
                           r"(?:multiple|many) (?:resident |active )?warps (?:on|per) (?:the |an? |each )?(?:sm|multiprocessor)",
                           r"(?:optimal|attainable|achievable|better|good|full) occupancy"),
    "persistent_kernel": (r"persistent (?:kernels?|ctas?|thread ?blocks?|scheduling|gemms?|style|grid|tile scheduler)",
                          r"(?:is|are) (?:also )?persistent\b"),
    "software_pipelining": (r"software pipelin\w+", r"double[- ]buffer\w*", r"multi[- ]stage pipelin\w+", r"num_stages",
                            r"overlap(?:s|ping)? (?:\w+ ){0,3}(?:memory|loads?|copies|copy|tma|data transfers?) (?:with|and) (?:\w+ )?(?:compute|computation|math|gemm)",
                            r"overlap(?:s|ping)? (?:the )?(?:compute|computation|math) (?:with|and) (?:\w+ )?(?:memory|loads?|copies|data transfers?)",
                            # not pipeline parallelism's stages and bubbles, nor a pipeline class or policy; not PrefetchGlobalRead
                            r"pipelin(?:e|ed|ing)\b(?![- ](?:parallel\w*|bubbles?|class\w*|polic\w+))",
                            r"prefetch(?:es|ed|ing)?\b", r"pipeline stag\w+(?! parallel)",
                            r"(?:[2-9]|two|three|four|multiple)[- ]stages?\b",
                            r"multi[- ]?buffer\w*", r"multi-?stage\b"),
    "bank_conflict_padding": (r"pad(?:ding)? (?:the )?(?:shared|smem|columns)", r"swizzl\w+"),
    "cache_modifiers": (r"cache (?:modifiers?|hints?)", r"eviction (?:policy|hints?)", r"evict_(?:first|last)",
                        r"cache_modifier", r"\.cg\b", r"streaming stores?",
                        r"non-?temporal (?:loads?|stores?|intrinsics?|hints?)",
                        r"bypass (?:the )?l2",
                        r"priority for eviction"),
    "recompute_instead_of_store": (r"recomput\w+ instead of stor\w+", r"recompute in (?:the )?backward", r"recomputation"),
    "warp_shuffle_reduction": (r"warp[- ]shuffle", r"all-reduce across (?:a number of )?threads", r"__shfl\w*", r"warp[- ]level reduction", r"warp all[- ]?reduce",
                               r"warp[- ]level intrinsics",
                               r"threads in (?:a |the )?warp to communicate",
                               r"shuffle (?:down|up|xor)"),
    "branch_free_predication": (r"predicat(?:ion|ed|ing)\b", r"branch[- ]free", r"branchless"),
    "grouped_tile_rasterization": (r"raster\w+", r"grouped (?:tile )?ordering", r"swizzle the (?:program|block) order",
                                   # swizzling the order of thread blocks, not the layout of shared memory
                                   r"(?:thread ?block|block|tile|cta|program)[- ]?swizzl\w*",
                                   r"swizzl\w* \(?raster\w+",
                                   r"super[- ]?group",
                                   # learned-19: "using swizzle access mode to increase L2 cache hit ratio", "Reorders the
                                   # program IDs ... for improved L2 cache behavior", "ordering thread blocks"
                                   r"swizzl\w*(?: \w+){0,2}(?=[^.]{0,60}\bl2\b)", r"reorder\w* (?:the )?(?:program|block|cta|tile)[- ]?ids?",
                                   r"order(?:ing)? (?:of )?(?:the )?thread ?blocks"),
    "block_row_mode": (r"block[- ]row mode", r"(?:several|multiple) rows per program", r"block_row"),
    "hoist_invariant_loads": (r"hoist\w*", r"loop[- ]invariant loads?"),
    "sm_count_grid": (r"grid sized to the (?:sm|multiprocessor) count", r"one (?:cta|block|program) per sm"),
    "warp_specialization": (r"warp[- ]speciali[sz]\w+", r"producer[- ]consumer", r"specialized warpgroups?",
                            r"\(producer\)",
                            r"[\"“]?producers?[\"”]? (?:and|&|/) [\"“]?consumers?\b",
                            r"(?:producer|consumer) (?:warps?|warpgroups?|warp groups?)"),
    # not the warp-level, warp-synchronous, LLVM or compiler intrinsics, which are no fast math
    "fast_math_intrinsics": (r"(?<!warp-level )(?<!warp-synchronous )(?<!llvm )(?<!compiler )intrinsic(?:s| functions?)",
                             r"fast[- ]math", r"__expf|__fdividef|__sinf"),
    "thread_coarsening": (r"thread coarsening", r"elements (?:each|per) thread (?:processes|handles)",
                          r"each thread (?:handles|processes) multiple", r"coarsen\w*", r"more work per thread",
                          r"(?:elements|outputs|points|stencils) (?:computed|processed|handled) per thread",
                          r"multiple (?:grid points|elements|outputs) per thread"),
    "vendor_library": (r"vendor librar\w+", r"(?:keep|use|call)\w* (?:the )?(?:cublas|cudnn)",
                       # "fast-performance libraries from NVIDIA, such as cuBLAS, cuDNN"
                       r"(?:fast(?:-performance)?|optimi[sz]ed|high-performance) librar(?:y|ies)\b(?=[^.]{0,40}"
                       r"\b(?:cublas|cudnn|rocblas|miopen|hipblas))",
                       r"(?:use|using|call\w*)\s+(?:\w+'s\s+)?(?:rocwmma|rocblas|hipblaslt|cublas\w*|cudnn)\b"),
    "batchnorm_folding": (r"fold\w* (?:the )?batch ?norm",),
    "launch_bounds": (r"__launch_bounds__", r"launch bounds",
                      r"launch[ _]bound\b"),
    "tf32_tensor_cores": (r"\btf32\b", r"tensorfloat"),
    "cuda_graph": (r"cuda graphs?", r"graph capture", r"hipgraph"),
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
                              r"\w+\.sync\(\)"),
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
OTHER_SENSES: dict[str, re.Pattern[str]] = {node_id: re.compile(pattern, re.I) for node_id, pattern in {
    "software_pipelining": r"pipeline[- ]parallel|pipeline bubbles?|\bpipeline (?:and scheduler )?class|specific pipeline|"
                           r"pipeline polic|"
                           # a hardware unit's pipeline ("ALU pipeline stalls", "the FMA pipe"), not one of loads
                           r"\b(?:alu|fma|fp(?:16|32|64)|int(?:8|32)?|mio|lsu|math|arithmetic|execution|instruction)s? pipe(?:line)?s?\b|"
                           # learned-16: unified memory's pages prefetched to the device ("tries to prefetch
                           # allocations that are used in kernels"), not loads staged ahead of compute
                           r"prefetch\w* (?:\w+ )?allocations?|page (?:fault|migrat)\w*|unified (?:shared )?memory|managed memory",
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
}.items()}

# node id -> (an alias word with a common everyday sense, the words that must share its sentence for the node's sense).
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
