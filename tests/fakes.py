"""Test doubles shared by every test: one deterministic embedder (registered like a real
backend). The scripted OpenAI-compatible HTTP server lives in fake_openai.py."""

from __future__ import annotations

import hashlib
import re
from typing import Any, ClassVar

import numpy as np

from deepfield.embed.base import Embedder, Kind, Vectors, register_embedder

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

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        assert self.dim is not None
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


def register() -> None:
    register_embedder("fake", FakeEmbedder)
