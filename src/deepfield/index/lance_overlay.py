"""Pages a reading replica's catalogue holds newer than the LanceDB dataset it searches.

A process that only reads a field's dataset (a served replica of a bucket store that does not
hold the indexer lease, or a CLI process while another one holds it) follows the field's
pages within a poll (bucket/poller.py), but sees the dataset change only after the indexer
has committed a round and the replica has copied it: seconds, more under load. Until then a
search answers for those pages from the process's own SQLite catalogue, which is synced from
the same pages before every search:

* the dataset's rows of a page that changed or went away since are left out;
* the page's current chunks are found by keywords in the catalogue (FTS5 BM25, restricted to
  those chunks) under the keys the dataset will give them (lance_table.chunk_key), so hits,
  grouping by page and reading them work as for any other chunk. They have no vector yet (a
  replica's catalogue computes none) and are counted as pending, as chunks written before
  their vectors are.

Once the dataset holds a page as the catalogue does, the page leaves the overlay. Comparing
the two costs a read of the dataset's ``pages`` table and of the catalogue's pages, once per
version of either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .backend import Hits, superseded
from .keyword import BODY_WEIGHT, CJK_WEIGHT, CONTEXT_WEIGHT, match_expression, query_terms
from .lance_table import chunk_key, page_id
from .sync import NOT_A_PAGE

if TYPE_CHECKING:
    from . import ChunkRow, FieldIndex

MAX_RANGES = 64
"""Runs of consecutive chunk ids searched one FTS5 query each (a rowid range keeps FTS5 from
scoring every match of a common term in a big field); more runs are searched as one range."""


@dataclass
class Overlay:
    """What the catalogue holds that the dataset does not (see the module docstring)."""

    stale: set[int] = field(default_factory=set)
    """Page ids whose dataset rows are out of date or of a page that is gone."""
    chunks: dict[int, int] = field(default_factory=dict)
    """Dataset-style key -> catalogue chunk id, of the pages newer than the dataset."""
    superseded: bool = False
    """Whether one of those pages is superseded."""

    def __bool__(self) -> bool:
        return bool(self.stale)

    def keyword(self, catalogue: FieldIndex, query: str, limit: int) -> Hits:
        """BM25 hits among the overlay's chunks, as (key, score), best first."""
        expression = match_expression(query, query_terms(query))
        if expression is None or not self.chunks:
            return []
        key_of = {cid: key for key, cid in self.chunks.items()}
        found: list[tuple[int, float]] = []
        for low, high in _runs(sorted(key_of)):
            rows = catalogue.conn.execute(
                "SELECT rowid, bm25(df_chunks_fts, ?, ?, ?) AS score FROM df_chunks_fts "
                "WHERE df_chunks_fts MATCH ? AND rowid BETWEEN ? AND ? ORDER BY score LIMIT ?",
                (BODY_WEIGHT, CONTEXT_WEIGHT, CJK_WEIGHT, expression, low, high, limit))
            found += [(key_of[rowid], -float(score)) for rowid, score in rows if rowid in key_of]
        found.sort(key=lambda pair: -pair[1])
        return found[:limit]

    def rows(self, catalogue: FieldIndex, keys: list[int]) -> dict[int, ChunkRow]:
        """The catalogue's chunks of ``keys`` (those in the overlay), under their keys."""
        wanted = {self.chunks[key]: key for key in keys if key in self.chunks}
        rows = catalogue.chunks(wanted)
        return {wanted[cid]: replace(row, id=wanted[cid],
                                     doc=replace(row.doc, id=page_id(row.doc.filename)))
                for cid, row in rows.items()}


def compare(catalogue: FieldIndex, states: dict[str, tuple[str, bool]]) -> Overlay:
    """The overlay of a catalogue against the dataset's page states (filename -> (sha256
    hex, complete), lance_table.LanceDataset.page_states)."""
    overlay = Overlay()
    fresh: dict[int, str] = {}
    present: set[str] = set()
    for doc_id, filename, sha in catalogue.conn.execute(
            f"SELECT id, filename, sha256 FROM df_docs WHERE page_embedded != {NOT_A_PAGE}"):
        present.add(filename)
        state = states.get(filename)
        if state is None or state[0] != bytes(sha).hex():
            fresh[int(doc_id)] = filename
            overlay.stale.add(page_id(filename))
    overlay.stale.update(page_id(name) for name in states if name not in present)
    ids = list(fresh)
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        marks = ",".join("?" * len(part))
        for cid, doc_id, ord_ in catalogue.conn.execute(
                f"SELECT id, doc_id, ord FROM df_chunks WHERE doc_id IN ({marks})", part):
            overlay.chunks[chunk_key(fresh[doc_id], ord_)] = int(cid)
        overlay.superseded = overlay.superseded or any(
            superseded(json.loads(text) if text else None) for (text,) in catalogue.conn.execute(
                f"SELECT frontmatter FROM df_docs WHERE id IN ({marks})", part))
    return overlay


def _runs(ids: list[int]) -> list[tuple[int, int]]:
    """Sorted ids as (first, last) runs of consecutive ids, at most MAX_RANGES of them."""
    runs: list[tuple[int, int]] = []
    for cid in ids:
        if runs and cid == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], cid)
        else:
            runs.append((cid, cid))
    if len(runs) > MAX_RANGES:
        return [(ids[0], ids[-1])]
    return runs
