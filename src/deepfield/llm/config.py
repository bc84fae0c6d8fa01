"""Which chat models a store uses: ``[llm]`` in deepfield.toml, with per-role overrides.

GAM found that small models write memos well but research badly, so the memorizer and the
researcher are configured separately::

    [llm]
    backend = "openai"              # the default; any registered backend name
    url = "http://localhost:11434/v1"
    model = "qwen2.5:14b"           # used by both roles unless overridden
    api_key_env = "OPENAI_API_KEY"

    [llm.memorizer]
    model = "qwen2.5:1.5b"          # cheaper model for writing

    [llm.researcher]
    model = "qwen2.5:32b"

No ``[llm]`` table (and no DEEPFIELD_LLM_* variables, which the CLI layers on top) means no
model: the memorizer and researcher run their offline algorithms. A url without any model is
an error, not offline: whoever set it meant a model to answer.

The built-in backend's keys are checked when the file is read, so a misspelt key or role table
is one clear error instead of a TypeError from the backend's constructor (or a setting that
silently does nothing); another registered backend's options are its own to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..config import CONFIG_FILE, read_config_file
from ..errors import OFFLINE_HINT, ConfigError
from ..httpjson import display_url
from .base import ChatModel, create_llm

Role = Literal["memorizer", "researcher"]
ROLES: tuple[Role, ...] = ("memorizer", "researcher")
_ENV_OPTIONS = ("url", "model", "api_key_env", "timeout", "max_retries")
OPENAI_KEYS = ("url", "model", "api_key_env", "timeout", "max_retries", "backoff",
               "max_backoff")
"""The documented keys of ``[llm]`` (besides ``backend``) and ``[llm.<role>]`` for the built-in
backend: OpenAIChat's options that make sense in a file (``api_key`` is left out so keys stay
in the environment; ``transport`` and ``sleep`` are for tests)."""
_STRING_KEYS = ("url", "model", "api_key_env")


@dataclass(frozen=True)
class LLMConfig:
    backend: str = "openai"
    options: dict[str, Any] = field(default_factory=dict)
    roles: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        return bool(self.options.get("model") or any(r.get("model") for r in self.roles.values()))

    def for_role(self, role: Role) -> dict[str, Any]:
        return {**self.options, **self.roles.get(role, {})}

    def with_env(self, env: Mapping[str, str]) -> LLMConfig:
        """Layer ``DEEPFIELD_LLM_*`` (and ``DEEPFIELD_LLM_MEMORIZER_MODEL`` /
        ``DEEPFIELD_LLM_RESEARCHER_MODEL``) over the file's settings."""
        options = dict(self.options)
        roles = {role: dict(values) for role, values in self.roles.items()}
        for key in _ENV_OPTIONS:
            value = env.get(f"DEEPFIELD_LLM_{key.upper()}")
            if value:
                options[key] = value
                # The environment is on top of the whole file: a role table's value would
                # otherwise win over it, and DEEPFIELD_LLM_URL would leave a role posting to
                # the file's server.
                for values in roles.values():
                    values.pop(key, None)
        for role in ROLES:
            value = env.get(f"DEEPFIELD_LLM_{role.upper()}_MODEL")
            if value:
                roles.setdefault(role, {})["model"] = value
        backend = env.get("DEEPFIELD_LLM_BACKEND") or self.backend
        return LLMConfig(backend, options, roles)


def load_llm_config(root: Path) -> LLMConfig:
    path = root / CONFIG_FILE
    data = read_config_file(root)
    if data is None:
        return LLMConfig()
    section = data.get("llm", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [llm] must be a table")
    backend = section.get("backend", "openai")
    if not isinstance(backend, str) or not backend:
        raise ConfigError(f"{path}: llm.backend must be a backend name")
    roles: dict[str, dict[str, Any]] = {}
    options: dict[str, Any] = {}
    for key, value in section.items():
        if key in ROLES:
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: [llm.{key}] must be a table")
            roles[key] = dict(value)
            _check_keys(path, f"llm.{key}", roles[key], backend)
        elif isinstance(value, dict):
            raise ConfigError(
                f"{path}: unknown table [llm.{key}] (the roles are "
                f"{', '.join(f'[llm.{role}]' for role in ROLES)})")
        elif key != "backend":
            options[key] = value
    _check_keys(path, "llm", options, backend)
    return LLMConfig(backend, options, roles)


def _check_keys(path: Path, table: str, options: dict[str, Any], backend: str) -> None:
    if backend != "openai":
        return
    for key, value in options.items():
        if key not in OPENAI_KEYS:
            raise ConfigError(
                f"{path}: unknown [{table}] key {key!r} (known: {', '.join(OPENAI_KEYS)})",
                "see the [llm] section of docs/API.md")
        if key in _STRING_KEYS and not isinstance(value, str):
            raise ConfigError(f"{path}: {table}.{key} must be a string, not {value!r}")


def build_llm(config: LLMConfig, role: Role) -> ChatModel | None:
    """The chat model for ``role``, or None when no model is configured (offline)."""
    options = config.for_role(role)
    if not options.get("model"):
        # Any role's url counts: [llm.memorizer] url alone left `research` offline.
        url = options.get("url") or next(
            (values["url"] for values in config.roles.values() if values.get("url")), None)
        if url and not config.configured:
            # A url alone used to run offline without a word; whoever set it meant a model.
            raise ConfigError(
                f"an LLM url is set ({display_url(str(url))}) but no model",
                "set `model` under [llm] in deepfield.toml or DEEPFIELD_LLM_MODEL, "
                + OFFLINE_HINT)
        return None
    return create_llm(config.backend, **options)
