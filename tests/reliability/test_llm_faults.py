"""LLM faults: timeouts, bursts of 429, server errors, bodies that are not a completion, dropped
connections, and replies that are cut off or garbage. Each ends in a bounded number of requests
and a classified failure, and an optimization run against such an endpoint goes on and finishes.

The endpoint is a real HTTP server on loopback (http.server in a thread) that misbehaves on
purpose, request by request, as its script says; kskill talks to it through the real `openai`
client, as it would to any OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import kskill
from kskill.agents.brains import (
    BrainUnavailable, ChatEndpoint, LlmBrain, NoUsableCode, RecipeBrain, RetryPolicy, SeedTask, open_client)
from kskill.config import load_settings
from kskill.ingest.extract_llm import AnswerError, LLMExtractor
from kskill.ingest.loaders import load_document
from kskill.run_state import LoopConfig
from kskill.session import start
from kskill.trajectory import Trajectory

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

GOOD = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.sigmoid(torch.tanh(torch.nn.functional.gelu(x + y)) * 2.0 + 1.0) - 0.5
"""
EXAMPLE = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"
TIMEOUT_S = 0.5


class FaultyEndpoint(ThreadingHTTPServer):
    """Answers POST /v1/chat/completions with the next act of its script (the default when it runs out)."""

    daemon_threads = True

    def __init__(self, script: list[str], default: str = "500"):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.default = list(script), default
        self.requests: list[str] = []  # the act each request got
        self.lock = threading.Lock()

    def next_act(self) -> str:
        with self.lock:
            act = self.script.pop(0) if self.script else self.default
            self.requests.append(act)
            return act

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: FaultyEndpoint

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        act, _, arg = self.server.next_act().partition(":")
        if act == "slow":  # longer than the client's timeout
            time.sleep(TIMEOUT_S * 4)
            return self._json(200, completion(GOOD))
        if act == "429":
            return self._json(429, {"error": {"message": "rate limited"}}, {"Retry-After": arg or "0.05"})
        if act == "500":
            return self._json(500, {"error": {"message": "overloaded"}})
        if act == "garbage":  # a proxy's error page with status 200
            return self._send(200, b"<html><body>upstream hiccup</body></html>", "text/html")
        if act == "cut_json":  # a completion body cut short
            return self._send(200, json.dumps(completion(GOOD)).encode()[:60], "application/json")
        if act == "drop":  # the connection closes with no answer
            self.close_connection = True
            self.connection.shutdown(2)
            return None
        if act == "length":  # the model stopped at its token limit mid-code
            return self._json(200, completion(f"```python\n{GOOD[:90]}", finish="length"))
        if act == "prose":
            return self._json(200, completion("I would fuse these operations into a single kernel."))
        if act == "text":
            return self._json(200, completion(arg))
        return self._json(200, completion(f"Here it is:\n```python\n{GOOD}```"))

    def _json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def completion(text: str, finish: str = "stop") -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "faulty",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160}}


@pytest.fixture
def endpoint() -> Iterator[callable]:
    servers: list[FaultyEndpoint] = []

    def make(script: list[str], default: str = "500") -> FaultyEndpoint:
        server = FaultyEndpoint(script, default)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def brain_for(server: FaultyEndpoint, attempts: int = 3, **kwargs) -> LlmBrain:
    client = open_client(server.base_url, "test-key", timeout_s=TIMEOUT_S)
    return LlmBrain(client, "faulty", retry=RetryPolicy(attempts=attempts, base_delay_s=0.05, max_delay_s=0.5),
                    **kwargs)


SEED = SeedTask(EXAMPLE.read_text(), "pointwise_chain")


def test_timeouts_are_retried_a_bounded_number_of_times_then_classified(endpoint):
    server = endpoint([], default="slow")
    brain = brain_for(server, attempts=3)
    began = time.monotonic()
    with pytest.raises(BrainUnavailable) as caught:
        brain.seed(SEED)
    assert caught.value.reason == "timeout" and len(server.requests) == 3
    assert time.monotonic() - began < 3 * TIMEOUT_S + 3.0  # bounded: three timeouts and two short waits
    assert brain.used.failed == 3 and brain.used.calls == 0


def test_a_burst_of_429_is_ridden_out_honouring_retry_after(endpoint):
    server = endpoint(["429:0.2", "429:0.2", "429:0.2"], default="ok")
    brain = brain_for(server, attempts=5)
    began = time.monotonic()
    draft = brain.seed(SEED)
    assert draft.source == GOOD and server.requests == ["429:0.2"] * 3 + ["ok"]
    assert time.monotonic() - began >= 0.6  # the server's Retry-After was waited out each time
    assert brain.used.failed == 3 and brain.used.calls == 1 and brain.used.tokens == 160


def test_a_burst_longer_than_the_retries_is_classified_rate_limit(endpoint):
    server = endpoint([], default="429:3600")  # an absurd Retry-After is capped by the policy
    brain = brain_for(server, attempts=3)
    began = time.monotonic()
    with pytest.raises(BrainUnavailable) as caught:
        brain.seed(SEED)
    assert caught.value.reason == "rate_limit" and len(server.requests) == 3
    assert time.monotonic() - began < 5.0


