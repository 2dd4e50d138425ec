"""The offline extractor on small documents written for these tests, one per format, with the real
embedding model and hybrid retriever: exactly these claims, quoting exactly these sentences."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_support import extractor, pdf_bytes, skill_retriever  # noqa: F401 (fixtures)

from kskill.ingest.loaders import load_document
from kskill.ingest.passages import heading_sentences

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "ingest" / "formats"
DECK = [["Tiling and fusion"],
        ["Kernel fusion", "Fusing pointwise operators into one kernel avoids writing intermediates to DRAM.",
         "Kernel fusion gave a 2.5x speedup on the activation chain."]]

EXPECTED = {
    "pipelining.md": {
        ("memory_latency", "ADDRESSED_BY", "software_pipelining",
         "Software pipelining is critical to hide the latency of global memory loads."),
        ("software_pipelining", "SUPPORTS", "",
         "With three stages the kernel needs 3x the shared memory of a single buffer."),
        ("measure_warmup", "SUPPORTS", "", "Run warm-up iterations before timing, so that clocks and caches settle."),
    },
    "divergence.rst": {
        ("warp_divergence", "SUPPORTS", "",
         "Threads of a warp that take different branches are serialized, which is called warp divergence."),
        ("warp_divergence", "ADDRESSED_BY", "branch_free_predication",
         "Branch-free predication prevents warp divergence in short conditional blocks."),
    },
    "bank-conflicts.html": {
        ("shared_memory_bank_conflicts", "ADDRESSED_BY", "bank_conflict_padding",
         "To avoid shared memory bank conflicts, pad the shared tile by one column."),
    },
    "notes.txt": {
        ("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion",
         "Fusing pointwise operations into one kernel reduces memory traffic for memory-bound kernels."),
        ("excess_dram_traffic", "ADDRESSED_BY", "kernel_fusion",
         "Fusing pointwise operations into one kernel reduces memory traffic for memory-bound kernels."),
        ("recompute_instead_of_store", "REQUIRES", "memory_bound is_true",
         "Recomputation is only beneficial when the kernel is memory-bound."),
        # learned-14: beneficial only for memory-bound kernels, so it is a remedy for them
        ("memory_bandwidth", "ADDRESSED_BY", "recompute_instead_of_store",
         "Recomputation is only beneficial when the kernel is memory-bound."),
    },
    "deck.pdf": {
        ("kernel_fusion", "SUPPORTS", "", "Fusing pointwise operators into one kernel avoids writing intermediates to DRAM."),
        # learned-8's evidence by meaning: the sentence explains the bottleneck without its lexicon name
        ("materialized_intermediates", "SUPPORTS", "",
         "Fusing pointwise operators into one kernel avoids writing intermediates to DRAM."),
        ("kernel_fusion", "GAIN", "2.5", "Kernel fusion gave a 2.5x speedup on the activation chain."),
    },
}


def document(name: str, tmp_path: Path):
    if name == "deck.pdf":
        path = tmp_path / name
        path.write_bytes(pdf_bytes(DECK, title="Fusion deck", landscape=True))
        return load_document(path)
    return load_document(FORMATS / name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exact_claims_for_each_format(extractor, tmp_path, name):  # noqa: F811
    doc = document(name, tmp_path)
    got = {(*c.triple, c.evidence.quote) for c in extractor.extract(doc)}
    assert got == EXPECTED[name]


def test_numbers_and_kinds_travel_with_the_claims(extractor, tmp_path):  # noqa: F811
    claims = {c.triple: c for c in extractor.extract(load_document(FORMATS / "pipelining.md"))}
    assert claims[("software_pipelining", "SUPPORTS", "")].figures == ("3x",)
    assert claims[("memory_latency", "ADDRESSED_BY", "software_pipelining")].kind == "remedy"
    assert claims[("measure_warmup", "SUPPORTS", "")].kind == "measurement"
    gain = {c.triple: c for c in extractor.extract(document("deck.pdf", tmp_path))}[("kernel_fusion", "GAIN", "2.5")]
    assert gain.evidence.location == "p. 2" and gain.gain == 2.5


def test_a_title_alone_is_never_evidence(extractor, tmp_path):  # noqa: F811
    deck = tmp_path / "titles.pdf"
    deck.write_bytes(pdf_bytes([["Shared memory bank conflicts and padding"], ["Kernel fusion and CUDA graphs"],
                                ["Split-K for skinny GEMMs: results"]], landscape=True))
    doc = load_document(deck)
    assert extractor.extract(doc) == []
    md = tmp_path / "headings.md"
    md.write_text("# Kernel fusion\n\n## Shared memory bank conflicts\n\n### Warp divergence and predication\n")
    assert extractor.extract(load_document(md)) == []
    quotes = {c.evidence.quote for c in extractor.extract(load_document(FORMATS / "pipelining.md"))}
    titles = {s.title for s in load_document(FORMATS / "pipelining.md").sections}
    assert quotes and not quotes & titles
    assert len(heading_sentences(doc)) == 3  # each slide's title line is known as a title


def test_measurement_advice_is_never_a_kernel_optimization(extractor, tmp_path):  # noqa: F811
    path = tmp_path / "bench.md"
    path.write_text("# Benchmarking methodology\n\nFlush the L2 cache before each timed iteration so that "
                    "memory-bound kernels read from DRAM, as kernel fusion would otherwise look better.\n")
    claims = extractor.extract(load_document(path))
    assert {c.triple for c in claims} == {("measure_cold_l2", "SUPPORTS", "")}


def test_a_new_technique_is_proposed_with_its_evidence_and_nearest_nodes(extractor, tmp_path):  # noqa: F811
    path = tmp_path / "pingpong.md"
    path.write_text("# Attention on Hopper\n\n## Pingpong scheduling\n\nPingpong scheduling alternates two warpgroups "
                    "so that one runs its softmax while the other uses the tensor cores, which hides the softmax "
                    "behind the matrix multiplications.\n")
    proposed = [c for c in extractor.extract(load_document(path)) if not c.subject.id]
    assert [(c.subject.kind, c.subject.name, c.relation) for c in proposed] == [
        ("Technique", "Pingpong scheduling", "SUPPORTS")]
    assert proposed[0].evidence.quote.startswith("Pingpong scheduling alternates two warpgroups")
    assert proposed[0].subject.nearest and "warp_specialization" in proposed[0].subject.nearest
