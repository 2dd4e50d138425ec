"""The offline extractor's rules alone (no learned scorer, no embedding model): names, cues, headings, causes and numbers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.claims import Claim, EntityRef, Span
from kskill.ingest.extract_rules import RuleExtractor, RuleSettings, _stated, far_by_meaning
from kskill.ingest.passages import item_label
from kskill.ingest.linking import EntityLinker, PassageLinks
from kskill.ingest.loaders import load_document
from kskill.ingest.passages import is_statement
from kskill.ingest.relations import SentenceView
from kskill.ingest.segment import sentences
from kskill.ingest.tables import SEPARATOR, speedups

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"


@pytest.fixture(scope="module")
def extractor() -> RuleExtractor:
    payload = read_builtin().payload
    nodes = [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
             for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]
    metrics = [{"id": n.id, "name": n.name, "description": n.description}
               for (label, _), n in payload.nodes.items() if label == "Metric"]
    return RuleExtractor(EntityLinker(nodes, metrics, None), RuleSettings(learned=False))


def triples(extractor: RuleExtractor, tmp_path: Path, text: str, name: str = "doc.md") -> set[tuple[str, str, str]]:
    path = tmp_path / name
    path.write_text(text)
    return {c.triple for c in extractor.extract(load_document(path))}


def test_cue_sentence_links_bottleneck_and_technique(extractor, tmp_path):
    found = triples(extractor, tmp_path, "To avoid shared memory bank conflicts, pad the shared tile by one column.\n")
    assert ("shared_memory_bank_conflicts", "ADDRESSED_BY", "bank_conflict_padding") in found


def test_a_risk_is_a_cause_not_a_remedy(extractor, tmp_path):
    found = triples(extractor, tmp_path, "Loop unrolling can increase register pressure in large loop bodies.\n")
    assert not any(t[1] == "ADDRESSED_BY" for t in found)
    assert ("register_pressure", "SUPPORTS", "") in found


def test_mentions_in_passing_make_no_claim(extractor, tmp_path):
    assert triples(extractor, tmp_path, "This chapter covers warp divergence and loop unrolling.\n") == set()


def test_heading_context_gives_the_missing_side(extractor, tmp_path):
    found = triples(extractor, tmp_path, (FIXTURES / "guide.md").read_text())
    assert ("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion") in found
    assert ("warp_divergence", "ADDRESSED_BY", "branch_free_predication") in found
    assert ("loop_unrolling", "GAIN", "2") in found


def test_a_heading_naming_the_bottleneck_makes_it_the_sections_topic(extractor, tmp_path):
    # a section's heading under the document's title (learned-25: the title alone names no remedy's bottleneck)
    text = ("# GPU notes\n\n## Memory access as a bottleneck\n\n"
            "It is obviously faster if we can combine kernels into one.\n")
    assert ("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion") in triples(extractor, tmp_path, text)
    titled = "# Memory access as a bottleneck\n\nIt is obviously faster if we can combine kernels into one.\n"
    assert ("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion") not in triples(extractor, tmp_path, titled)


def test_a_technique_section_inside_a_bottlenecks_remedies_is_a_remedy(extractor, tmp_path):
    text = ("# Memory-bound optimizations\n\n## Vectorized loads\n\n"
            "Ensure that each thread issues few wide instructions instead of many small ones.\n\n"
            "# Memory-bound kernels\n\n## Loop unrolling\n\nEnsure that the loop bounds are constant.\n")
    found = triples(extractor, tmp_path, text)
    assert ("memory_bandwidth", "ADDRESSED_BY", "vectorized_access") in found
    assert ("memory_bandwidth", "ADDRESSED_BY", "loop_unrolling") not in found  # no heading of remedies


def test_a_technique_only_the_documents_title_names_is_no_remedy(extractor, tmp_path):
    sentence = "Ensure that each thread issues few instructions, to avoid wasting memory bandwidth.\n"
    page, section = f"# Vectorized loads\n\n{sentence}", f"# Notes\n\n## Vectorized loads\n\n{sentence}"
    remedy = ("memory_bandwidth", "ADDRESSED_BY", "vectorized_access")
    assert remedy not in triples(extractor, tmp_path, page)
    assert remedy in triples(extractor, tmp_path, section)


def test_an_imperative_to_apply_a_technique_names_its_remedy(extractor, tmp_path):
    text = "Use __launch_bounds__ to tell the compiler the block size, since register spills make things slow.\n"
    assert ("register_pressure", "ADDRESSED_BY", "launch_bounds") in triples(extractor, tmp_path, text)


def test_a_sentence_about_a_cost_is_no_remedy(extractor, tmp_path):
    text = "# Reduce memory traffic\n\nRisks: recomputation trades memory for compute.\n"
    assert not any(t[1] == "ADDRESSED_BY" for t in triples(extractor, tmp_path, text))


def test_a_sentence_led_by_a_node_supports_it_without_cue_words(extractor, tmp_path):
    # Named first, by its own name, with a figure: without a model to say what the passage is about.
    text = "A persistent kernel keeps 2 stages of tiles in flight while it loops over the work tiles.\n"
    assert ("persistent_kernel", "SUPPORTS", "") in triples(extractor, tmp_path, text)
    text = "The kernel keeps 2 stages of tiles in flight while a persistent kernel loops over the work tiles.\n"
    assert ("persistent_kernel", "SUPPORTS", "") not in triples(extractor, tmp_path, text)


def test_an_overview_above_a_section_does_not_make_it_a_preface(extractor, tmp_path):
    text = ("# Overview\n\n## Tunable parameters\n\n"
            "To achieve the optimal load and store performance, 128bit per load is suggested.\n")
    assert ("vectorized_access", "SUPPORTS", "") in triples(extractor, tmp_path, text)


def test_camel_case_spells_the_nodes_own_name(extractor):
    found = extractor.linker.mentions("FlashAttention computes exact attention in tiles that stay on chip.")
    assert [(m.id, m.exact) for m in found] == [("flash_attention", True)]


def test_precondition_cue_gives_a_condition_from_the_vocabulary(extractor, tmp_path):
    found = triples(extractor, tmp_path, "Recomputation is only beneficial when the kernel is memory-bound.\n")
    assert ("recompute_instead_of_store", "REQUIRES", "memory_bound is_true") in found


def test_a_threshold_under_a_bottleneck_is_its_signature(extractor, tmp_path):
    text = "# Profiling\n\n**Memory-bound indicators**:\n\n- NCU: DRAM throughput > 60% of peak\n"
    assert ("memory_bandwidth", "DETECTED_BY", "dram_throughput_pct > 60") in triples(extractor, tmp_path, text)


def test_a_slower_factor_is_not_a_gain(extractor, tmp_path):
    found = triples(extractor, tmp_path, "Loop unrolling here was 3x slower than the baseline performance.\n")
    assert not any(t[1] == "GAIN" for t in found)


def test_evidence_quotes_the_sentence_and_locates_it(extractor, tmp_path):
    path = tmp_path / "q.md"
    path.write_text("# Notes\n\nBranch-free predication prevents warp divergence.\n")
    doc = load_document(path)
    claim = next(c for c in extractor.extract(doc) if c.relation == "ADDRESSED_BY")
    assert claim.evidence.quote == "Branch-free predication prevents warp divergence."
    offset = doc.text.index("Branch-free")
    assert claim.evidence.location == f"section Notes, offset {offset}"


def test_statements_need_words_and_a_verb():
    assert not is_statement("CUTLASS and FlashAttention-3 Jay Shah, Colfax Research")
    assert not is_statement("Kernel fusion")
    assert is_statement("Pingpong scheduling using synchronization barriers: 580 TFLOPS -> 640 TFLOPS")
    assert is_statement("(2) Recomputation: Don’t store attn. matrix from forward, recompute it in the backward.")


def test_sentences_respect_abbreviations_and_decimals(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("Use e.g. float4 loads for a 1.5x gain. Then stop there.\n\n- a list item here\n- another item here\n")
    texts = [s.text for s in sentences(load_document(path))]
    assert texts == ["Use e.g. float4 loads for a 1.5x gain.", "Then stop there.", "- a list item here", "- another item here"]


def test_the_default_extractor_is_the_learned_scorer_and_the_precision_model_is_opt_in(extractor, tmp_path):
    """learned-36 by default; precision-36 when asked for, dropping what its model finds unstated."""
    linker = extractor.linker
    default, with_model = RuleExtractor(linker), RuleExtractor(linker, RuleSettings(precision=True))
    assert (default.version, with_model.version) == ("learned-36", "precision-36")
    doc = tmp_path / "doc.md"
    doc.write_text("# Memory bandwidth\n\nKernel fusion removes the intermediate writes that make a chain of "
                   "pointwise kernels memory-bound.\n\nSee the fusion section, `fuse=True`, kernel fusion, tiling.\n")
    kept = default.kept(*default.read(load_document(doc)))
    stated = with_model.stated(kept)
    assert set(stated) <= set(kept)
    assert all(with_model.precision.states(dict(c.signals)) for c in stated)
    assert all(not with_model.precision.states(dict(c.signals)) for c in kept if c not in stated)


def test_the_sense_check_is_opt_in(extractor):
    """sense-8 when asked for; without an embedding model it keeps every claim (nothing to compare by meaning)."""
    linker = extractor.linker
    checked = RuleExtractor(linker, RuleSettings(sense=True))
    assert checked.version == "sense-36" and RuleExtractor(linker).sense is None
    claim = Claim(EntityRef("Technique", "software_pipelining"), "SUPPORTS", None, 0.7,
                  Span("The graphics pipeline has many stages.", "offset 0"), "rules")
    assert checked.sense.filter([claim], linker) == [claim]


def test_a_sentence_that_does_not_state_the_claim_gives_none(extractor, tmp_path):
    """Each sentence gives a claim to the rules alone; unstated.py drops it."""
    pointer = "For a deeper dive into software pipelining, we recommend reading the original paper.\n"
    other_sense = "## Pipeline parallelism\n\nPipelining the model over stages reduces idle time, which is key to throughput.\n"
    example = "Triton's passes improve performance, e.g. loop unrolling, constant folding, CSE.\n"
    assert triples(extractor, tmp_path, pointer) == set()
    assert not any(t[0] == "software_pipelining" for t in triples(extractor, tmp_path, other_sense))
    assert triples(extractor, tmp_path, example) == set()


def test_a_list_items_label_names_the_technique_of_its_sentences(extractor):
    text = "We employ two techniques:\n\n- **Fine-grained copy - GEMM pipelining:** We launch nine copies per block. " \
           "The math begins as soon as each copy completes, hiding memory latency.\n"
    sentence = text[text.index("The math"):].strip()
    assert item_label(text, text.index("The math")) == "Fine-grained copy - GEMM pipelining"
    assert item_label(text, text.index("We employ")) == ""
    lexicon = extractor.linker
    claim = Claim(EntityRef("Bottleneck", "memory_latency"), "ADDRESSED_BY", EntityRef("Technique", "software_pipelining"),
                  0.7, Span(sentence, ""), "rules", kind="remedy")

    def view(label: str) -> SentenceView:
        return SentenceView(sentence, Span(sentence, ""), lexicon.mentions(sentence), [[]], [], PassageLinks(), "Details",
                            lexicon.mentions(label))
    assert _stated([claim], view(item_label(text, text.index("The math")))) == [claim]
    assert _stated([claim], view("")) == []


def test_a_claim_far_by_meaning_from_its_node_is_dropped():
    def claim(relation: str, similarity: float | None, node: str = "software_pipelining") -> Claim:
        signals = () if similarity is None else (("sentence_similarity", similarity),)
        technique = EntityRef("Technique", node)
        if relation == "ADDRESSED_BY":
            return Claim(EntityRef("Bottleneck", "memory_latency"), relation, technique, 0.7, Span("q", "l"), "rules",
                         signals=signals)
        return Claim(technique, relation, None, 0.7, Span("q", "l"), "rules", signals=signals)

    assert far_by_meaning(claim("SUPPORTS", 0.1)) and far_by_meaning(claim("ADDRESSED_BY", 0.2))
    assert not far_by_meaning(claim("SUPPORTS", 0.4))
    assert not far_by_meaning(claim("SUPPORTS", None)) and not far_by_meaning(claim("SUPPORTS", 0.0))  # not read
    assert not far_by_meaning(claim("SUPPORTS", 0.1, node=""))  # a proposal has no text of its own to compare


def test_a_lists_lead_line_about_measuring_is_each_items_context(extractor, tmp_path):
    """learned-11: "For reliable measurements:" above "2. Execute multiple timed iterations ..." makes the item
    measurement advice, as a measurement heading would; the same item under a list about something else states none."""
    item = "2. Execute multiple timed iterations for statistical significance\n"
    measured = triples(extractor, tmp_path, "# Tuning\n\nFor stable and reliable performance measurements:\n\n"
                       f"1. Pick the tile sizes to try for the kernel\n{item}")
    assert ("measure_repetitions", "SUPPORTS", "") in measured
    other = triples(extractor, tmp_path, "# Tuning\n\nFor the tile sizes of the kernel:\n\n"
                    f"1. Pick the tile sizes to try for the kernel\n{item}")
    assert ("measure_repetitions", "SUPPORTS", "") not in other


def test_a_capitalised_imperative_item_is_read(extractor, tmp_path):
    """learned-11: "Run a few warmup iterations ..." opens with its only verb, in capitals: still a statement."""
    found = triples(extractor, tmp_path, "# Tuning\n\n1. Run a few warmup iterations of the benchmark first\n")
    assert ("measure_warmup", "SUPPORTS", "") in found


def test_learned12_a_document_of_mentions_gives_no_evidence(extractor, tmp_path):
    """learned-12, on a small document: a cross-reference, an example's description, a technique said to be unavailable
    and a table cell past the row's subject state nothing of the nodes they name; the row's own subject still does."""
    found = triples(extractor, tmp_path, "# Benchmarks\n\n"
                    "For finer-grained timing with warmup iterations before timing, see Executable Benchmarks .\n\n"
                    "# Samples\n\n"
                    "This is an example of a GPU-accelerated matrix vector multiplication kernel written in OpenCL.\n\n"
                    "# Hardware\n\n"
                    "- SM100 persistent kernel scheduling via CLC is not available on SM120 GPUs.\n\n"
                    "# Strategies\n\n"
                    "| Strategy | Effect | How |\n|---|---|---|\n"
                    "| Register blocking | Reduce memory traffic with register accumulation | Loop unrolling with "
                    "register variables |\n")
    assert not {t[0] for t in found} & {"measure_warmup", "skinny_gemm", "persistent_kernel", "loop_unrolling"}
    assert ("excess_dram_traffic", "ADDRESSED_BY", "register_blocking") in found


def test_learned12_timer_intrinsics_are_no_fast_math(extractor, tmp_path):
    found = triples(extractor, tmp_path, "# Profiling\n\nThe methods are thin wrappers around the timer intrinsics, "
                    "which lower to small device helpers that are critical for low overhead.\n")
    assert not any("fast_math_intrinsics" in t for t in found)
    kept = triples(extractor, tmp_path, "# Math\n\nFast math intrinsics such as __expf are critical for speed when "
                   "lower precision is acceptable.\n")
    assert ("fast_math_intrinsics", "SUPPORTS", "") in kept


TRANSPOSE_TABLE = ("# Transpose kernels\n\nThe kernels were measured on one GPU.\n\n"
                   "| Kernel Name | Latency (ms) | Effective Bandwidth (GB/s) |\n| :---: | :---: | :---: |\n"
                   "| Naive Coalesced Write | 3.12054 | 640.915 |\n| Shared Memory Swizzled | 2.9489 | 678.22 |\n")


def claims_of(extractor: RuleExtractor, tmp_path: Path, text: str) -> list[Claim]:
    path = tmp_path / "doc.md"
    path.write_text(text)
    return extractor.extract(load_document(path))


def test_learned13_a_table_row_states_a_measured_figure_of_its_subject(extractor, tmp_path):
    """learned-13: a row's first cell names its subject, a figure under a header naming a measure is said of it."""
    claims = {c.triple: c for c in claims_of(extractor, tmp_path, TRANSPOSE_TABLE)}
    coalescing = claims[("memory_coalescing", "SUPPORTS", "")]
    assert coalescing.evidence.quote == "Naive Coalesced Write | 3.12054 | 640.915"
    assert {"3.12054", "640.915"} <= set(coalescing.figures)
    assert ("bank_conflict_padding", "SUPPORTS", "") in claims  # "swizzled"


