"""Sentences that name a node without stating a claim about it (ingest/unstated.py): each judged error class."""

from __future__ import annotations

import pytest

from kskill.graph_schema.model import Condition
from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.claims import Claim, EntityRef, Span
from kskill.ingest.lexicon import Lexicon
from kskill.ingest.unstated import is_code, why_unstated


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    payload = read_builtin().payload
    return Lexicon([{"id": n.id, "kind": n.label, "name": n.name} for (label, _), n in payload.nodes.items()
                    if label in ("Bottleneck", "Technique", "ProtocolStep")])


def evidence(node: str, kind: str = "Technique") -> Claim:
    return Claim(EntityRef(kind, node), "SUPPORTS", None, 0.7, Span("", ""), "rules")


def remedy(bottleneck: str, technique: str) -> Claim:
    return Claim(EntityRef("Bottleneck", bottleneck), "ADDRESSED_BY", EntityRef("Technique", technique), 0.7,
                 Span("", ""), "rules", kind="remedy")


def reason(lexicon: Lexicon, claim: Claim, text: str, **context) -> str:
    return why_unstated(claim, text, lexicon.mentions(text), **context)


def test_a_sentence_that_states_the_claim_passes(lexicon):
    text = "Software pipelining is critical to hide the latency of global memory loads."
    assert reason(lexicon, evidence("software_pipelining"), text) == ""
    assert reason(lexicon, remedy("memory_latency", "software_pipelining"), text) == ""


@pytest.mark.parametrize("text, why", [
    ("For a deeper dive into Flash Attention, we recommend reading the original paper.", "points elsewhere"),
    ("If auto-tuning does not meet your requirements, consider mi300x-triton-kernel-performance-optimization .",
     "points elsewhere"),
    ("constant float4 *A_ptr = reinterpret_cast<constant float4 *>(A + m * lda);", "code"),
    ("- CUTLASS_LIBRARY_HEURISTICS_TESTLIST_FILE : Path to the CSV used for autotuning.", "configuration field"),
    ("These optimizations include loop unrolling, memory access optimizations, constant folding, CSE, etc.",
     "named in passing, in a series"),
    ("TileLang performs comparable to or better than vendor libraries and Triton.", "named in passing, in a series"),
    ("Agenda ❖ Composable Kernel ❖ Kernel customization ❖ ROCm Flash-Attention ❖ Q&A",
     "named in passing, in a list of bullets"),
    ("- Software-pipelining ( T.Pipelined ) is fully supported by the rewriter.", "a note on what is supported"),
])
def test_sentences_that_name_a_technique_without_stating_anything(lexicon, text, why):
    named = {m.id for m in lexicon.mentions(text)}
    node = next(n for n in ("flash_attention", "autotune_launch", "vectorized_access", "loop_unrolling",
                            "vendor_library", "software_pipelining") if n in named)
    assert reason(lexicon, evidence(node), text) == why


def test_a_figure_of_merit_is_no_evidence_for_a_bottleneck(lexicon):
    merit = "An H800 GPU has a peak memory bandwidth of 3.35 TB/s and peak FLOPs of 990 TFlops."
    result = "These optimizations achieve 3 TB/s memory bandwidth on an H800 SXM5 GPU."
    stated = "The kernel is memory-bound: its runtime is limited by the rate at which data moves."
    assert reason(lexicon, evidence("memory_bandwidth", "Bottleneck"), merit) == "a figure of merit"
    assert reason(lexicon, evidence("memory_bandwidth", "Bottleneck"), result) == "a measured result"
    assert reason(lexicon, evidence("memory_bandwidth", "Bottleneck"), stated) == ""


def test_another_sense_of_a_name_rules_it_out(lexicon):
    text = "The forward and backward pass are split into multiple pipeline stages."
    assert reason(lexicon, evidence("software_pipelining"), text, heading="Pipeline parallelism") == \
        "another sense of the node's name"


def test_a_remedy_needs_its_technique_named_and_meant_as_the_means(lexicon):
    unnamed = "These memory-bound operations only account for 0.02% of the total FLOPs."
    goal = "Increase occupancy by reducing register pressure"
    condition = "When CUDA graph is enabled, launches of small kernels cost less."
    assert reason(lexicon, remedy("memory_bandwidth", "flash_attention"), unnamed) == \
        "the remedy's technique is not named"
    assert reason(lexicon, remedy("memory_bandwidth", "flash_attention"), unnamed,
                  headed=frozenset({"flash_attention"})) == "the heading's technique, and the sentence says nothing of a remedy"
    assert reason(lexicon, remedy("register_pressure", "increase_occupancy"), goal) == \
        "the bottleneck's reduction is the means"
    assert reason(lexicon, remedy("launch_overhead", "cuda_graph"), condition) == "the technique is a condition"


