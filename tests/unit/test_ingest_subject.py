"""Evidence for what a document is about (learned-25, ingest/subject.py): the node its title names, or the one its
sentences keep naming, from the sentence that best states a claim about it, when no kept claim speaks of it.

The embedding model is replaced by hand-made vectors, so that each test states how near a sentence is to each node."""

from __future__ import annotations

import numpy as np

from kskill.ingest.claims import Claim, EntityRef, Span
from kskill.ingest.explained import EXPLAINS
from kskill.ingest.lexicon import Lexicon, Mention
from kskill.ingest.linking import PassageLinks
from kskill.ingest.relations import SentenceView
from kskill.ingest.subject import recurring_subjects, states_claim, subject_evidence, title_subjects, unspoken_subjects

NODES = [{"id": "memory_bandwidth", "kind": "Bottleneck", "name": "DRAM bandwidth bound"},
         {"id": "autotune_launch", "kind": "Technique", "name": "Autotune launch parameters"},
         {"id": "skinny_gemm", "kind": "Technique", "name": "Skinny GEMM"},
         {"id": "shared_memory_tiling", "kind": "Technique", "name": "Shared-memory tiling"}]
KIND_OF = {n["id"]: n["kind"] for n in NODES}
VECTORS = {"memory_bandwidth": np.array([1.0, 0.0, 0.0, 0.0, 0.0]), "autotune_launch": np.array([0.0, 1.0, 0.0, 0.0, 0.0]),
           "skinny_gemm": np.array([0.0, 0.0, 1.0, 0.0, 0.0]), "shared_memory_tiling": np.array([0.0, 0.0, 0.0, 1.0, 0.0])}
ELSEWHERE = np.array([0.0, 0.0, 0.0, 0.0, 1.0])  # near no node
FAR = 0.22


class Linker:
    """What the subject rule asks of the entity linker: names, node kinds and vectors, and sentence vectors (given
    per text)."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.kind_of = KIND_OF
        self.lexicon = Lexicon(NODES)
        self.vectors = vectors

    def mentions(self, text: str) -> list[Mention]:
        return self.lexicon.mentions(text)

    def node_vectors(self) -> dict[str, np.ndarray]:
        return VECTORS

    def embed(self, texts):
        return np.array([self.vectors.get(t, ELSEWHERE) for t in texts])


def _toward(node: str, cosine: float) -> np.ndarray:
    """A unit vector with the given cosine to `node`'s vector, the rest toward no node."""
    return cosine * VECTORS[node] + np.sqrt(1 - cosine ** 2) * ELSEWHERE


def _view(linker: Linker, text: str, heading: str = "Results") -> SentenceView:
    return SentenceView(text, Span(text, f"section {heading}, offset 0"), linker.mentions(text), [], [], PassageLinks(),
                        heading)


def _evidence(title: str, views: list[SentenceView], linker: Linker, recurring=(), kept=()) -> list[Claim]:
    """What the rule reads from a document with this title, these sentences and these kept claims."""
    wanted = unspoken_subjects(title, list(recurring), list(kept), linker.mentions)
    return subject_evidence(title, wanted, views, linker, "rules", FAR)


DRAM_TITLE = "Saturating DRAM bandwidth"
DRAM_BOUND = "When in0 has small height and large width, the matmul becomes DRAM-bound and more readers do not help."
MENTION = "This page is part of the DRAM-bound kernels series."  # names the node, claims nothing


def test_the_title_names_what_the_document_is_about_in_the_lexicons_general_terms():
    linker = Linker({})
    assert [m.id for m in title_subjects("Stay GMEM-bound at large sizes", linker.mentions)] == ["memory_bandwidth"]
    assert [m.id for m in linker.mentions("the kernel is HBM-bound")] == ["memory_bandwidth"]
    assert title_subjects("Sparse matrix vector multiplication with a skinny GEMM", linker.mentions) == []  # other sense


def test_a_body_sentence_that_names_the_title_node_and_states_a_claim_is_its_evidence():
    linker = Linker({DRAM_BOUND: _toward("memory_bandwidth", 0.5), MENTION: _toward("memory_bandwidth", 0.6)})
    views = [_view(linker, MENTION), _view(linker, DRAM_BOUND)]
    [claim] = _evidence("Saturating DRAM-bound kernels", views, linker)
    assert (claim.subject.id, claim.relation, claim.evidence.quote) == ("memory_bandwidth", "SUPPORTS", DRAM_BOUND)


def test_the_title_alone_or_a_mere_mention_is_no_evidence():
    title = "DRAM-bound kernels"
    linker = Linker({title: _toward("memory_bandwidth", 0.9), MENTION: _toward("memory_bandwidth", 0.9)})
    assert not states_claim(MENTION)
    assert _evidence(title, [_view(linker, title), _view(linker, MENTION)], linker) == []


def test_a_node_a_kept_claim_speaks_of_gets_nothing_more():
    linker = Linker({DRAM_BOUND: _toward("memory_bandwidth", 0.5)})
    kept = [Claim(EntityRef("Bottleneck", "memory_bandwidth"), "SUPPORTS", None, 0.7, Span("x", "offset 0"), "rules")]
    assert _evidence("DRAM-bound kernels", [_view(linker, DRAM_BOUND)], linker, kept=kept) == []


