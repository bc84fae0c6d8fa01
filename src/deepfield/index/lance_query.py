"""The LanceDB queries a search of a field's dataset runs (lance_backend.py): BM25 over the
chunks' text, nearest neighbours by vector, and exact cosines of keyword candidates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cjk import cjk_query_terms
from .keyword import query_terms

if TYPE_CHECKING:
    from ..embed.base import Vectors
    from .backend import Hits

NPROBES = 16
"""IVF partitions searched per vector query: all of them up to 8M chunks
(lance_table.ANN_PARTITION_ROWS)."""
EF = 400
"""HNSW search beam (bench/scale.py --ann-sweep: recall against latency)."""
REFINE = 1
"""Re-rank the candidates with their stored float32 vectors (the index holds 8-bit ones), so
the cosines handed to fusion are exact."""
HYBRID_NEAREST = 100
"""Nearest chunks a hybrid search asks of the vector index: its keyword candidates get their
cosines anyway (``scored``), and a chunk past the 100th by cosine that no keyword matched
does not reach the top results; each one more costs a refined (exact) distance."""
__all__ = ["EF", "HYBRID_NEAREST", "NPROBES", "REFINE", "keyword_rows", "scored",
           "vector_query"]


def vector_query(table: Any, vector: Vectors, limit: int) -> Any:
    """LanceDB's nearest-neighbour query for ``vector`` (dot product of unit vectors):
    every partition's HNSW graph with beam EF, candidates re-ranked with the stored
    vectors (docs/SCALE.md measures the recall against exact search)."""
    import numpy as np

    return table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector") \
        .distance_type("dot").nprobes(NPROBES).ef(EF).refine_factor(REFINE).limit(limit)


def keyword_rows(table: Any, query: str, limit: int, with_vectors: bool) -> Any:
    """BM25 candidates (key, score, and ``with_vectors`` their vectors); None: no terms."""
    from lancedb.query import MatchQuery

    terms = [*query_terms(query), *cjk_query_terms(query)]
    if not terms:
        return None
    columns = ["key", "_score", *(["vector"] if with_vectors else [])]
    return table.search(MatchQuery(" ".join(terms), "text"), query_type="fts") \
        .with_row_id(True).select(columns).limit(limit).to_arrow()


def scored(rows: Any, query_vector: Vectors) -> Hits:
    """(key, exact cosine) of ``rows`` (which hold their vectors)."""
    import numpy as np

    flat = rows["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = np.asarray(flat, dtype=np.float32).reshape(rows.num_rows, -1)
    scores = matrix @ np.asarray(query_vector, dtype=np.float32)
    return list(zip(rows["key"].to_pylist(), scores.tolist(), strict=True))