def test_a_problem_stated_in_a_techniques_section_is_its_remedy(lexicon):
    problem = "This under-utilizes each SM because each program does very little work."
    cost = "Larger factors increase register pressure in long loop bodies."
    figure = "In this case, the occupancy is limited to 2 waves per EU."
    headed = frozenset({"block_row_mode"})
    assert reason(lexicon, remedy("low_parallelism", "block_row_mode"), problem, headed=headed) == ""
    assert reason(lexicon, remedy("low_parallelism", "block_row_mode"), problem) == "the remedy's technique is not named"
    assert reason(lexicon, remedy("register_pressure", "loop_unrolling"), cost, headed=frozenset({"loop_unrolling"})) == \
        "the heading's technique, and the sentence says nothing of a remedy"
    assert reason(lexicon, remedy("occupancy_limited", "autotune_launch"), figure,
                  headed=frozenset({"autotune_launch"})) == "the heading's technique, and the sentence says nothing of a remedy"


def test_a_build_instruction_states_no_precondition(lexicon):
    claim = Claim(EntityRef("Technique", "flash_attention"), "REQUIRES", Condition.of("has_attention", "is_true"), 0.65,
                  Span("", ""), "rules", kind="precondition")
    text = "Instead, we need to clone the flash-attention repo and build it from source."
    assert reason(lexicon, claim, text) == "a build instruction"


def test_proposals_that_name_no_one_new_thing():
    def proposal(name: str, kind: str = "Technique") -> Claim:
        return Claim(EntityRef(kind, "", name), "SUPPORTS", None, 0.6, Span("", ""), "rules")

    assert why_unstated(proposal("same.overlapfraction"), "", []) == "a proposal named like an identifier"
    assert why_unstated(proposal("Multicast and SM-to-SM Copy"), "", []) == "a proposal naming two things"
    assert why_unstated(proposal("Quantization-Aware Training"), "", []) == "a training method, not a kernel technique"
    assert why_unstated(proposal("Manually spill to LDS", "Bottleneck"), "", []) == "a remedy proposed as a bottleneck"
    assert why_unstated(proposal("Pingpong scheduling"), "", []) == ""


def test_inline_formulas_are_prose_and_statements_of_code_are_code():
    assert not is_code("When $h_q s_q \\ge 128$, the kernel is compute-bound; otherwise, it's memory-bound.")
    assert is_code("B_BASE += BLOCK_SIZE_K * stride_bk")


def test_evidence_for_a_protocol_step_needs_something_measured(lexicon):
    step = evidence("measure_interleaved", "ProtocolStep")
    barriers = "TmaAsync interleaving is limited to a single-CTA pipeline."
    timing = "Interleave the reference and candidate runs, so that clock drift affects both timings alike."
    assert reason(lexicon, step, barriers, heading="Pipelines > Interleaved barriers") == \
        "no measurement in the sentence or its section"
    assert reason(lexicon, step, timing) == ""
    assert reason(lexicon, step, barriers, heading="Benchmarking methodology") == ""  # the section measures


def test_a_pointer_in_a_bracketed_aside_leaves_the_claim_standing(lexicon):
    """learned-11: the aside points elsewhere, the sentence itself still tells how to measure."""
    text = ("To measure the average kernel execution time, we use CUDA events around the launch "
            "(see the accompanying benchmark.cpp for full details).")
    assert reason(lexicon, evidence("measure_device_events", "ProtocolStep"), text) == ""
    pointer = "To measure the average kernel execution time, see the accompanying benchmark.cpp for full details."
    assert reason(lexicon, evidence("measure_device_events", "ProtocolStep"), pointer) == "points elsewhere"


