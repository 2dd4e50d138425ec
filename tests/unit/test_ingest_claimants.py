"""Rules of learned-10 that raise what the extractor proposes at all: every factor a sentence states, and names a
sentence gives by what it says of them (ingest/claimants.py; eval/ingest/runs/candidates-session40.md)."""

from __future__ import annotations

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.claimants import (called_names, costly_name, defined_name, means_names, spelled_acronyms, subject_name,
                                     used_names)
from kskill.ingest.relations import gains_of


@pytest.mark.parametrize("text, factors", [
    ("QServe achieves 1.2x-1.4x higher throughput on Llama-3-8B, and 2.4x-3.5x higher throughput on Qwen1.5-72B.",
     [1.2, 1.4, 2.4, 3.5]),
    ("Regional compilation is 5-9x faster to compile.", [9.0, 5.0]),
    ("On average, the kernel demonstrates a 2.1-fold improvement in processing speed.", [2.1]),
    ("It implemented W_INT2 A_INT8 GEMV/GEMM with 8x/2x speedup over cuBLAS.", [8.0, 2.0]),
    ("We improve the performance by 1.5x, 2.9x. 3x, and 1.2x for all these kernel-fusions.", [1.5, 2.9, 3.0, 1.2]),
    ("With tuning we saw a 22% increase in throughput.", [1.22]),
])
def test_every_factor_a_sentence_states_is_read(text, factors):
    assert gains_of(text) == factors


@pytest.mark.parametrize("text", [
    "The 2x2 tiles are faster to load.",  # a shape
    "It reaches A100-level throughput on 3x cheaper GPUs.",  # a price, not a speedup
    "It can improve performance by 2 to 3 us.",  # a time, no factor
    "The performance benefits should extend to batchsizes 4-8x larger.",  # a size
])
def test_a_shape_a_price_or_a_time_is_no_factor(text):
    assert gains_of(text) == []


def test_a_factor_in_brackets_after_another_name_is_that_names():
    assert gains_of("FP8 DelayedScaling reaches 1.61x, outperforming FP8 CurrentScaling (1.41x).") == [1.61]


def test_a_later_factor_counts_only_when_its_own_clause_speaks_of_speed():
    assert gains_of("We obtain 1.3x and 1.9x speedups while using 4x and 2x lower resources than baseline.") == [1.3, 1.9]


@pytest.mark.parametrize("text, name, quoted", [
    ("This optimization, known as loop tiling, will reduce the number of thread blocks.", "loop tiling", False),
    ("We call this a ping-pong scheduling pattern, where two warps run concurrently.",
     "ping-pong scheduling pattern", False),
    ('We replace it with a type of copy kernel known as a "blit" kernel.', "blit kernel", True),
])
def test_a_name_introduced_in_lower_case_or_quoted_after_an_article(text, name, quoted):
    assert called_names(text) == [(name, quoted)]


def test_words_spelled_out_before_their_acronym_are_a_name_in_any_case():
    assert spelled_acronyms("Blackwell introduces cluster launch control (CLC) for dynamic scheduling.") == [
        "cluster launch control"]
    assert spelled_acronyms("The runtime picks the GPU (CUDA) backend.") == []  # the initials do not match


def test_a_function_called_at_runtime_is_no_name():
    assert called_names("The hook is called when the stream finishes.") == []


@pytest.mark.parametrize("text, name", [
    ("Applications bound by GEMM computation can achieve additional speedups by utilizing Matrix Cores.",
     "Matrix Cores"),
    ("For transfers, using pinned memory instead of pageable memory can lead to a ~3x improvement in bandwidth.",
     "pinned memory"),
    ("Enabling page migration can significantly improve performance with managed memory.",
     "enabling page migration"),
    ("Applications can therefore, in general, benefit from disabling NUMA balancing.", "disabling NUMA balancing"),
    ("With multicast, a single TMA transaction broadcasts one tile to every CTA, saving repeated DRAM traffic.",
     "multicast"),
])
def test_the_means_of_a_stated_benefit_is_named(text, name):
    assert means_names(text) == [name]