def test_learned13_a_row_without_its_header_or_a_measured_figure_states_nothing(extractor, tmp_path):
    """The same rows without the header's separator line are cells, not statements; a row of flags and defaults
    names a node past its subject and measures nothing."""
    headless = TRANSPOSE_TABLE.replace("| :---: | :---: | :---: |\n", "")
    assert not {t[0] for t in triples(extractor, tmp_path, headless)} & {"memory_coalescing", "bank_conflict_padding"}
    flags = ("# Options\n\n| Flag | Description | Default |\n|---|---|---|\n"
             "| `--no_cuda_graph` | Disable CUDA graph capture for the timed runs | 0 |\n")
    assert triples(extractor, tmp_path, flags) == set()


def test_learned13_a_describing_column_names_the_subject_of_a_labelled_row(extractor, tmp_path):
    """When the first cell is a mere label, the column whose header says it describes the row names the subject."""
    text = ("# Results\n\n| GEMM Kernel | TFLOPS | Kernel Description |\n| --- | --- | ---: |\n"
            "| Custom GEMM Kernel V01 | 1.7218 | Coalesced global memory access |\n")
    assert ("memory_coalescing", "SUPPORTS", "") in triples(extractor, tmp_path, text)
    baseline = text.replace("Kernel Description", "Reference baseline")  # a column that does not describe the row
    assert ("memory_coalescing", "SUPPORTS", "") not in triples(extractor, tmp_path, baseline)


