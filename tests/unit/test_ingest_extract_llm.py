"""The LLM extractor through the brain's endpoint (retries, accounting) against a scripted
OpenAI-compatible fake (no network): schema, quotes, vocabulary, classified failures, usage."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kskill.agents.brains import ChatEndpoint, RetryPolicy
from kskill.ingest.errors import ExtractionError
from kskill.ingest.extract_llm import SCHEMA, SYSTEM, LLMExtractor
from kskill.ingest.loaders import load_document

NODES = [{"id": "memory_bandwidth", "kind": "Bottleneck", "name": "DRAM bandwidth bound"},
         {"id": "kernel_fusion", "kind": "Technique", "name": "Pointwise kernel fusion"}]
TEXT = ("# Guide\n\nFusing the pointwise chain removes DRAM round trips when the kernel is memory-bound.\n\n"
        "Stream-K balances GEMM work across SMs and needs static shapes.\n")


class ScriptedClient:
    """Stands in for openai.OpenAI: returns the scripted replies in order and records the requests."""

    def __init__(self, *replies, finish: str = "stop"):
        self.replies = list(replies)
        self.finish = finish
        self.requests: list[dict] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **request):
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=reply),
                                                        finish_reason=self.finish)],
                               usage=SimpleNamespace(prompt_tokens=400, completion_tokens=90))


def claim(**fields) -> dict:
    base = {"subject": {"kind": "Bottleneck", "id": "memory_bandwidth", "name": "memory bound", "description": ""},
            "relation": "ADDRESSED_BY", "object": None, "condition": None, "gain": None, "confidence": 0.9,
            "quote": "Fusing the pointwise chain removes DRAM round trips when the kernel is memory-bound."}
    base.update(fields)
    return base


@pytest.fixture
def doc(tmp_path: Path):
    path = tmp_path / "guide.md"
    path.write_text(TEXT)
    return load_document(path)


def extractor(client) -> LLMExtractor:
    endpoint = ChatEndpoint(client, "test-model", retry=RetryPolicy(attempts=2, base_delay_s=0), sleep=lambda s: None)
    return LLMExtractor(endpoint, NODES, ["static_shapes", "has_gemm"])


def test_claims_are_kept_when_quote_schema_and_vocabulary_agree(doc):
    stream_k = {"kind": "Technique", "id": "", "name": "Stream-K", "description": "Balance GEMM work over SMs."}
    reply = json.dumps({"claims": [
        claim(object={"kind": "Technique", "id": "kernel_fusion", "name": "fusion", "description": ""}),
        claim(subject=stream_k, relation="REQUIRES", condition={"metric": "static_shapes", "op": "is_true"},
              quote="Stream-K balances GEMM work across SMs and needs static shapes."),
    ]})
    client = ScriptedClient(reply)
    llm = extractor(client)
    got = {c.triple: c for c in llm.extract(doc)}
    assert set(got) == {("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion"),
                        ("new:stream-k", "REQUIRES", "static_shapes is_true")}
    assert got[("memory_bandwidth", "ADDRESSED_BY", "kernel_fusion")].evidence.location.startswith("section Guide, offset")
    request = client.requests[0]
    assert request["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "kernel_fusion" in request["messages"][1]["content"]
    assert llm.endpoint.used.tokens == 490 and llm.endpoint.used.calls == 1


def test_invented_quotes_unknown_metrics_and_wrong_kinds_are_dropped(doc):
    reply = json.dumps({"claims": [
        claim(object={"kind": "Technique", "id": "kernel_fusion", "name": "f", "description": ""},
              quote="Fusion always gives a 10x speedup."),  # not in the text
        claim(subject={"kind": "Technique", "id": "kernel_fusion", "name": "f", "description": ""},
              relation="REQUIRES", condition={"metric": "moon_phase", "op": "is_true"}),
        claim(object={"kind": "Bottleneck", "id": "memory_bandwidth", "name": "m", "description": ""}),
    ]})
    assert extractor(ScriptedClient(reply)).extract(doc) == []


def test_fenced_json_is_accepted(doc):
    reply = "```json\n" + json.dumps({"claims": []}) + "\n```"
    assert extractor(ScriptedClient(reply)).extract(doc) == []


@pytest.mark.parametrize("replies, problem", [
    (["I think fusion helps."], r"not whole JSON \(bad_json\)"),
    (['{"claims": [{"subject": {"kind": "Bottleneck", "id": "memory_band'], r"not whole JSON \(truncated_json\)"),
    ([json.dumps({"claims": [{"relation": "CAUSES"}]})], r"does not fit the claim schema \(schema\)"),
    ([ConnectionError("refused")] * 2, r"endpoint failed \(connection\)"),
])
def test_bad_answers_and_endpoint_failures_are_classified_extraction_errors(doc, replies, problem):
    with pytest.raises(ExtractionError, match=problem):
        extractor(ScriptedClient(*replies)).extract(doc)


def test_an_answer_cut_at_its_token_limit_is_truncated_json(doc):
    with pytest.raises(ExtractionError, match=r"truncated_json"):
        extractor(ScriptedClient('{"claims": [], "x": ["a", "b"', finish="length")).extract(doc)


def test_a_small_context_gets_smaller_chunks(doc):
    endpoint = ChatEndpoint(ScriptedClient(), "m")
    roomy = LLMExtractor(endpoint, NODES, ["has_gemm"])
    small = LLMExtractor(endpoint, NODES, ["has_gemm"], prompt_chars=2500)
    assert roomy.chunk_chars == 6000 and 600 <= small.chunk_chars < 2500
    assert len(SYSTEM) + len(small._user("x" * small.chunk_chars)) <= 2500  # the text plus instructions fit