@pytest.mark.parametrize("text", [
    "The example is built by using CMake and a recent compiler.",  # no benefit
    "Transfers are asynchronous, enabling significant GPU memory savings with minimal overhead.",  # a result
    "* Up to 6.3x faster computation. We continued the experiment, using BERT base and large models.",  # before it
    "With ROCm 6.2, the KV cache can be stored in FP8 format, significantly reducing the memory footprint.",  # a release
])
def test_a_means_without_a_benefit_after_it_is_no_name(text):
    assert means_names(text) == []


@pytest.mark.parametrize("text, name", [
    ("On RTX5090, SageAttention reaches 560T, 2.7x faster than FlashAttention2!", "SageAttention"),
    ("Preallocating minimizes allocation overhead and memory fragmentation.", "Preallocating"),
    ("On average, the TC-FPx kernel demonstrates a 2.1-fold improvement in processing speed.", "TC-FPx kernel"),
    ("Fused Linear kernels combine linear layers with losses, reducing memory usage by up to 80%.",
     "Fused Linear kernels"),
])
def test_the_subject_of_a_claimed_result_is_named(text, name):
    assert subject_name(text) == name


@pytest.mark.parametrize("text", [
    "The kernel achieves a 2x speedup over the baseline.",  # the document's own artefact
    "Our implementation runs 3x faster than PyTorch.",  # the document's own work
    "Performance improves by 30% with larger tiles.",  # a measure, no method
    "The compiler reads the configuration file first.",  # no result claimed
    "The plot shows that Flash Attention provides a significant speedup, by as much as 2-8x.",  # a report
    "Divergent warps can significantly reduce instruction throughput.",  # a harm, not a benefit
    "With this optimization, the kernel latency now reduces from 0.0084 ms to 0.0069 ms.",  # a measure
    "CUDA sample demonstrates a 2x faster GEMM using the WMMA API.",  # a part of the document, however named
])
def test_a_pronoun_an_artefact_or_a_claim_of_nothing_names_nothing(text):
    assert subject_name(text) == ""


def test_a_format_defined_as_a_kind_of_method_is_named_but_not_a_parameters_definition():
    assert defined_name("The Ellpack format is an effective data structure for SpMV.") == "Ellpack format"
    assert defined_name("ABfmt is the data format of the A and B matrices.") == ""
    assert defined_name("Policy selectors are the mechanism by which the algorithms select parameters.") == ""
    assert defined_name("Dialects are mechanism to engage with and extend the ecosystem.") == ""


def test_learned21_a_name_defined_with_its_acronym_between_is_named():
    assert defined_name("BlockFold (BF) is a packing scheme that keeps each tile in one cache line.") == "BlockFold"
    assert defined_name("Local memory (LM) is a small region shared by the threads of a block.") == ""  # no method


@pytest.fixture(scope="module")
def linker():
    """The built-in base's nodes, linked by name only (no embedding model)."""
    from kskill.ingest.linking import EntityLinker

    payload = read_builtin().payload
    nodes = [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
             for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]
    return EntityLinker(nodes, [], None)


@pytest.fixture(scope="module")
def proposals(linker):
    from kskill.ingest.proposals import ProposalFinder

    return ProposalFinder(linker)


def _document(tmp_path, text: str):
    from kskill.ingest.loaders import load_document

    path = tmp_path / "doc.md"
    path.write_text(text)
    return load_document(path)


def _proposed(proposals, tmp_path, text: str) -> dict[str, list]:
    """The proposals' names, each with its claims as (kind, relation, gain)."""
    from kskill.ingest.passages import passages

    doc = _document(tmp_path, text)
    out: dict[str, list] = {}
    for claim in proposals.claims(doc, passages(doc)):
        out.setdefault(claim.subject.name, []).append((claim.subject.kind, claim.relation, claim.gain))
    return out