@pytest.mark.parametrize("text, why", [
    ("For finer-grained measurements more akin to unit tests, see Executable Benchmarks .", "points elsewhere"),
    ("Autotuning picks the tile sizes for each shape; cf. the tuning guide.", "points elsewhere"),
    ("Learn more about optimizing kernels with TunableOp in Optimizing Triton kernels .", "points elsewhere"),
    ("This is an example of a GPU-accelerated matrix vector multiplication kernel written in OpenCL.",
     "what an example or a sample is"),
    ("Demonstrate the use of CUDA Graph conditional nodes available starting in CUDA 12.4.",
     "what an example or a sample is"),
    ("- SM100 persistent kernel scheduling via CLC is not available on SM120", "named as what is not used or not available"),
    ("Alternatively, if not autotuning, a config file may be used to set a single triton config.",
     "named as what is not used or not available"),
    ("nvfp4_gemv | Decode (M=1) NVFP4 GEMV weight shapes | NVFP4 dequant reference", "named in a table cell past the row's subject"),
])
def test_learned12_mentions_that_state_nothing(lexicon, text, why):
    """learned-12: a cross-reference, what an example is, a node named as absent, a table cell past the row's subject."""
    node = lexicon.mentions(text)[0]
    assert reason(lexicon, evidence(node.id, node.kind), text) == why


@pytest.mark.parametrize("text", [
    "As we see in the profile, software pipelining hides the latency of global memory loads.",
    "Software pipelining is not free: it raises register pressure.",
    "Loop unrolling | Fewer branches per element | Unroll the inner loop by four",
    "This kernel uses software pipelining to hide the latency of global memory loads.",
])
def test_learned12_statements_about_the_node_stand(lexicon, text):
    """learned-12: "as we see" observes, a technique whose cost is named is still its subject, the row's first cell is
    what the row is about, and "this kernel" is no example's description."""
    node = next(m for m in lexicon.mentions(text) if m.kind == "Technique")
    assert reason(lexicon, evidence(node.id), text) == ""


def test_a_table_rows_remedy_takes_its_technique_from_the_first_cell(lexicon):
    row = "Register blocking | Reduce memory traffic with register accumulation | Loop unrolling with register variables"
    assert reason(lexicon, remedy("excess_dram_traffic", "register_blocking"), row) == ""
    assert reason(lexicon, remedy("excess_dram_traffic", "loop_unrolling"), row) == \
        "named in a table cell past the row's subject"


def test_intrinsics_name_fast_math_only_beside_math(lexicon):
    """learned-12: a timer's or a matrix unit's intrinsics are no fast math intrinsics."""
    named = lambda text: {m.id for m in lexicon.mentions(text)}  # noqa: E731
    assert "fast_math_intrinsics" not in named("The methods are thin wrappers around the T.cuda.timer_* intrinsics.")
    assert "fast_math_intrinsics" not in named("These functions produce the addresses required by the low-level intrinsics.")
    assert "fast_math_intrinsics" in named("Use intrinsics such as __expf for faster exponentials at lower precision.")


def test_a_category_or_a_tool_is_no_proposed_technique():
    """learned-12: "two timing methods" names a group the text lists, "SHARK Tuner" the tool that applies a method."""
    def proposal(name: str, kind: str = "Technique") -> Claim:
        return Claim(EntityRef(kind, "", name), "SUPPORTS", None, 0.6, Span("", ""), "rules")

    assert why_unstated(proposal("Timing Methods", "ProtocolStep"), "", []) == "a category of things, not one"
    assert why_unstated(proposal("Scheduling Shapes"), "", []) == "a category of things, not one"
    assert why_unstated(proposal("SHARK Tuner"), "", []) == "a tool named as a technique"
    assert why_unstated(proposal("xFormers"), "", []) == "a tool named as a technique"
    assert why_unstated(proposal("SageAttention"), "", []) == ""  # a method named by its authors
    assert why_unstated(proposal("Stream-K scheduling"), "", []) == ""
    assert why_unstated(proposal("tile scheduler"), "", []) == ""


def test_a_step_met_by_meaning_needs_a_measuring_rule(lexicon):
    """learned-12: a sentence naming no step gets its passage's nearest one by meaning only when it tells how to
    measure (advice, an imperative); a report of what a test or a tool measures tells nothing of it."""
    step = evidence("measure_device_events", "ProtocolStep")
    report = "In this test, the benchmark measures the average latency of the collective across four processes."
    assert reason(lexicon, step, report) == "a step by meaning, and the sentence tells no measuring rule"
    assert reason(lexicon, step, "GPU and CPU times are reported for every benchmark iteration.") == \
        "a step by meaning, and the sentence tells no measuring rule"
    assert reason(lexicon, step, "Run multiple timed iterations for statistical significance:") == ""
    assert reason(lexicon, step, "You should read the timer only after the kernel has finished.") == ""
    # a step the sentence names is read as before
    assert reason(lexicon, step, "The benchmark records CUDA events around each timed launch.") == ""


