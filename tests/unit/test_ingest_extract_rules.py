"""The rule extractor: cue sentences, section context, negations and causes, numeric claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.extract_rules import RuleExtractor
from kskill.ingest.lexicon import Lexicon
from kskill.ingest.loaders import load_document
from kskill.ingest.segment import sentences

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"


@pytest.fixture(scope="module")
def extractor() -> RuleExtractor:
    nodes = [{"id": n.id, "kind": n.label, "name": n.name} for (label, _), n in read_builtin().payload.nodes.items()
             if label in ("Bottleneck", "Technique")]
    return RuleExtractor(Lexicon(nodes))


def triples(extractor: RuleExtractor, tmp_path: Path, text: str, name: str = "doc.md") -> set[tuple[str, str, str]]:
    path = tmp_path / name
    path.write_text(text)
    return {c.triple for c in extractor.extract(load_document(path))}


def test_cue_sentence_links_bottleneck_and_technique(extractor, tmp_path):
    found = triples(extractor, tmp_path, "To avoid shared memory bank conflicts, pad the shared tile by one column.\n")
    assert ("shared_memory_bank_conflicts", "ADDRESSED_BY", "bank_conflict_padding") in found


def test_a_risk_is_not_read_as_a_remedy(extractor, tmp_path):
    found = triples(extractor, tmp_path, "Loop unrolling can increase register pressure in large loop bodies.\n")
    assert not any(t[1] == "ADDRESSED_BY" for t in found)


def test_mentions_without_a_cue_make_no_claim(extractor, tmp_path):
    assert triples(extractor, tmp_path, "This chapter covers warp divergence and loop unrolling.\n") == set()


def test_heading_context_and_heading_claims(extractor, tmp_path):
    found = triples(extractor, tmp_path, (FIXTURES / "guide.md").read_text())
    assert ("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion") in found
    assert ("memory_bandwidth", "ADDRESSED_BY", "vectorized_access") in found  # heading under a memory-bound heading
    assert ("warp_divergence", "ADDRESSED_BY", "branch_free_predication") in found
    assert ("loop_unrolling", "GAIN", "2") in found


def test_precondition_cue_gives_a_condition_from_the_vocabulary(extractor, tmp_path):
    found = triples(extractor, tmp_path, "Recomputation is only beneficial when the kernel is memory-bound.\n")
    assert ("recompute_instead_of_store", "REQUIRES", "memory_bound is_true") in found


def test_a_slower_factor_is_not_a_gain(extractor, tmp_path):
    found = triples(extractor, tmp_path, "Loop unrolling here was 3x slower than the baseline performance.\n")
    assert not any(t[1] == "GAIN" for t in found)


def test_evidence_quotes_the_sentence_and_locates_it(extractor, tmp_path):
    path = tmp_path / "q.md"
    path.write_text("# Notes\n\nBranch-free predication prevents warp divergence.\n")
    doc = load_document(path)
    claim = extractor.extract(doc)[0]
    assert claim.evidence.quote == "Branch-free predication prevents warp divergence."
    offset = doc.text.index("Branch-free")
    assert claim.evidence.location == f"section Notes, offset {offset}"


def test_sentences_respect_abbreviations_and_decimals(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("Use e.g. float4 loads for a 1.5x gain. Then stop there.\n\n- a list item here\n- another item here\n")
    texts = [s.text for s in sentences(load_document(path))]
    assert texts == ["Use e.g. float4 loads for a 1.5x gain.", "Then stop there.", "- a list item here", "- another item here"]
