"""Weak support is capped below the default bar (learned-6): the claim is kept for a lower `--min-confidence`."""

from __future__ import annotations

from pathlib import Path

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.claims import Claim, EntityRef, Span
from kskill.ingest.extract_rules import MIN_CONFIDENCE, RuleExtractor, RuleSettings
from kskill.ingest.linking import EntityLinker
from kskill.ingest.loaders import load_document
from kskill.ingest.support import WEAK, gated, weak_support

BANK = EntityRef("Bottleneck", "shared_memory_bank_conflicts")
PAD = EntityRef("Technique", "bank_conflict_padding")
STRONG = (("subject_named", 1.0), ("subject_exact", 1.0), ("object_named", 1.0), ("sentence_similarity", 0.6))


def evidence(quote: str, signals=STRONG, subject: EntityRef = BANK, confidence: float = 0.8) -> Claim:
    return Claim(subject, "SUPPORTS", None, confidence, Span(quote, "section A"), "rules", signals=signals)


def test_a_declarative_sentence_naming_its_node_is_strong_support():
    claim = evidence("Bank conflicts serialize the accesses of a warp that map to one bank.")
    assert weak_support(claim) == "" and gated([claim]) == [claim]


def test_sentences_that_are_not_body_statements_are_weak():
    reasons = [weak_support(evidence(quote)) for quote in (
        '<img src="conflicts.png" alt="Bank conflicts"> Bank conflicts in a warp',
        "[2025-07-10] We have a post on bank conflicts in the comfort of Python.")]
    assert reasons == ["image caption", "dated news line"]
    # learned-15: a date with the day or month first, before the news line's colon
    assert weak_support(evidence("- 10/02/2024 🚀🚀: We've added initial bank conflict checks")) == "dated news line"
    assert weak_support(evidence("On 10/02/2024 the bank conflicts were fixed by padding.")) == ""
    # a table row, a formula, a lead line and list items run together stated their claim too often to be weak
    for quote in ("Bank conflicts | 32-way serialization of a warp's accesses",
                  "With 32 banks, a stride of 32 gives conflict cycles = 32 per access, the worst bank conflicts",
                  "Triton avoids bank conflicts with a swizzled layout:",
                  "- pad the tile, which removes bank conflicts, and - swizzle it"):
        assert weak_support(evidence(quote)) == "", quote


def test_a_proposal_named_only_by_its_heading_is_weak():
    new = EntityRef("Technique", name="Crossover rules")
    heading_only = evidence("So shared memory dominates global memory when the tile is large.",
                            (("subject_named", 0.0),), new)
    named = evidence("Crossover rules pick the staged form for tiles above 4K.", (("subject_named", 1.0),), new)
    assert weak_support(heading_only) == "proposal named by a heading only" and weak_support(named) == ""


def test_edges_and_aliases_are_not_judged_here():
    edge = Claim(BANK, "ADDRESSED_BY", PAD, 0.8, Span("q", "l"), "rules", signals=(("object_named", 1.0),))
    alias = (("subject_named", 1.0), ("subject_exact", 0.0), ("sentence_similarity", 0.25))
    assert weak_support(edge) == "" and weak_support(evidence("Warp shuffles exchange butterfly stages.", alias)) == ""


def test_weak_support_is_capped_below_the_default_bar_not_dropped():
    weak = evidence("![banks](banks.png) Bank conflicts in a warp")
    capped = gated([weak])[0]
    assert capped.confidence == WEAK < MIN_CONFIDENCE and capped.triple == weak.triple
    assert gated([evidence("![b](b.png) x", confidence=0.3)])[0].confidence == 0.3  # already lower: unchanged


def test_the_extractor_keeps_weak_support_only_below_the_default_bar(tmp_path: Path):
    """Through the real extractor (learned scorer, real lexicon): a dated news line naming a node is no claim at the
    default bar, and comes back, capped, at a lower one."""
    payload = read_builtin().payload
    nodes = [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
             for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]
    linker = EntityLinker(nodes, [], None)
    doc = tmp_path / "doc.md"
    doc.write_text("# Shared memory bank conflicts\n\n[2025-07-10] Shared memory bank conflicts serialize the accesses "
                   "of a warp that map to one bank.\n\n## Crossover rules\n\nSo shared memory dominates global memory "
                   "when the tile is large, which this section measures.\n")
    default = RuleExtractor(linker).extract(load_document(doc))
    lower = RuleExtractor(linker, RuleSettings(min_confidence=0.1)).extract(load_document(doc))
    assert not [c for c in default if "2025-07-10" in c.evidence.quote]
    assert [(c.triple, c.confidence) for c in lower] == [
        (("shared_memory_bank_conflicts", "SUPPORTS", ""), WEAK), (("new:crossover rules", "SUPPORTS", ""), WEAK)]
    assert default == []