def test_an_example_that_says_how_it_works_is_evidence(lexicon):
    text = ("An example that uses an optimized mainloop for Ampere that explicitly pipelines shared memory using "
            "asynchronous reads from global memory.")
    assert reason(lexicon, evidence("software_pipelining"), text) == ""


def test_a_node_named_by_likeness_states_nothing(lexicon):
    """learned-12: the other side of an analogy is no evidence and no remedy."""
    spirit = "It is an efficient hardware-aware design and implementation in the spirit of FlashAttention ."
    assert reason(lexicon, evidence("flash_attention"), spirit) == "named as the other side of an analogy"
    just_as = ("Just as global memory coalescing affects DRAM bandwidth utilization, bank conflicts affect shared "
               "memory throughput.")
    assert reason(lexicon, remedy("shared_memory_bank_conflicts", "memory_coalescing"), just_as) == \
        "named as the other side of an analogy"
    assert reason(lexicon, evidence("flash_attention"),
                  "FlashAttention tiles the attention computation to avoid writing the score matrix.") == ""


def test_learned13_a_way_to_measure_offered_to_the_reader_or_the_authors_own_is_a_rule(lexicon):
    """learned-13: a step met by meaning stands when the sentence offers the reader a way to measure or tells the
    authors' own way of timing (heldout15, judged right); a report of what a tool measures, or "if you interrupt ...",
    still tells no measuring rule."""
    step = evidence("measure_device_events", "ProtocolStep")
    unstated = "a step by meaning, and the sentence tells no measuring rule"
    assert reason(lexicon, step, "You may also directly invoke a CUPTI timer with method=cupti .") == ""
    assert reason(lexicon, step, "We have (and continue to) implement various approaches to conduct kernel timing to "
                                 "understand the tradeoffs.") == ""
    assert reason(lexicon, step, "If you interrupt the timing script and then launch it again, only missing variants "
                                 "will be run.") == unstated
    assert reason(lexicon, step, "In this tutorial, we implemented a simple GEMV kernel and reported its time.") == \
        unstated


def test_learned14_a_measuring_instruction_says_nothing_of_the_kernels_it_measures(lexicon):
    """learned-14: the bottleneck or technique a measuring instruction names is what gets measured; the sentence is
    advice on measuring, no evidence for them. A sentence that opens with the same verb and measures nothing passes."""
    why = "an instruction on how to measure, not a statement about the node"
    flush = ("Flush the L2 cache before each timed iteration so that memory-bound kernels read from DRAM, as kernel "
             "fusion would otherwise look better.")
    assert reason(lexicon, evidence("memory_bandwidth", "Bottleneck"), flush) == why
    assert reason(lexicon, evidence("kernel_fusion"), flush) == why
    assert reason(lexicon, evidence("excess_dram_traffic", "Bottleneck"),
                  "Profile your kernel: Use tools like Nsight Compute to measure actual FLOPs and memory traffic") == why
    assert reason(lexicon, evidence("kernel_fusion"),
                  "Use kernel fusion to keep intermediates in registers instead of DRAM.") == ""


def test_learned15_a_remedy_whose_two_sides_are_items_of_one_series_is_unstated(lexicon):
    """learned-15: a bottleneck and a technique listed side by side state no remedy; a sentence that says the one
    avoids the other still does."""
    listed = ("It does not measure latency, occupancy, instruction issue, cache behavior, memory coalescing, bank "
              "conflicts, or pipeline overlap.")
    assert reason(lexicon, remedy("shared_memory_bank_conflicts", "memory_coalescing"), listed) == \
        "both named in passing, in one series"
    assert reason(lexicon, remedy("shared_memory_bank_conflicts", "bank_conflict_padding"),
                  "To avoid shared memory bank conflicts, pad the shared tile by one column.") == ""