@pytest.mark.parametrize("act, reason", [
    ("500", "server_error"), ("garbage", "bad_response"), ("cut_json", "bad_response"), ("drop", "connection")])
def test_broken_answers_are_retried_then_classified(endpoint, act, reason):
    server = endpoint([], default=act)
    with pytest.raises(BrainUnavailable) as caught:
        brain_for(server, attempts=2).seed(SEED)
    assert caught.value.reason == reason and len(server.requests) == 2


@pytest.mark.parametrize("act", ["garbage", "cut_json", "drop", "500"])
def test_one_broken_answer_then_a_good_one_is_a_good_reply(endpoint, act):
    server = endpoint([act], default="ok")
    assert brain_for(server).seed(SEED).source == GOOD and server.requests == [act, "ok"]


@pytest.mark.parametrize("act, reason", [
    ("length", "truncated"), ("prose", "prose"), ("text:```python\nclass ModelNew(nn.Module:\n```", "syntax"),
    ("text:```python\nclass Fast(nn.Module):\n    pass\n```", "wrong_class"),
    ("text:```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    forward = torch.compile(torch.add)\n```",
     "shortcut")])
def test_bad_replies_are_classified_once_not_retried(endpoint, act, reason):
    server = endpoint([act], default="ok")
    with pytest.raises(NoUsableCode) as caught:
        brain_for(server).seed(SEED)
    assert caught.value.reason == reason and len(server.requests) == 1  # the same prompt would get the same reply


@pytest.mark.parametrize("text, reason", [
    ('{"claims": [{"subject": {"kind": "Technique", "id": "kernel_fu', "truncated_json"),
    ("Sure! The text says fusion helps.", "bad_json"),
    ('{"claims": [{"relation": "CAUSES"}]}', "schema")])
def test_the_extractor_classifies_bad_json(endpoint, tmp_path, text, reason):
    server = endpoint([f"text:{text}"], default="ok")
    client = open_client(server.base_url, "test-key", timeout_s=TIMEOUT_S)
    extractor = LLMExtractor(ChatEndpoint(client, "faulty", retry=RetryPolicy(attempts=2, base_delay_s=0.05)),
                             [{"id": "kernel_fusion", "kind": "Technique", "name": "fusion"}], ["has_gemm"])
    doc = tmp_path / "note.md"
    doc.write_text("# Fusion\n\nFusing pointwise kernels keeps intermediates in registers.\n")
    with pytest.raises(AnswerError) as caught:
        extractor.extract(load_document(doc))
    assert caught.value.reason == reason and len(server.requests) == 1


def test_an_optimization_run_goes_on_through_every_fault(endpoint, store, tmp_path):
    """Seed: a timeout then a burst of 429 past the retries (the endpoint is unavailable);
    then garbage, a reply cut at its token limit and prose. The recipe brain stands in for each
    failed step, the trajectory says why, and the run finishes with every attempt in the graph."""
    server = endpoint(["slow", "429:0.05", "429:0.05",  # seed: unavailable after 3 requests
                       "garbage", "length",  # first optimization: a bad body is retried, then a cut-off reply
                       "prose"], default="prose")
    brain = brain_for(server, attempts=3, fallback=RecipeBrain(), cache_dir=tmp_path / "cache")
    config = LoopConfig(brain="llm", iterations=2, trials=1, cpu_timing_reps=2, retrieval="lexical", device="cpu")
    state = start(store, load_settings(), EXAMPLE, config, tmp_path / "run", brain=brain)

    assert Trajectory(store).run(state.run_id)["status"] == "finished"
    written = [a for a in sorted(state.attempts.values(), key=lambda a: a.n) if a.kind != "reference"]
    assert written and all(a.fallback is not None for a in written)
    assert written[0].kind == "seed" and written[0].fallback.reason == "rate_limit"
    reasons = [a.fallback.reason for a in written[1:]]
    assert reasons[:1] == ["truncated"] and set(reasons) <= {"truncated", "prose"}
    assert (state.attempt_dir(written[1].n) / "llm_reply.txt").read_text().startswith("```python")
    # nothing lost: every attempt of the run is in the graph with its fallback record
    rows = {r["n"]: r for r in Trajectory(store).attempts(state.run_id)}
    assert sorted(rows) == sorted(state.attempts)
    for a in written:
        assert json.loads(rows[a.n]["attempt"]["params"])["fallback"]["reason"] == a.fallback.reason
    summary = json.loads((state.out_dir / "run.json").read_text())
    assert summary["usage"]["failed"] == brain.used.failed >= 4
    assert sum(u["calls"] for u in summary["usage_by_agent"].values()) == summary["usage"]["calls"]
    report = (state.out_dir / "report.md").read_text()
    assert "## LLM usage" in report and "recipes wrote it; the LLM failed (rate_limit)" in report