def test_learned19_a_measured_table_row_is_not_far_by_meaning():
    """learned-19: "2: GMEM Coalescing | 1986.5 | 8.5%" is far by meaning from the node's text, yet its subject cell
    names the node and states its measured figure; the same far evidence from a sentence is still dropped."""
    far = (("sentence_similarity", 0.1),)
    row = Claim(EntityRef("Technique", "memory_coalescing"), "SUPPORTS", None, 0.8, Span("q", "l"), "rules",
                signals=far + (("measured_row", 1.0),))
    assert not far_by_meaning(row) and far_by_meaning(replace(row, signals=far))


def test_learned19_a_table_row_gives_no_evidence_to_its_headings_node(extractor, tmp_path):
    """learned-19: a row that names a technique in its describing column is read, but says nothing of the
    bottleneck its heading names."""
    text = ("# FP32 GEMM on CUDA cores\n\n| GEMM Kernel | Latency (ms) | Kernel Description |\n| --- | --- | --- |\n"
            "| Custom GEMM Kernel V03 | 8.9 | 2D block tiling and 1D thread tiling |\n")
    found = {t[0] for t in triples(extractor, tmp_path, text)}
    assert "shared_memory_tiling" in found and "fp32_gemm_on_cuda_cores" not in found


def test_learned20_speedups_are_read_under_a_speedup_header_only():
    """learned-20: a factor under a header naming a speedup, above the baseline's 1.0x; a bare whole number is no
    factor, nor a figure under another header."""
    headers = ("Weight Precision", "Activation Precision", "Time Per Output Token (ms)", "Speedup vs `fp16`")
    assert speedups("| `fp8` | `fp16` | 22.95 | 1.9x |", headers) == (1.9,)
    assert speedups("| `fp16` | `fp16` | 42.52 | 1.0x |", headers) == ()
    assert speedups("| 4 | 4096 | 81 | **2.04x** |", ("M", "K", "kbit (us)", "Speedup")) == (2.04,)
    assert speedups("| 4 | 4096 | 81 | 3 |", ("M", "K", "kbit (us)", "Speedup")) == ()
    assert speedups("| tiling | 1.5x |", ("Change", "Time ratio")) == ()
    assert SEPARATOR.match("|-   |-   | -  |") and not SEPARATOR.match("- an item")


