"""Fake 384-d vectors with a sentence encoder's kind of structure, for bench/scale.py.

The tests' FakeEmbedder hashes each word to one of 384 signed buckets: a chunk's vector is its
bag of words, so a query's nearest chunks are those sharing its words, scattered over the whole
space. That is the worst case for an approximate nearest-neighbour index (IVF partitions are
k-means clusters, and such neighbours belong to no cluster), and unlike any real text encoder,
whose vectors gather by what texts are about. These vectors model that: every word of
bench/corpus.py gets a fixed random unit vector, pulled towards the centroid of each topic it
belongs to; a text's vector is the normalised, weighted sum of its words' vectors (function
words weigh a tenth). Pages of one topic then lie near each other, and a query aimed at a page
near that page's topic, as with a real model. bench/scale.py reports ANN recall on both kinds.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, ClassVar

import numpy as np
from corpus import FUNCTION_WORDS, Corpus

from tests.fakes import FakeEmbedder

TOPIC_PULL = 1.0
"""Weight of the topic centroid against the word's own direction (1.0: equal)."""
FUNCTION_WEIGHT = 0.1
_WORD = re.compile(r"\w+")


class TopicFakeEmbedder(FakeEmbedder):
    """Deterministic vectors with topic structure (see the module docstring)."""

    name: ClassVar[str] = "fake-topic"
    batch_size: ClassVar[int] = 4096

    def __init__(self, corpus: Corpus | None = None, dim: int = 384) -> None:
        super().__init__(dim, f"fake-topic-{dim}-v1")
        corpus = corpus or Corpus()
        rng = np.random.default_rng([corpus.seed, 0x70])
        centroids = _unit(rng.standard_normal((len(corpus.topics), dim)))
        members: dict[str, list[int]] = {}
        for number, words in enumerate(corpus.topics):
            for word in words:
                members.setdefault(word.lower(), []).append(number)
        self._words: dict[str, int] = {}
        rows: list[Any] = []
        function = {w.lower() for w in FUNCTION_WORDS}
        self._weights: list[float] = []
        for word in [str(w).lower() for w in corpus.vocab]:
            if word in self._words:
                continue
            own = self._random(word)
            topics = members.get(word)
            if topics:
                own = _unit(own + TOPIC_PULL * centroids[topics].sum(axis=0))
            self._words[word] = len(rows)
            rows.append(own)
            self._weights.append(FUNCTION_WEIGHT if word in function else 1.0)
        self._rows = rows
        self._matrix = np.vstack(rows).astype(np.float32)

    def _random(self, word: str) -> Any:
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        return _unit(np.random.default_rng(seed).standard_normal(self.dim or 384))

    def _row(self, word: str) -> int:
        row = self._words.get(word)
        if row is None:  # names, numbers, rare words: a direction of their own
            row = self._words[word] = len(self._rows)
            self._rows.append(self._random(word))
            self._weights.append(1.0)
        return row

    def embed_batch(self, texts: list[str], kind: Any) -> Any:
        from scipy.sparse import csr_matrix

        self.calls.append((kind, len(texts)))
        self.texts_embedded += len(texts)
        ids: list[int] = []
        starts: list[int] = [0]
        for text in texts:  # a text without a word gets the empty word's direction
            ids.extend(self._row(w) for w in (_WORD.findall(text.lower()) or [""]))
            starts.append(len(ids))
        if len(self._rows) > len(self._matrix):
            self._matrix = np.vstack(self._rows).astype(np.float32)
        weights = np.asarray(self._weights, dtype=np.float32)[ids]
        bag = csr_matrix((weights, np.asarray(ids), np.asarray(starts)),
                         shape=(len(texts), len(self._matrix)))
        return np.asarray(bag @ self._matrix, dtype=np.float32)


def _unit(vectors: Any) -> Any:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
