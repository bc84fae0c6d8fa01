"""Dense retrieval over one field: every chunk vector in one matrix, page vectors as a prefilter.

Small fields are searched exactly: one dot product per chunk (einsum, single-threaded; numpy's
BLAS path waited on its thread pool on a busy 2-core machine). Large fields are searched in two
stages: the spec's whole-page vectors pick the PROBE_PAGES most similar pages, then only their
chunks (and those of pages still without a page vector) are scored exactly. This keeps dense
search proportional to the number of pages rather than chunks (~10 per page in the synthetic
benchmark); docs/BENCHMARKS.md measures the speed and, on LoCoMo with a forced small probe,
what it costs in recall. Chunks found by BM25 are always scored exactly, whichever stage runs.

The arrays are loaded from SQLite once per index generation and kept memory-mapped in a cache
file beside the index (``.deepfield/<model-code>.vectors``), so a new process maps them instead
of reading every row again.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..embed.base import Vectors
from ..errors import ModelMismatchError
from .db import get_meta

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
else:
    Ints = Any

TWO_STAGE_MIN_ROWS = 50_000
"""Below this many chunk vectors an exact scan is fast enough (a few ms) and always exact."""
PROBE_PAGES = 256
"""Pages whose chunks are scored in the second stage."""


@dataclass
class DenseIndex:
    """The chunk and page vectors of one index generation."""

    generation: int
    ids: Ints
    """Chunk ids, ascending; row i of ``matrix`` is chunk ``ids[i]``."""
    docs: Ints
    """The page (doc id) of each chunk row."""
    matrix: Vectors
    page_docs: Ints
    """Doc ids that have a whole-page vector, row-aligned with ``pages``."""
    pages: Vectors

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, conn: sqlite3.Connection, generation: int, cache: Path | None) -> DenseIndex:
        import numpy as np

        instance = get_meta(conn, "instance") or ""
        if cache is not None:
            arrays = _read_cache(cache, generation, instance)
            if arrays is not None:
                # Plain ndarray views of the maps: same memory, but element access without
                # numpy.memmap's Python-level __getitem__ (~1 ms per search at 100k chunks).
                return cls(generation, **{k: v.view(np.ndarray) for k, v in arrays.items()})
        rows = conn.execute(
            # An empty vector marks a chunk the model could not encode (index/vectors.py).
            "SELECT id, doc_id, embedding FROM df_chunks WHERE length(embedding) > 0 "
            "ORDER BY id"
        ).fetchall()
        try:
            page_rows = conn.execute(
                "SELECT d.id, p.embedding FROM pages p JOIN df_docs d ON d.filename = p.filename "
                "WHERE d.page_embedded = 1 ORDER BY d.id"
            ).fetchall()
        except sqlite3.OperationalError:  # keyword-only index: no spec table
            page_rows = []
        arrays = {
            "ids": np.fromiter((r[0] for r in rows), np.int64, len(rows)),
            "docs": np.fromiter((r[1] for r in rows), np.int64, len(rows)),
            "matrix": _stack([r[2] for r in rows]),
            "page_docs": np.fromiter((r[0] for r in page_rows), np.int64, len(page_rows)),
            "pages": _stack([r[1] for r in page_rows]),
        }
        if cache is not None and len(rows):
            _write_cache(cache, generation, instance, arrays)
        return cls(generation, **arrays)

    # ------------------------------------------------------------------ search

    def similarities(self, query: Vectors, rows: Ints | None = None) -> Vectors:
        """Cosine of ``query`` to every chunk row (or to the given rows)."""
        import numpy as np

        if query.shape[0] != self.matrix.shape[1]:
            raise ModelMismatchError(
                f"query vector has {query.shape[0]} dimensions, the index {self.matrix.shape[1]}",
                "the embedder changed; run `deepfield reindex`",
            )
        matrix = self.matrix if rows is None else self.matrix[rows]
        result: Vectors = np.einsum("ij,j->i", matrix, query)
        return result

    def search(
        self, query: Vectors, limit: int, include: list[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` most similar chunks, best first, then the cosine of every chunk id in
        ``include`` not already listed (hybrid fusion needs it for keyword-only candidates)."""
        import numpy as np

        if not len(self.ids):
            return []
        found: list[tuple[int, float]] = []
        if limit > 0:
            rows = self._probe_rows(query)
            scores = self.similarities(query, rows)
            limit = min(limit, len(scores))
            if limit < len(scores):
                top = np.argpartition(-scores, limit)[:limit]
                top = top[np.argsort(-scores[top], kind="stable")]
            else:
                top = np.argsort(-scores, kind="stable")
            row_of = top if rows is None else rows[top]
            found = [(int(self.ids[r]), float(s))
                     for r, s in zip(row_of, scores[top], strict=True)]
        if include:
            listed = {item for item, _ in found}
            wanted = np.asarray(sorted(set(include) - listed), dtype=np.int64)
            at = np.clip(np.searchsorted(self.ids, wanted), 0, len(self.ids) - 1)
            present = at[self.ids[at] == wanted]  # chunks still waiting for a vector: skipped
            if len(present):
                exact = self.similarities(query, present)
                found += [(int(self.ids[r]), float(s)) for r, s in zip(present, exact, strict=True)]
        return found

    def _probe_rows(self, query: Vectors) -> Ints | None:
        """Rows to score in the second stage, or None for an exact scan of every row."""
        import numpy as np

        if len(self.ids) < TWO_STAGE_MIN_ROWS or len(self.page_docs) <= PROBE_PAGES:
            return None
        page_scores: Vectors = np.einsum("ij,j->i", self.pages, query)
        best = self.page_docs[np.argpartition(-page_scores, PROBE_PAGES)[:PROBE_PAGES]]
        # A lookup table by doc id instead of np.isin: one vectorised gather per query.
        wanted = self._unpaged_mask().copy()
        wanted[best] = True
        rows: Ints = np.flatnonzero(wanted[self.docs])
        return rows

    def _unpaged_mask(self) -> Any:
        """By doc id: True for pages without a page vector yet (they cannot be ranked in the
        first stage, so they are always scored). Computed once per index generation."""
        import numpy as np

        mask = self.__dict__.get("_unpaged")
        if mask is None:
            size = int(max(self.docs.max(initial=0), self.page_docs.max(initial=0))) + 1
            mask = np.ones(size, dtype=bool)
            mask[self.page_docs] = False
            self.__dict__["_unpaged"] = mask
        return mask


