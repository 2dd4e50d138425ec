"""learned-23's cross-vendor vocabulary (ingest/lexicon.py: SHARED_MEMORY, BLOCKS, WARPS, MULTIPROCESSORS, THREAD,
MATRIX_UNITS and the aliases built from them): the base's nodes named in HIP/ROCm, SYCL/oneAPI, OpenCL, Vulkan/GLSL/WGSL,
Metal, HLSL and the Julia packages' own words, and the words that mean something else in CUDA left alone
(eval/ingest/runs/vocabulary-session48.md). The sentences are written for the test, not taken from a labelled document."""

from __future__ import annotations

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.claims import Claim, EntityRef, Span
from kskill.ingest.lexicon import Lexicon
from kskill.ingest.unstated import why_unstated


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    payload = read_builtin().payload
    return Lexicon([{"id": n.id, "kind": n.label, "name": n.name}
                    for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")])


def _ids(lexicon: Lexicon, text: str) -> set[str]:
    return {m.id for m in lexicon.mentions(text)}


@pytest.mark.parametrize("text, node", [
    # shared memory: AMD's LDS, SYCL's shared local memory, Metal's threadgroup memory, Taichi's block local storage
    ("Stage the tiles into LDS before the inner loop.", "shared_memory_tiling"),
    ("Tiles of A and B are loaded into shared local memory by each work-group.", "shared_memory_tiling"),
    ("Use threadgroup memory to cache the tile every thread reads.", "shared_memory_tiling"),
    ("Threads of a block share block local storage.", "shared_memory_tiling"),
    ("Padding the LDS row by one dword avoids the conflict.", "bank_conflict_padding"),
    # OpenCL's local memory, in a sentence that speaks OpenCL
    ("Each work-group copies its tile into local memory and waits at a barrier.", "shared_memory_tiling"),
    # the warp: wavefronts, subgroups, SIMD-groups, and their exchanges and reductions
    ("Wavefront divergence serializes both sides of the branch.", "warp_divergence"),
    ("Reduce with subgroupAdd before one atomic per workgroup.", "warp_shuffle_reduction"),
    ("simd_sum adds the values of every thread in the SIMD-group.", "warp_shuffle_reduction"),
    ("Call WaveActiveSum to combine the lanes.", "warp_shuffle_reduction"),
    ("Reduce across each subgroup first, then across the work-group.", "warp_shuffle_reduction"),
    ("The kernel can launch only one wavefront per SIMD.", "occupancy_limited"),
    ("More active wavefronts per CU hide the memory latency.", "increase_occupancy"),
    # blocks, multiprocessors and threads under their other names
    ("Too few work-groups leave most compute units idle.", "low_parallelism"),
    ("Split the summation across work-groups to expose more parallelism.", "split_k"),
    ("Each work-item processes multiple elements to amortize the index arithmetic.", "thread_coarsening"),
    ("Tuning the work-group size gave 10% on Arc.", "autotune_launch"),
    # the matrix units
    ("Use the XMX engines for the matrix multiply.", "tensor_core_unused"),
    # registers, launches, timing and fast math
    ("The kernel's VGPR usage limits its occupancy.", "register_pressure"),
    ("Spilling to scratch costs a global memory round trip.", "register_pressure"),
    ("Small kernels pay the dispatch overhead of every vkCmdDispatch.", "launch_overhead"),
    ("The amdgpu_flat_work_group_size attribute tells the compiler the largest workgroup.", "launch_bounds"),
    ("Record timestamp queries around the dispatch to time it on the GPU.", "measure_device_events"),
    ("Build with -cl-fast-relaxed-math or call native_exp.", "fast_math_intrinsics"),
    ("Wrap the loop in @fastmath.", "fast_math_intrinsics"),
    ("Compile the shader with math_mode fast to allow approximate exp.", "fast_math_intrinsics"),
    ("Setting waves_per_eu to 2 lets the compiler use more VGPRs.", "launch_bounds"),
    ("Call block_until_ready() before you stop the timer.", "measure_device_events"),
    ("Launch a number of workgroups that is a multiple of the number of CUs.", "sm_count_grid"),
    ("The grid should be a multiple of the number of CUs.", "sm_count_grid"),
    ("A branch sets the execution mask so inactive lanes skip the instruction.", "warp_divergence"),
    ("Heavy register use leads to poor shader occupancy.", "occupancy_limited"),
])
def test_learned23_a_node_named_in_another_programming_models_words(lexicon, text, node):
    assert node in _ids(lexicon, text)


@pytest.mark.parametrize("text, node", [
    # CUDA's local memory is a thread's spill space: without OpenCL's or SYCL's words it is no shared memory
    ("Each thread keeps its tile in local memory when the registers run out.", "shared_memory_tiling"),
    ("Padding local memory arrays does not help spills.", "bank_conflict_padding"),
    # a grid's waves of blocks are no warps
    ("The grid runs in few waves, so its tail is short.", "occupancy_limited"),
    # shared memory described, not used for tiles
    ("Shared memory provides fast, block-local storage.", "shared_memory_tiling"),
    # AMD's DPP named in a hazard rule, no reduction
    ("DPP operands must be separated from the instruction that writes them.", "warp_shuffle_reduction"),
    # the execution mask named without a branch, a multiple of the SM count that is no grid's
    ("Vector memory instructions also honour the EXEC mask.", "warp_divergence"),
    ("Peak FLOPs are a fixed multiple of the SM count.", "sm_count_grid"),
    # the runtime's stream synchronize, seen in a profile as a stall
    ("Look for long cudaStreamSynchronize slices in the trace.", "measure_device_events"),
])
def test_learned23_an_ambiguous_term_without_its_models_context_names_nothing(lexicon, text, node):
    assert node not in _ids(lexicon, text)


def test_learned23_a_wait_before_a_memory_profile_is_no_device_timing(lexicon):
    """lexicon.OTHER_SENSES: JAX's block_until_ready before a device memory profile measures memory, not time."""
    claim = Claim(EntityRef("ProtocolStep", "measure_device_events"), "SUPPORTS", None, 0.7, Span("", ""), "rules")
    profile = "Call block_until_ready() so the function completes before the device memory profile is taken."
    assert why_unstated(claim, profile, lexicon.mentions(profile)) == "another sense of the node's name"
    timing = "Call block_until_ready() so the function completes before you stop the timer."
    assert why_unstated(claim, timing, lexicon.mentions(timing)) == ""