RESULTS = """# Serving results

Compared with the leading serving stack, QServe achieves 1.2x-1.4x higher throughput when serving small models.

The kernel achieves a 2x speedup on long sequences.
"""


def test_the_subject_of_a_result_is_proposed_with_every_factor_and_the_documents_artefact_is_not(proposals, tmp_path):
    found = _proposed(proposals, tmp_path, RESULTS)
    assert found == {"QServe": [("Technique", "SUPPORTS", None), ("Technique", "GAIN", 1.2),
                                ("Technique", "GAIN", 1.4)]}


HEADED = """# Kernels

A persistent kernel with Stream-K scheduling splits the under-filled tail wave along K to reduce idle SMs.
"""


def test_a_phrase_ending_in_a_techniques_head_noun_is_a_weak_proposal_below_the_default_bar(proposals, tmp_path):
    from kskill.ingest.extract_rules import MIN_CONFIDENCE
    from kskill.ingest.passages import passages

    doc = _document(tmp_path, HEADED)
    claims = [c for c in proposals.claims(doc, passages(doc)) if c.subject.name == "Stream-K scheduling"]
    assert [(c.subject.kind, c.relation) for c in claims] == [("Technique", "SUPPORTS")]
    assert claims[0].confidence < MIN_CONFIDENCE


def test_a_proposal_named_by_a_head_noun_alone_is_weak_support():
    from kskill.ingest.claims import Claim, EntityRef, Span
    from kskill.ingest.support import gated

    ref = EntityRef("Technique", "", "then overlap")
    claim = Claim(ref, "SUPPORTS", None, 0.7, Span("Can then overlap the epilogue with loads.", "p. 3"), "rules",
                  signals=(("head_noun_only", 1.0), ("subject_named", 1.0)))
    assert gated([claim])[0].confidence == 0.45


@pytest.fixture(scope="module")
def rules(linker):
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings

    return RuleExtractor(linker, RuleSettings(learned=False))


def _gains(rules, tmp_path, text: str) -> list[tuple[str, float]]:
    return sorted((c.subject.id or c.subject.name, c.gain) for c in rules.extract(_document(tmp_path, text))
                  if c.relation == "GAIN")


def test_a_sentence_naming_the_technique_gives_it_every_factor(rules, tmp_path):
    text = "# Results\n\nKernel fusion makes training 1.5x faster on small models and 2.5x faster on large ones.\n"
    assert _gains(rules, tmp_path, text) == [("kernel_fusion", 1.5), ("kernel_fusion", 2.5)]


def test_a_sentence_naming_no_technique_gives_its_headings_technique_the_first_factor_only(rules, tmp_path):
    text = "# Kernel fusion\n\nWe obtain 1.3x and 1.9x speedups on the whole serving system.\n"
    assert _gains(rules, tmp_path, text) == [("kernel_fusion", 1.3)]


@pytest.mark.parametrize("text, name", [
    ("Using gf4 currently carries a ~5% perplexity penalty but increases inference speed by ~75%.", "gf4"),
    ("Using inline assembly improves throughput by 2x.", "inline assembly"),  # a noun in -ly stays
    ("Using fully fused MLPs improves training speed by 2x.", "fully fused MLPs"),  # an adverb opening the name stays
])
def test_learned17_a_lower_case_adverb_ends_a_name(text, name):
    """learned-17: a name read from a sentence ends before a lower-case adverb past its first word."""
    assert means_names(text) == [name]


def test_learned17_a_subject_may_be_followed_by_any_adverb_before_its_verb():
    assert subject_name("Tiling effectively reduces DRAM traffic by 4x.") == "Tiling"


@pytest.mark.parametrize("text, name", [
    ("To hide the launch cost, we use `LaunchBatcher` to group small kernels together.", "LaunchBatcher"),
    ("You can use warp voting to get better performance on sparse inputs.", "warp voting"),
    ("For small batches we apply split rows where possible for higher throughput.", "split rows"),
    ("To avoid this, use offset padding.", "offset padding"),
])
def test_learned21_what_a_sentence_recommends_using_for_a_benefit_is_named(text, name):
    """learned-21: "use X to ..." names X when the purpose states a benefit or the sentence opens with the cost it
    lowers."""
    assert used_names(text) == [name]