def test_learned20_a_table_rows_speedup_is_the_gain_of_the_technique_it_names(extractor, tmp_path):
    """learned-20: "| Kernel fusion | 0.8 | 1.5x |" under a speedup header: kernel fusion's gain."""
    text = "# Steps\n\n| Change | Time (ms) | Speedup |\n| --- | --- | --- |\n| Kernel fusion | 0.8 | 1.5x |\n"
    assert ("kernel_fusion", "GAIN", "1.5") in triples(extractor, tmp_path, text)
    other = text.replace("Speedup", "Occupancy")  # no speedup header: no gain
    assert not any(t[1] == "GAIN" for t in triples(extractor, tmp_path, other))


def test_learned20_a_table_row_naming_a_number_format_proposes_it_with_its_speedup(extractor, tmp_path):
    """learned-20: a row whose subject cell names a number format the graph lacks proposes it, the row's factor its
    gain; the baseline format a header names after "vs" gains nothing."""
    text = ("# Serving\n\n| Weight Precision | Activation Precision | Time (ms) | Speedup vs `fp16` |\n"
            "|- |- |- |- |\n| `fp16` | `fp16` | 42.52 | 1.0x |\n| `fp8` | `fp16` | 22.95 | 1.9x |\n"
            "| Llama | `fp16` | 20.1 | 2.1x |\n")
    path = tmp_path / "doc.md"
    path.write_text(text)
    gains = {(c.subject.name, c.gain) for c in extractor.extract(load_document(path)) if c.relation == "GAIN"}
    assert ("fp8", 1.9) in gains
    assert not any(name.lower() == "fp16" for name, _ in gains)


