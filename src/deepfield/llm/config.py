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
model: the memorizer and researcher run their offline algorithms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..config import CONFIG_FILE, read_config_file
from ..errors import ConfigError
from .base import ChatModel, create_llm

Role = Literal["memorizer", "researcher"]
ROLES: tuple[Role, ...] = ("memorizer", "researcher")
_ENV_OPTIONS = ("url", "model", "api_key_env", "timeout", "max_retries")


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
        for key in _ENV_OPTIONS:
            value = env.get(f"DEEPFIELD_LLM_{key.upper()}")
            if value:
                options[key] = value
        roles = {role: dict(values) for role, values in self.roles.items()}
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
    roles: dict[str, dict[str, Any]] = {}
    options: dict[str, Any] = {}
    for key, value in section.items():
        if key in ROLES:
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: [llm.{key}] must be a table")
            roles[key] = dict(value)
        elif key != "backend":
            options[key] = value
    backend = section.get("backend", "openai")
    if not isinstance(backend, str) or not backend:
        raise ConfigError(f"{path}: llm.backend must be a backend name")
    return LLMConfig(backend, options, roles)


def build_llm(config: LLMConfig, role: Role) -> ChatModel | None:
    """The chat model for ``role``, or None when no model is configured (offline)."""
    options = config.for_role(role)
    if not options.get("model"):
        return None
    return create_llm(config.backend, **options)
