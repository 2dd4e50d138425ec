"""Entity resolution: exact ids and names merge, retrieval's "same entity" merges, the rest is proposed."""

from __future__ import annotations

from kskill.ingest.claims import EntityRef
from kskill.ingest.resolve import Resolver, slug
from kskill.retrieval import Retriever, SearchRecord

NODES = [{"id": "cuda_graph", "kind": "Technique", "name": "CUDA graph capture"},
         {"id": "tail_effect", "kind": "Bottleneck", "name": "Tail effect"}]


def test_exact_id_and_name_merge():
    r = Resolver(NODES)
    assert r.resolve(EntityRef("Technique", "cuda_graph")).merged
    by_name = r.resolve(EntityRef("Technique", name="CUDA Graph Capture"))
    assert by_name.merged and by_name.ref.id == "cuda_graph"


def test_unknown_candidate_becomes_a_proposal_and_later_mentions_merge_into_it():
    r = Resolver(NODES)
    first = r.resolve(EntityRef("Technique", name="Stream-K decomposition"))
    assert not first.merged and first.ref.id == "stream_k_decomposition"
    again = r.resolve(EntityRef("Technique", name="stream-k decomposition"))
    assert again.ref.id == "stream_k_decomposition"


def test_an_id_of_another_kind_is_not_reused():
    r = Resolver(NODES)
    clash = r.resolve(EntityRef("Technique", name="Tail effect"))
    assert not clash.merged and clash.ref.id == "tail_effect_2"


def test_retrieval_same_entity_score_merges_a_paraphrase():
    records = [SearchRecord("cuda_graph", "Technique", "CUDA graph capture",
                            "CUDA graph capture. Record kernel launches once and replay them to cut launch overhead.")]
    r = Resolver(NODES, Retriever(records))  # lexical ranking: no model needed
    paraphrase = r.resolve(EntityRef("Technique", name="CUDA graphs replay",
                                     description="Record kernel launches once and replay them to cut launch overhead."))
    assert paraphrase.merged and paraphrase.ref.id == "cuda_graph" and paraphrase.score is not None
    unrelated = r.resolve(EntityRef("Technique", name="FP8 quantization", description="Store weights in 8 bits."))
    assert not unrelated.merged


def test_slug():
    assert slug("Stream-K: work-centric GEMM!") == "stream_k_work_centric_gemm"
    assert slug("???") == "unnamed"


def test_proposals_the_graph_holds_and_those_proposed_since_are_known_for_proposals():
    held = {"id": "stream_k_decomposition", "kind": "Technique", "name": "Stream-K", "status": "proposed"}
    r = Resolver([*NODES, held])
    assert r.resolve(EntityRef("Technique", name="stream-k")).ref.id in r.proposed
    new = r.resolve(EntityRef("Technique", name="Warp braiding"))
    assert not new.merged and r.proposed == {"stream_k_decomposition", "warp_braiding"}
    assert r.resolve(EntityRef("Technique", name="CUDA graph capture")).ref.id not in r.proposed