def test_learned20_a_speedup_header_naming_what_was_sped_up_takes_the_rows_subject_place(extractor, tmp_path):
    """learned-20: under "Async TP speedup" a row's quantization mode is where the speedup was measured: float8 gains
    nothing; under "MXFP8 speedup vs BF16" a row of a count of GPUs gives MXFP8 its factor."""
    text = ("# Results\n\n| Quantization | Vanilla TP tokens/sec | Async TP tokens/sec | Async TP speedup |\n"
            "| --- | --- | --- | --- |\n| float8 tensorwise | 809.8 | 942.4 | 1.16 |\n\n# Scaling\n\n"
            "| Number of GPUs | BF16 tokens/sec | MXFP8 tokens/sec | MXFP8 speedup vs BF16 |\n| --- | --- | --- | --- |\n"
            "| 512 | 6169 | 7401 | 1.20x |\n")
    path = tmp_path / "doc.md"
    path.write_text(text)
    gains = {(c.subject.name, c.gain) for c in extractor.extract(load_document(path)) if c.relation == "GAIN"}
    assert gains == {("MXFP8", 1.2)}


def _gains(extractor: RuleExtractor, tmp_path: Path, text: str) -> set[tuple[str, float]]:
    """The (technique, factor) of each GAIN the rules read from `text`."""
    path = tmp_path / "doc.md"
    path.write_text(text)
    return {(c.subject.id, c.gain) for c in extractor.extract(load_document(path)) if c.relation == "GAIN"}