@pytest.mark.parametrize("text", [
    "Use the timer helper to write the results to a file.",  # a purpose that is no benefit
    "To keep the example short, we use small matrices to show the layout.",  # the opening lowers no cost
    "You can use this to your advantage to increase the number of blocks in flight.",  # a pronoun
    "In this mode the driver does not need to use page remapping, which can improve performance.",  # not used
])
def test_learned21_a_use_for_no_benefit_or_not_made_names_nothing(text):
    assert used_names(text) == []


@pytest.mark.parametrize("text, name", [
    ("However, modular arithmetic is quite slow on most GPUs.", "modular arithmetic"),
    ("Rebuilding a plan is relatively expensive, so keep the one you have.", "Rebuilding a plan"),
])
def test_learned21_what_a_sentence_says_is_slow_or_expensive_is_named_as_a_cost(text, name):
    assert costly_name(text) == name


@pytest.mark.parametrize("text", [
    "This step is slow on older drivers.",  # a pronoun
    "The scale factor is expensive to recompute in the backward pass.",  # what it costs to redo, no cost of its own
    "The tiled kernel is not slow at all.",  # negated
])
def test_learned21_a_pronoun_or_a_cost_of_redoing_is_no_cost(text):
    assert costly_name(text) == ""


COSTS = """# Integer math

Many index computations divide by the row width. However, modular arithmetic is quite slow on most GPUs.
To mitigate the cost you can use `MagicDivider` to precompute the multiplier once on the host.
"""


def test_learned21_a_cost_is_proposed_as_a_bottleneck_and_the_means_against_it_as_a_technique(proposals, tmp_path):
    found = _proposed(proposals, tmp_path, COSTS)
    assert found["modular arithmetic"] == [("Bottleneck", "SUPPORTS", None)]
    assert found["MagicDivider"] == [("Technique", "SUPPORTS", None)]




def test_learned21_another_kind_of_a_known_techniques_head_is_no_existing_node():
    """learned-21: retrieval finds "Shape Specialization" alike to "Warp specialization" by their shared head noun; the
    modifiers tell them apart. A name sharing a modifier, or a head that names no technique, is the known node."""
    from kskill.ingest.proposals import another_of_its_head

    assert another_of_its_head("Shape Specialization", "Warp specialization")
    assert not another_of_its_head("warp specialization", "Warp specialization")
    assert not another_of_its_head("Capturing a graph", "CUDA graphs")  # "graph" heads no family of techniques


def test_learned21_a_slow_method_is_no_bottleneck(proposals, tmp_path):
    text = "# Notes\n\nIn practice, software prefetching is slow on this device when the loop is short.\n"
    assert "software prefetching" not in _proposed(proposals, tmp_path, text)


def test_a_restriction_is_a_gate_not_a_proposals_name():
    """learned-22: a bold item of a list of gates ("Swizzle only for 16-bit types") names no technique; a name that
    holds "only" otherwise stays."""
    from kskill.ingest.proposals import _plausible
    assert not _plausible("Swizzle only for 16-bit")
    assert not _plausible("Prefetch only when aligned")
    assert _plausible("Prefetch-only pipelining")


@pytest.mark.parametrize("text", [
    "This section shows how you can use them to improve the performance of your model.",  # heldout28's "them"
    "You can use it to reduce the latency of each request.",
    "Kernels can use themselves to speed up the next call.",
])
def test_a_pronoun_recommended_for_a_benefit_names_nothing(text):
    assert used_names(text) == []


def test_a_name_recommended_for_a_benefit_is_still_named():
    assert used_names("To mitigate the cost you can use FastDivmod to pre-calculate the factors.") == ["FastDivmod"]
