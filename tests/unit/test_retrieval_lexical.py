"""Tokenizing, jargon expansion and BM25 scoring of the lexical ranker."""

import numpy as np

from kskill.retrieval.lexical import BM25Index, ConceptMatcher, expand_query, stem, terms, words


def test_stem_merges_inflections():
    assert stem("tiles") == stem("tiling") == stem("tiled") == stem("tile")
    assert stem("launches") == stem("launch")
    assert stem("running") == "run"
    assert stem("loss") == "loss"  # -ss is not a plural


def test_words_split_camel_and_snake_case():
    assert words("cudaErrorIllegalAddress") == ["cuda", "error", "illegal", "address"]
    assert words("__shfl_down_sync") == ["shfl", "down", "sync"]


def test_jargon_and_plain_words_share_a_concept_term():
    assert "#shared_memory" in terms("SMEM tiling")
    assert "#shared_memory" in terms("stage the tile in shared memory")
    assert "#vectorized" in terms("float4 loads")
    assert "#shared_memory" not in terms("global memory traffic")


def test_longest_phrase_is_matched_at_each_position():
    matcher = ConceptMatcher({"a": ("A", ("memory",)), "b": ("B", ("shared memory",))})
    assert matcher.find(words("shared memory")) == ["b", "a"]


def test_expand_query_adds_plain_names_only_when_missing():
    assert expand_query("SMEM tiling") == "SMEM tiling (shared memory)"
    assert expand_query("shared memory tiling") == "shared memory tiling"
    assert expand_query("nothing jargon here") == "nothing jargon here"


def test_bm25_ranks_the_document_holding_the_rare_term_first():
    docs = [terms("global memory bandwidth"), terms("shared memory bank conflicts"), terms("launch overhead")]
    scores = BM25Index(docs).scores(terms("bank conflicts"))
    assert int(np.argmax(scores)) == 1
    assert scores[0] == 0 and scores[2] == 0
    assert 0 < scores[1] <= 1


def test_words_no_document_has_lower_the_score():
    index = BM25Index([terms("shared memory bank conflicts"), terms("launch overhead")])
    assert index.scores(terms("bank conflicts sourdough"))[0] < index.scores(terms("bank conflicts"))[0]


def test_empty_index_and_empty_query_score_nothing():
    assert BM25Index([]).scores(terms("anything")).shape == (0,)
    assert not BM25Index([terms("launch overhead")]).scores([]).any()