def _stack(blobs: list[bytes]) -> Vectors:
    import numpy as np

    if not blobs:
        return np.zeros((0, 0), np.float32)
    flat = np.frombuffer(b"".join(blobs), dtype=np.float32)
    matrix: Vectors = flat.reshape(len(blobs), -1)
    return matrix


# ---------------------------------------------------------------------- the memory-mapped cache

_CACHE_MAGIC = b"DFVEC2\n"
_CACHE_ALIGN = 64
_ORDER = ("ids", "docs", "matrix", "page_docs", "pages")


def _read_cache(path: Path, generation: int, instance: str) -> dict[str, Any] | None:
    """The arrays memory-mapped from ``path``, if it was written for this generation."""
    import numpy as np

    try:
        with path.open("rb") as handle:
            if handle.read(len(_CACHE_MAGIC)) != _CACHE_MAGIC:
                return None
            size = int.from_bytes(handle.read(4), "little")
            header = json.loads(handle.read(size))
        if header.get("generation") != generation or header.get("instance") != instance:
            return None
        arrays: dict[str, Any] = {}
        for name in _ORDER:
            dtype, shape, offset = header["arrays"][name]
            if 0 in shape:
                arrays[name] = np.zeros(shape, dtype)
            else:
                arrays[name] = np.memmap(path, dtype, "r", offset=offset, shape=tuple(shape))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return arrays


def _write_cache(path: Path, generation: int, instance: str, arrays: dict[str, Any]) -> None:
    """Write the arrays for the next process (atomically); failing to is harmless."""
    import numpy as np

    blobs = []
    layout: dict[str, list[Any]] = {}
    offset = 4096  # room for the header; arrays start aligned after it
    for name in _ORDER:
        array = np.ascontiguousarray(arrays[name])
        dtype = "<i8" if array.dtype.kind == "i" else "<f4"
        data = array.astype(dtype, copy=False).tobytes()
        layout[name] = [dtype, list(array.shape), offset]
        blobs.append((offset, data))
        offset += -(-len(data) // _CACHE_ALIGN) * _CACHE_ALIGN
    header = json.dumps({"generation": generation, "instance": instance, "arrays": layout})
    head = _CACHE_MAGIC + len(header).to_bytes(4, "little") + header.encode()
    if len(head) > 4096:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        with tmp.open("wb") as handle:
            handle.write(head)
            for start, data in blobs:
                handle.seek(start)
                handle.write(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