def test_learned21_an_example_after_a_sentence_on_one_technique_is_that_techniques_gain(extractor, tmp_path):
    """learned-21: "For example, ... but only 30 µs" after a sentence on CUDA graphs is CUDA graphs' 3x."""
    text = ("# Launching\n\nCUDA graphs cut the CPU cost of many small launches.\n\nFor example, a solver step takes "
            "about 90 µs when launched op by op, but only 30 µs when it is replayed.\n")
    assert _gains(extractor, tmp_path, text) == {("cuda_graph", 3.0)}
    # an example after a sentence naming two techniques: which one it illustrates is a guess
    two = text.replace("CUDA graphs cut", "CUDA graphs and kernel fusion cut")
    assert _gains(extractor, tmp_path, two) == set()


def test_learned21_a_percentage_in_a_techniques_section_is_its_gain_and_a_cut_of_memory_is_none(extractor, tmp_path):
    """learned-21: "improved the 4K case by 12.5%" under a technique's heading is its 1.125x; a memory cut is none."""
    text = "# Kernel fusion\n\nOn our card it improved the 4K case by 12.5% over the unfused code.\n"
    assert _gains(extractor, tmp_path, text) == {("kernel_fusion", 1.125)}
    assert _gains(extractor, tmp_path, text.replace("improved the 4K case", "reduced memory use")) == set()


def test_learned21_a_rows_percentage_under_a_speedup_header_is_the_gain_of_the_technique_it_names(extractor, tmp_path):
    """learned-21: "+25%" under a speedup header is the 1.25x of the technique the row names; "-25%" is none."""
    text = "# Steps\n\n| Change | Time (ms) | Speedup |\n| --- | --- | --- |\n| Kernel fusion | 0.8 | +25% |\n"
    assert _gains(extractor, tmp_path, text) == {("kernel_fusion", 1.25)}
    assert _gains(extractor, tmp_path, text.replace("+25%", "-25%")) == set()  # a slowdown


