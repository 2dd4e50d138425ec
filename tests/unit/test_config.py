"""Settings come from defaults, kskill.toml and the environment, in that order."""

from pathlib import Path

import pytest

from kskill.config import load_settings
from kskill.graph_schema.errors import ConfigError


def test_defaults(tmp_path: Path):
    s = load_settings({"HOME": str(tmp_path)}, cwd=tmp_path)
    assert s.graph_uri == "embedded" and s.brain == "recipes"
    assert s.home == tmp_path / ".local" / "share" / "kskill"


def test_environment_beats_file(tmp_path: Path):
    (tmp_path / "kskill.toml").write_text('graph_uri = "bolt://file:7687"\nllm_model = "m-file"\n')
    s = load_settings({"KSKILL_HOME": str(tmp_path / "h"), "KSKILL_GRAPH_URI": "neo4j://env:7687"}, cwd=tmp_path)
    assert s.graph_uri == "neo4j://env:7687"
    assert s.llm_model == "m-file"
    assert s.config_file == str(tmp_path / "kskill.toml")


def test_unknown_key_names_the_key_and_the_known_ones(tmp_path: Path):
    (tmp_path / "kskill.toml").write_text('grpah_uri = "x"\n')
    with pytest.raises(ConfigError, match="unknown key 'grpah_uri'.*graph_uri"):
        load_settings({"KSKILL_HOME": str(tmp_path)}, cwd=tmp_path)


def test_broken_toml_is_reported(tmp_path: Path):
    (tmp_path / "kskill.toml").write_text("graph_uri = \n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({"KSKILL_HOME": str(tmp_path)}, cwd=tmp_path)


def test_missing_config_file_named_by_env(tmp_path: Path):
    with pytest.raises(ConfigError, match="not a file"):
        load_settings({"KSKILL_CONFIG": str(tmp_path / "nope.toml")}, cwd=tmp_path)


def test_secrets_are_masked(tmp_path: Path):
    s = load_settings({"KSKILL_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-very-secret-value",
                       "NEO4J_PASSWORD": "pw"}, cwd=tmp_path)
    shown = s.shown()
    assert "very-secret" not in str(shown)
    assert shown["openai_api_key"] == "****ue"
    assert shown["neo4j_password"] == "****"


def test_unknown_brain(tmp_path: Path):
    with pytest.raises(ConfigError, match="brain"):
        load_settings({"KSKILL_HOME": str(tmp_path), "KSKILL_BRAIN": "oracle"}, cwd=tmp_path)
