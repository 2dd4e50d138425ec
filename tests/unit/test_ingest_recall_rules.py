"""Rules of learned-7 that read more from a document without reading names in another sense: the word "pipeline" in
its everyday sense, a technique only a title names until a sentence says what it gains, a speedup
in a technique's section, a measurement in a benchmark's method (eval/ingest/runs/recall-rules-session35.md)."""

from __future__ import annotations

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.lexicon import Lexicon


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    payload = read_builtin().payload
    return Lexicon([{"id": n.id, "kind": n.label, "name": n.name}
                    for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")])


def _ids(lexicon: Lexicon, text: str) -> set[str]:
    return {m.id for m in lexicon.mentions(text)}


@pytest.mark.parametrize("text", ["Calling the compiled pipeline on a new image size triggers a recompilation.",
                                  "Each tool sits at a different level of this lowering pipeline."])
def test_a_pipeline_as_a_workflow_is_no_software_pipelining(lexicon, text):
    assert "software_pipelining" not in _ids(lexicon, text)


@pytest.mark.parametrize("text", ["The pipeline releases the buffer as soon as the consumer is done with it.",
                                  "A pipeline with a depth of 3 hides the load latency.",
                                  "Software pipelining hides the memory latency."])
def test_a_pipeline_of_stages_buffers_or_loads_is_software_pipelining(lexicon, text):
    assert "software_pipelining" in _ids(lexicon, text)


def test_overlapping_compute_with_transfers_is_software_pipelining_in_either_order(lexicon):
    assert "software_pipelining" in _ids(lexicon, "By overlapping computation and data transfer, it is faster.")


def _proposed(proposals, tmp_path, text: str) -> dict[str, list]:
    """The proposals' names, each with its claims as (relation, gain)."""
    from kskill.ingest.loaders import load_document
    from kskill.ingest.passages import passages

    path = tmp_path / "doc.md"
    path.write_text(text)
    doc = load_document(path)
    out: dict[str, list] = {}
    for claim in proposals.claims(doc, passages(doc)):
        out.setdefault(claim.subject.name, []).append((claim.relation, claim.gain))
    return out


TITLED = """# {title}

{opening}

## Results

In our runs on eight GPUs, {name} is 2.5x faster than the baseline for the largest model.
"""


def test_a_title_whose_sentence_says_what_it_gains_names_a_technique_with_its_speedups(proposals, tmp_path):
    found = _proposed(proposals, tmp_path, TITLED.format(
        title="Regional Compilation Benchmark", name="regional compilation",
        opening="Regional compilation significantly reduces the time taken to compile large models."))
    assert found["Regional Compilation"] == [("SUPPORTS", None), ("GAIN", 2.5)]


def test_a_format_used_in_training_is_the_technique(proposals, tmp_path):
    found = _proposed(proposals, tmp_path, TITLED.format(
        title="Float8 Training on H100s", name="float8",
        opening="Float8 training can provide substantial training speedups when the GEMMs are large."))
    assert "Float8" in found


@pytest.mark.parametrize("title, opening", [
    # a title its sentences name without a benefit
    ("Regional Compilation", "Regional compilation is applied to each block of the model in turn."),
    # a benefit of something else
    ("Regional Compilation", "We use regional compilation, and the new allocator reduces memory use."),
    # a product, written with capitals
    ("Turbo Kernel", "Turbo Kernel can increase throughput by more than 20 percent."),
    # a setting
    ("Communication flags", "Communication flags could improve the speed of all-reduce on one host."),
])
def test_a_title_without_a_stated_benefit_of_its_own_is_no_technique(proposals, tmp_path, title, opening):
    assert title not in _proposed(proposals, tmp_path, f"# {title}\n\n{opening}\n")



@pytest.fixture(scope="module")
def rules():
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
    from kskill.ingest.linking import EntityLinker

    payload = read_builtin().payload
    nodes = [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
             for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]
    return RuleExtractor(EntityLinker(nodes, [], None), RuleSettings(learned=False))


def _claims(rules, tmp_path, text: str):
    from kskill.ingest.loaders import load_document

    path = tmp_path / "doc.md"
    path.write_text(text)
    return rules.extract(load_document(path))


def test_a_speedup_stated_in_a_techniques_section_is_that_techniques_gain(rules, tmp_path):
    claims = _claims(rules, tmp_path, "# Kernel fusion\n\nIn our training runs this was 1.5x faster than before.\n")
    assert [(c.subject.id, c.gain) for c in claims if c.relation == "GAIN"] == [("kernel_fusion", 1.5)]


def test_speedups_written_as_percentages_and_verbs():
    from kskill.ingest.relations import gain_of

    assert gain_of("Simply enabling tuning gave us a 22.9% speedup!") == 1.229  # not 9 % read from "22.9%"
    assert gain_of("With tuning we reached a 22% increase in throughput.") == 1.22
    assert gain_of("A custom kernel speeds up generation 1.43x on an H100.") == 1.43


def test_a_measurement_named_in_a_benchmarks_method_is_a_protocol_step(proposals, tmp_path):
    found = _proposed(proposals, tmp_path, "# Benchmarks\n\n## Methodology\n\n"
                      "- **Request-Based Measurement**: we send a fixed number of requests and measure the time the "
                      "server takes to complete all of them.\n")
    assert "Request-Based Measurement" in found


def test_launch_bound_is_launch_overhead_as_memory_bound_is_bandwidth(lexicon):
    assert "launch_overhead" in _ids(lexicon, "When you are launch-bound, CUDA graphs replay one launch sequence.")
    assert "launch_overhead" not in _ids(lexicon, "We used a launch bound of 256 threads for all kernels.")


@pytest.mark.parametrize("text", ["LLM decoding is usually memory bound (and not compute bound), so guessing tokens pays.",
                                  "This helps when you are launch-bound rather than compute-bound."])
def test_a_bottleneck_named_as_the_contrast_gets_no_evidence(lexicon, text):
    from kskill.ingest.claims import Claim, EntityRef, Span
    from kskill.ingest.unstated import why_unstated

    def evidence(node: str) -> Claim:
        return Claim(EntityRef("Bottleneck", node), "SUPPORTS", None, 0.7, Span(text, "offset 0"), "rules")

    named = lexicon.mentions(text)
    assert why_unstated(evidence("compute_limited"), text, named) == "a bottleneck named as the contrast"
    assert why_unstated(evidence(named[0].id), text, named) == ""


def test_a_speedup_a_section_title_states_is_the_gain_of_the_technique_above_it(rules, tmp_path):
    claims = _claims(rules, tmp_path, "# Flash attention\n\nFlash attention computes attention in tiles.\n\n"
                                      "## Changelog\n\n### 2.0: Complete rewrite, 2x faster\n\nThe kernels were rewritten.\n")
    assert ("flash_attention", 2.0) in [(c.subject.id, c.gain) for c in claims if c.relation == "GAIN"]


def test_a_speedup_the_documents_new_technique_claims_is_not_also_its_means(rules, tmp_path):
    claims = _claims(rules, tmp_path, "# MXFP8 Training\n\nMXFP8 training can provide substantial training speedups.\n\n"
                                      "MXFP8 GEMMs are accelerated using cuBLAS kernels, achieving up to 2x speedup over "
                                      "bfloat16.\n")
    gains = [(c.subject.id or c.subject.name, c.gain) for c in claims if c.relation == "GAIN"]
    assert gains == [("MXFP8", 2.0)]


@pytest.mark.parametrize("text, node", [
    ("For many common operations, XLA:GPU uses fast-performance libraries from NVIDIA, such as cuBLAS, cuDNN, and NCCL.",
     "vendor_library"),
    ("The overheads of Python/PyTorch can nonetheless be extensive if the batch size is small.", "launch_overhead"),
    ("Exhaustive tuning can be executed similarly to incremental tuning by ignoring the system DB.", "autotune_launch")])
def test_learned15_nodes_said_in_other_words(lexicon, text, node):
    assert node in _ids(lexicon, text)


@pytest.mark.parametrize("text, node", [
    ("We ship optimized libraries for image decoding.", "vendor_library"),
    ("Manual tuning of the flags took a week.", "autotune_launch")])
def test_learned15_the_same_words_without_their_sense_name_nothing(lexicon, text, node):
    assert node not in _ids(lexicon, text)



def test_learned17_a_number_format_s_short_name_is_proposed(proposals, tmp_path):
    """learned-17: "gf4" (three letters) names a format; the words of the sentence after it do not."""
    found = _proposed(proposals, tmp_path, "# Formats\n\nUsing gf4 currently carries a ~5% perplexity penalty but "
                      "increases inference speed by ~75% and halves the model size.\n")
    assert "gf4" in found and not any("currently" in name for name in found)


@pytest.mark.parametrize("text, node", [
    ("- Level 04: Use tensor cores (WMMA)", "tensor_core_unused"),
    ("All the FP32 GEMM kernels cannot utilize the NVIDIA Tensor Cores.", "tensor_core_unused"),
    ("It solves the problem of low tensor core utilization in the decoding stage.", "tensor_core_unused"),
    ("All parameters for D=64 and D=128 are pre-tuned on MI250X and hard coded.", "autotune_launch"),
    ("Run the profiler to find the best kernel configuration for the given shape.", "autotune_launch"),
    ("For benchmarks it will be even more important to ignore the first few iterations.", "measure_warmup"),
    ("The first time you run the code, it will be slower because it is being compiled.", "measure_warmup"),
    ("It is best to fix GPU clock and memory clock.", "measure_clock_control"),
    ("Speedups differ across runs when GPU clocks are unlocked.", "measure_clock_control"),
    ("We fuse all the operations in MHA into a single kernel.", "kernel_fusion"),
    ("Per-op overhead is dominating; larger jitted regions give the compiler more to fuse.", "launch_overhead"),
    ("When the batch is small, kernel launching is the bottleneck.", "launch_overhead"),
    ("- Level 03: Use shared memory", "shared_memory_tiling"),
    ("- Data Reuse: using shared memory to reuse data of matrix A and B", "shared_memory_tiling")])
def test_learned18_nodes_said_in_other_words(lexicon, text, node):
    """learned-18: tensor cores put to use, tuning and warm-up said plainly, clocks fixed, one kernel for several
    operations, per-op overhead and shared memory used to reuse data name their nodes."""
    assert node in _ids(lexicon, text)


@pytest.mark.parametrize("text, node", [
    ("The H100 tensor cores deliver 989 TFLOPS.", "tensor_core_unused"),
    ("Thanks for help with utilizing TensorCores from within CUDA.", "tensor_core_unused"),
    ("Performance tuning of the whole application took a week.", "autotune_launch"),
    ("Types used in the same kernel must differ.", "kernel_fusion"),
    ("Items handled in a single kernel execution are counted.", "kernel_fusion"),
    ("The kernel doesn't use the shared memory at all.", "shared_memory_tiling"),
    ("A warm cache gives the same time.", "measure_warmup")])
def test_learned18_the_same_words_without_their_sense_name_nothing(lexicon, text, node):
    assert node not in _ids(lexicon, text)


@pytest.mark.parametrize("text, node", [
    ("6: Vectorized Mem Access | 18237.3 | 78.4%", "vectorized_access"),
    ("This enables 128-bit vector memory accesses which lead to efficient CUDA kernels.", "vectorized_access"),
    ("All loads use maximum vector length for peak efficiency.", "vectorized_access"),
    ("L2 Cache: using swizzle access mode to increase L2 cache hit ratio", "grouped_tile_rasterization"),
    ("Reorders the program IDs (PIDs) of the generated kernel for improved L2 cache behavior.",
     "grouped_tile_rasterization"),
    ("2D block tiling and 2D thread tiling", "register_blocking"),
    ("2D block tiling and 2D thread tiling", "shared_memory_tiling"),
    ("10: Warptiling | 21779.3 | 93.7%", "register_blocking"),
    ("CUTLASS requires tiles of data to be stored in registers for high-bandwidth access.", "register_blocking"),
    ("Split along the KV sequence length to occupy the GPU with enough work", "split_k"),
    ("Underfilled grids may instead split the K/V sequence and reduce partial outputs.", "split_k"),
    ("Distribute the work on enough blocks and threads to fill up the GPU.", "low_parallelism"),
    ("The performance can vary, sometimes up to 25%, from one measurement to another.", "measure_repetitions")])
def test_learned19_nodes_said_in_other_words(lexicon, text, node):
    """learned-19: the GEMM tutorials' names for vector access, tile orders and tiling levels, split-KV, filling the
    GPU and run-to-run variation name their nodes."""
    assert node in _ids(lexicon, text)


@pytest.mark.parametrize("text, node", [
    ("The shared memory layout is swizzled to avoid bank conflicts.", "grouped_tile_rasterization"),
    ("The KV cache is split into pages.", "split_k"),
    ("The CPU does not enqueue kernels fast enough to keep the GPU busy.", "low_parallelism")])
def test_learned19_the_same_words_without_their_sense_name_nothing(lexicon, text, node):
    assert node not in _ids(lexicon, text)


CATALOGUE = """# Writing kernels

## {title}

These are the common techniques used in our kernels.

- **Auxiliary Metadata:** Precompute control tables and keep them in fast scalar memory.
- **Online softmax:** Two-pass algorithm. Avoids materializing the full softmax vector.
- **Align data structures:** Pad every structure to 16 bytes so that loads stay aligned.
"""


def _read(proposals, tmp_path, text: str) -> set[tuple[str, str, str]]:
    """Each claim's subject (an existing node's id, or a proposal's kind and name), relation and quote."""
    from kskill.ingest.loaders import load_document
    from kskill.ingest.passages import passages

    path = tmp_path / "doc.md"
    path.write_text(text)
    doc = load_document(path)
    return {(c.subject.id or f"{c.subject.kind} {c.subject.name}", c.relation, c.evidence.quote)
            for c in proposals.claims(doc, passages(doc))}


def test_a_catalogues_labels_name_techniques_new_or_known(proposals, tmp_path):
    """learned-27: under a title that heads a catalogue, each list item's label names a technique the item defines:
    a proposal when the graph lacks it, evidence for the node when it has it; an imperative label is a step."""
    found = _read(proposals, tmp_path, CATALOGUE.format(title="Core design patterns"))
    assert ("Technique Auxiliary Metadata", "SUPPORTS",
            "- Auxiliary Metadata: Precompute control tables and keep them in fast scalar memory.") in found
    assert ("online_softmax", "SUPPORTS", "Avoids materializing the full softmax vector.") in found
    assert not any("Align" in subject for subject, _, _ in found)


def test_a_list_of_advice_is_no_catalogue(proposals, tmp_path):
    found = _read(proposals, tmp_path, CATALOGUE.format(title="Best Practices"))
    assert not any("Auxiliary Metadata" in subject for subject, _, _ in found)
    assert not any(subject == "online_softmax" for subject, _, _ in found)


def test_a_company_is_no_technique(proposals, tmp_path):
    """learned-27: "Apple also reduces ..." names no technique "Apple" (heldout29)."""
    found = _read(proposals, tmp_path, "# Apple GPUs\n\nApple also reduces the amount of threadgroup memory bandwidth, "
                                       "which improves power efficiency.\n")
    assert not any(subject.endswith(" Apple") for subject, _, _ in found)


@pytest.mark.parametrize("text", [
    # a title that opens with a gerund names an activity
    "# Fusion\n\n## Applying patterns\n\n- Operator grouping: the pass fuses each matched subgraph into one kernel.\n",
    # a label written as code is an argument's name
    "# Fusion\n\n## Key patterns\n\n- `grouping`: the pass fuses each matched subgraph into one kernel.\n",
    # an item that says nothing past its label
    "# Template\n\n## Key patterns\n\n- Operator grouping saved for backward: {grouping_note}\n",
])
def test_what_no_catalogue_label_names(proposals, tmp_path, text):
    assert not any("grouping" in subject.lower() for subject, _, _ in _read(proposals, tmp_path, text))


@pytest.mark.parametrize("title", ["Key patterns", "Scheduling patterns"])  # a technique's head noun opens the second
def test_a_catalogue_label_stated_as_a_definition_is_proposed(proposals, tmp_path, title):
    """The positive twin of the cases above: the same item under a catalogue's title, as prose."""
    found = _read(proposals, tmp_path, f"# Fusion\n\n## {title}\n\n- Operator grouping: the pass fuses each "
                                       "matched subgraph into one kernel.\n")
    assert any(subject == "Technique Operator grouping" for subject, _, _ in found)