def test_learned16_what_is_planned_is_unstated_and_what_is_done_is_not(lexicon):
    """learned-16: future work and what a team will investigate state nothing yet; the same technique described as
    done still may."""
    planned = "planned or future work, not stated as done"
    assert reason(lexicon, evidence("split_k"), "For future work, SplitK work decomposition for the matrix "
                  "multiplication is a potential speed up we'll investigate.") == planned
    assert reason(lexicon, evidence("split_k"), "We plan to explore split-K for skinny GEMMs.") == planned
    assert reason(lexicon, evidence("split_k"), "We applied a SplitK work decomposition for skinny matrices, which "
                  "gave a 1.9x speedup.") == ""


@pytest.mark.parametrize("node, kind, text", [
    ("persistent_kernel", "Technique",
     "For future application runs, this initial overhead is reduced as it leverages an on-disk persistent kernel cache."),
    ("software_pipelining", "Technique", "AdaptiveCpp by default tries to prefetch allocations that are used in kernels."),
    ("memory_latency", "Bottleneck",
     "In latency-bound scenarios however, enqueuing these additional operations may result in undesired overheads."),
    ("bank_conflict_padding", "Technique",
     "Although it is possible to pad shared memory with zeros to match the required padding, this is not correct yet."),
])
def test_learned16_more_senses_of_a_node_name_are_not_evidence(lexicon, node, kind, text):
    """learned-16: a persistent kernel cache, unified memory's prefetching, latency-bound serving and zero padding
    are other senses of the nodes' names."""
    assert reason(lexicon, evidence(node, kind), text) == "another sense of the node's name"



def test_learned17_how_to_extend_a_tool_is_no_evidence(lexicon):
    """learned-17: how to add a fused kernel to a tool says nothing of fusion; fusion described still stands."""
    assert reason(lexicon, evidence("kernel_fusion"),
                  "To add a new operator or a new fused kernel into the library, most of the time one only needs to "
                  "add two Python files.") == "how to extend a tool, not what the technique does"
    assert reason(lexicon, evidence("kernel_fusion"),
                  "Kernel fusion keeps the intermediate in registers, so it is never written to DRAM.") == ""


def test_learned18_work_in_progress_the_problem_of_a_technique_and_a_list_of_examples(lexicon):
    """learned-18: improvements "still under progress" are planned; "the problem of low tensor core utilization of
    Flash Attention" is the technique's own problem; an item under "Example scenarios:" names an example, no remedy."""
    assert reason(lexicon, remedy("launch_overhead", "autotune_launch"),
                  "Several performance improvements are still under progress, including reducing the host-side "
                  "overhead and tuning tile sizes.") == "planned or future work, not stated as done"
    text = ("It mainly refers to Flash Attention, which can solve the problem of low tensor core utilization of Flash "
            "Attention in the decoding stage.")
    assert reason(lexicon, remedy("tensor_core_unused", "flash_attention"), text) == "the bottleneck is the technique's own"
    assert reason(lexicon, remedy("tensor_core_unused", "flash_attention"),
                  "Flash Attention solves the low tensor core utilization of small batches.") == ""
    stencil = "- Stencil computations with shared memory caching"
    assert reason(lexicon, remedy("compute_limited", "shared_memory_tiling"), stencil,
                  heading="Compute-intensive kernels > Example scenarios:") == "an item of a list of examples, not a remedy"
    assert reason(lexicon, remedy("compute_limited", "shared_memory_tiling"), stencil,
                  heading="Compute-intensive kernels > What to do:") == ""


@pytest.mark.parametrize("text", ["We need a bind group to pass the texture and histogram buffer to our pipeline.",
                                  "The compute pipeline holds the shader module and reads its buffers in stages."])
def test_learned28_a_graphics_apis_pipeline_object_is_no_software_pipelining(lexicon, text):
    """learned-28: WebGPU's, Vulkan's and Metal's pipeline objects, set up with bind groups and layouts (heldout30)."""
    assert reason(lexicon, evidence("software_pipelining", "Technique"), text) == "another sense of the node's name"


def test_learned28_a_cited_title_states_nothing(lexicon):
    """A paper's title in a README's list of publications (heldout30), not the same words said as a claim."""
    cited = '"Performance engineering for real and complex tall & skinny matrix multiplication kernels on GPUs"'
    assert reason(lexicon, evidence("skinny_gemm", "Bottleneck"), cited) == "a cited title"
    said = "Tall and skinny matrix multiplication kernels on GPUs are limited by memory bandwidth."
    assert reason(lexicon, evidence("skinny_gemm", "Bottleneck"), said) != "a cited title"