UNNAMED = "Each request moves more bytes than the kernel computes on, which causes the stall on every load."


def test_a_title_node_the_body_never_names_takes_a_sentence_that_explains_it_by_meaning():
    near = Linker({UNNAMED: _toward("memory_bandwidth", EXPLAINS + 0.05)})
    [claim] = _evidence("DRAM-bound kernels", [_view(near, UNNAMED)], near)
    assert claim.evidence.quote == UNNAMED
    far = Linker({UNNAMED: _toward("memory_bandwidth", EXPLAINS - 0.05)})
    assert _evidence("DRAM-bound kernels", [_view(far, UNNAMED)], far) == []


TUNING = "Heuristics aim to reduce the search space for runtime autotuning, so fewer kernels are profiled."


def test_the_node_the_sentences_keep_naming_is_a_subject_stated_only_by_a_sentence_naming_it():
    naming = {"autotune_launch": 3, "shared_memory_tiling": 1, "measure_warmup": 5}
    assert [m.id for m in recurring_subjects(naming, KIND_OF)] == ["autotune_launch"]  # a protocol step is no subject
    assert recurring_subjects({"autotune_launch": 1}, KIND_OF) == []
    recurring = recurring_subjects(naming, KIND_OF)
    linker = Linker({TUNING: _toward("autotune_launch", 0.5),
                     "It searches every tile size, which causes long builds.": _toward("autotune_launch", 0.9)})
    [claim] = _evidence("GEMM heuristics", [_view(linker, TUNING)], linker, recurring)
    assert claim.subject.id == "autotune_launch" and claim.evidence.quote == TUNING
    unnamed = [_view(linker, "It searches every tile size, which causes long builds.")]
    assert _evidence("GEMM heuristics", unnamed, linker, recurring) == []


def test_a_named_sentence_that_only_mentions_the_node_in_passing_or_points_elsewhere_is_no_evidence():
    passing = "We tried several remedies, such as DRAM-bound kernel splitting, caching and tiling, which helped."
    pointer = "For details on why the matmul becomes DRAM-bound, see the previous section."
    linker = Linker({passing: _toward("memory_bandwidth", 0.6), pointer: _toward("memory_bandwidth", 0.6)})
    views = [_view(linker, passing), _view(linker, pointer)]
    assert _evidence("DRAM-bound kernels", views, linker) == []


def test_the_extractor_reads_the_subject_from_a_whole_document(tmp_path):
    """RuleExtractor.subject: the title's node from the body sentence that states a claim on it, not the title line."""
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
    from kskill.ingest.loaders import load_document

    path = tmp_path / "dram.md"
    path.write_text(f"# {DRAM_TITLE} with DRAM-bound kernels\n\n{MENTION}\n\n{DRAM_BOUND}\n")
    linker = Linker({DRAM_BOUND: _toward("memory_bandwidth", 0.5), MENTION: _toward("memory_bandwidth", 0.9)})
    extractor = RuleExtractor(linker, RuleSettings(learned=False))
    [claim] = extractor.subject(load_document(path), [])
    assert (claim.subject.id, claim.evidence.quote) == ("memory_bandwidth", DRAM_BOUND)


def test_a_bottleneck_only_the_title_names_is_no_remedys_side():
    """learned-25 (extract_rules._stated): under a title naming a bottleneck, a sentence naming only a technique states
    no remedy for it; it does when it names the bottleneck itself, or when a heading other than the title names it."""
    from kskill.ingest.extract_rules import _stated

    title = "Memory-bound kernels"
    text = "Each warp then reads its tile with shared-memory tiling, so that the loads are reused by every thread."
    linker = Linker({})
    bound = Mention("memory_bandwidth", "Bottleneck", 0, 0, True)

    def view(sentence: str, heading: str) -> SentenceView:
        return SentenceView(sentence, Span(sentence, "offset 0"), linker.mentions(sentence), [[bound]], [],
                            PassageLinks(), heading)

    def remedy(v: SentenceView) -> Claim:
        return Claim(EntityRef("Bottleneck", "memory_bandwidth"), "ADDRESSED_BY",
                     EntityRef("Technique", "shared_memory_tiling"), 0.7, v.span, "rules")

    under_title = view(text, title)
    assert _stated([remedy(under_title)], under_title, title) == []
    naming = view("When the kernel is memory-bound, " + text[0].lower() + text[1:], title)
    assert len(_stated([remedy(naming)], naming, title)) == 1
    under_section = view(text, "Memory-bound kernels in practice")
    assert len(_stated([remedy(under_section)], under_section, title)) == 1


def test_every_node_three_sentences_name_is_a_subject_too():
    """learned-29: not only the node named most; one named by three sentences or more (and not one named twice
    beside it)."""
    naming = {"autotune_launch": 5, "shared_memory_tiling": 3, "memory_bandwidth": 2}
    assert sorted(m.id for m in recurring_subjects(naming, KIND_OF)) == ["autotune_launch", "shared_memory_tiling"]