def test_learned22_a_percentage_before_performance_increase_is_the_gain_of_the_technique_credited(extractor, tmp_path):
    """learned-22: "provides a 4.4% performance increase" under a technique's heading is its 1.044x; a memory increase
    is none."""
    text = "# Kernel fusion\n\nOn the sample, fusing the loops provides a 4.4% performance increase overall.\n"
    assert _gains(extractor, tmp_path, text) == {("kernel_fusion", 1.044)}
    assert _gains(extractor, tmp_path, text.replace("performance increase", "memory increase")) == set()


TIMED = ("# QuickAttn: Fast Attention Inference\n\n## Results\n\nWe compared QuickAttn with PyTorch and xLib.\n\n"
         "Batch size 8, execution time in milliseconds:\n\n| | PyTorch | xLib | QuickAttn |\n"
         "| --- | --- | --- | --- |\n| 128 | 2.0 | 1.5 | 1.2 |\n| 256 | 4.4 | 3.0 | 2.2 |\n")


def test_learned22_a_timing_tables_last_row_gives_the_titles_system_the_baselines_time_over_its_own(extractor,
                                                                                                    tmp_path):
    """learned-22: QuickAttn, named by the title and a column of a table of times whose columns are systems, gains
    the first column's time over its own in the last row (4.4 / 2.2 = 2x); one gain a table, not one a row."""
    path = tmp_path / "doc.md"
    path.write_text(TIMED)
    gains = {(c.subject.name, c.gain) for c in extractor.extract(load_document(path)) if c.relation == "GAIN"}
    assert gains == {("QuickAttn", 2.0)}


def test_learned34_a_nested_solution_item_remedies_what_the_item_above_it_names(extractor, tmp_path):
    """A troubleshooting list (heldout37's profiling chapter): "2. **Kernel Launch Overhead**:" and under it
    "- Solution: Kernel fusion or persistent kernels". The solution's techniques address the item's bottleneck; a
    symptom names no remedy, nor does a solution item at the top level, with nothing above it."""
    text = ("### Execution-Related Issues\n\n1. **Warp Divergence**:\n   - Symptoms: Low warp execution efficiency\n\n"
            "2. **Kernel Launch Overhead**:\n   - Symptoms: Many small, short-duration kernels\n"
            "   - Solution: Kernel fusion or persistent kernels\n")
    found = triples(extractor, tmp_path, text)
    assert {("launch_overhead", "ADDRESSED_BY", "kernel_fusion"),
            ("launch_overhead", "ADDRESSED_BY", "persistent_kernel")} <= found
    assert not any(t[1] == "ADDRESSED_BY" and t[0] == "warp_divergence" for t in found)
    top_level = "- Solution: Kernel fusion or persistent kernels\n"
    assert not any(t[1] == "ADDRESSED_BY" for t in triples(extractor, tmp_path, top_level))


def test_learned35_fewer_global_memory_accesses_and_data_reused_from_shared_memory(extractor, tmp_path):
    """heldout37's convolution chapter: tiling said by what it does, and the traffic it cuts said as accesses. Global
    memory accesses merely counted name no bottleneck."""
    remedy = ("By loading input data into shared memory once and reusing it for multiple computations, we can "
              "significantly reduce global memory accesses.\n")
    assert ("excess_dram_traffic", "ADDRESSED_BY", "shared_memory_tiling") in triples(extractor, tmp_path, remedy)
    lexicon = extractor.linker
    assert {m.id for m in lexicon.mentions("High global memory access redundancy")} == {"excess_dram_traffic"}
    assert not lexicon.mentions("Each thread performs two global memory accesses per output element.")


def test_learned36_a_renderers_rasterization_and_pipeline_stages_are_no_kernel_nodes(extractor, tmp_path):
    """heldout38's slow-shader post: a 2D renderer's coarse and fine rasterization stages read as software pipelining
    and as a GEMM's tile order. A GEMM's raster order and a load pipeline's stages keep their senses."""
    renderer = ("Most of the pipeline stages are reasonably fast, but the fine rasterization stage is "
                "disproportionately slow.\n")
    assert not {t[0] for t in triples(extractor, tmp_path, renderer)} & {"software_pipelining", "grouped_tile_rasterization"}
    gemm = "Use tile rasterization to improve L2 cache reuse across thread blocks in the GEMM.\n"
    assert "grouped_tile_rasterization" in {t[0] for t in triples(extractor, tmp_path, gemm)} | \
        {t[2] for t in triples(extractor, tmp_path, gemm)}
