"""One real llama.cpp server per test session for the `-m llm` tier (kskill.eval.llm_server):
loopback, fixed seed, a small context; nothing downloaded. Where the dev extra is not installed
the tier is skipped, saying so; under CI (CI set) that is a failure instead."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kskill.eval.llm_server import LocalServer, ServerUnavailable, start_server

CONTEXT_TOKENS = 4096
REPLY_TOKENS = 128  # few tokens per reply: the tier's time is mostly the model's


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    try:
        server = start_server(tmp_path_factory.mktemp("llama-server"), context_tokens=CONTEXT_TOKENS)
    except ServerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the llm tier must run in CI: {exc}")
        pytest.skip(f"no local llama.cpp server: {exc}")
    print(f"\nllama-server healthy in {server.start_seconds:.1f} s")
    yield server
    server.stop()


@pytest.fixture
def llm_env(llm_server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment that points kskill at the local server, set for the test."""
    env = {**llm_server.environment(), "KSKILL_LLM_CONTEXT": str(CONTEXT_TOKENS),
           "KSKILL_LLM_REPLY_TOKENS": str(REPLY_TOKENS), "KSKILL_LLM_TIMEOUT": "240"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
