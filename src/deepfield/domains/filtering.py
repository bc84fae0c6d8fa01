"""Search restricted to pages whose frontmatter passes :class:`~.atomic.Filters`.

The filter is applied before retrieval cuts its candidate lists, so a filtered search returns k
results whenever k matching pages exist, however far down the unfiltered ranking they would be:
the allowed pages are read from the index's stored frontmatter (one pass over ``df_docs``, plus
the field's taxonomy so that a category also finds pages filed below it), BM25
ranks every matching chunk and keeps the allowed ones, and the dense side scores exactly the
allowed chunks. Unfiltered searches never come here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import TaxonomyError
from .atomic import Filters
from .domain import whole_text_spans
from .taxonomy import TAXONOMY_FILE, Taxonomy, parse_taxonomy
from .templates import ROLE_KEY

if TYPE_CHECKING:
    from ..embed.base import Vectors
    from ..index import FieldIndex

__all__ = ["allowed_chunks", "filtered_retrieve"]

ALL_MATCHES = 1 << 62
"""LIMIT for the BM25 query: FTS5 scores every match for ORDER BY anyway."""


def allowed_chunks(
    index: FieldIndex, where: Filters, warnings: list[str] | None = None
) -> set[int]:
    """Ids of the chunks of pages whose frontmatter matches ``where`` (why the taxonomy was
    not used, when it could not be read, goes to ``warnings``)."""
    rows = [
        (doc_id, filename, json.loads(raw)) for doc_id, filename, raw in index.conn.execute(
            "SELECT id, filename, frontmatter FROM df_docs WHERE frontmatter != 'null'"
        )
    ]
    misfiled: list[str] = []
    below = (_below(index, where, rows, warnings, misfiled)
             if where.category or where.concept else None)
    docs = [doc_id for doc_id, _, frontmatter in rows if where.matches(frontmatter, below)]
    if not docs:
        if warnings is not None:  # why nothing passed, when the taxonomy can say
            warnings += misfiled
        return set()
    chunks = index.conn.execute(
        "SELECT id FROM df_chunks WHERE doc_id IN (SELECT value FROM json_each(?))",
        (json.dumps(docs),),
    )
    return {int(cid) for (cid,) in chunks}


def _below(
    index: FieldIndex, where: Filters, rows: list[tuple[int, str, Any]],
    warnings: list[str] | None = None, misfiled: list[str] | None = None,
) -> tuple[set[str], set[str]] | None:
    """Names under the wanted categories and concepts in the field's taxonomy (None when it
    has none, or one that cannot be read: filters then match page values only)."""
    names = [f for _, f, fm in rows if isinstance(fm, dict) and fm.get(ROLE_KEY) == "taxonomy"
             and not _later_part(fm)]
    # As role_pages chooses: taxonomy.md when it is one of them.
    chosen = TAXONOMY_FILE if TAXONOMY_FILE in names or not names else sorted(names)[0]
    path = index.field_dir / chosen
    try:
        text, spans = whole_text_spans(path.parent, path.name)
        taxonomy = parse_taxonomy(text, path.name, spans)
    except OSError:
        return None
    except TaxonomyError as exc:
        # Said, not swallowed: without the tree a category finds only pages filed under that
        # very name, and "no results" would read as "no such pages".
        if warnings is not None:
            warnings.append(f"{index.field_dir.name}/{exc.message}; the taxonomy could not be "
                            "read, so categories and concepts match the pages' own values only")
        return None
    if misfiled is not None:
        misfiled += _misfiled(index.field_dir.name, taxonomy, where)
    return (taxonomy.keys_below(where.category, categories=True),
            taxonomy.keys_below(where.concept, categories=False))


def _later_part(frontmatter: dict[str, Any]) -> bool:
    """A part after the first of a split page (it carries the page's role key too)."""
    part = frontmatter.get("part")
    return bool(frontmatter.get("split_from")) and isinstance(part, int) and part > 1


def _misfiled(field_name: str, taxonomy: Taxonomy, where: Filters) -> list[str]:
    """Why a filter may find nothing: --category names a concept of the taxonomy (or
    --concept one of its top categories), which pages are tagged with the other way."""
    notes = []
    for value in where.category:
        if not taxonomy.find(value, categories=True) and taxonomy.find(value, categories=False):
            notes.append(f"{field_name}/{taxonomy.filename}: {value!r} is a concept there, not "
                         f"a category (search with --concept {value!r})")
    for value in where.concept:
        if not taxonomy.find(value, categories=False) and taxonomy.find(value, categories=True):
            notes.append(f"{field_name}/{taxonomy.filename}: {value!r} is a top category there, "
                         f"not a concept (search with --category {value!r})")
    return notes


def filtered_retrieve(
    index: FieldIndex,
    query: str,
    query_vector: Vectors | None,
    candidates: int,
    mode: str,
    where: Filters,
    warnings: list[str] | None = None,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """Like ``search._retrieve`` (BM25 and dense candidates of one field), within ``where``."""
    allowed = allowed_chunks(index, where, warnings)
    if not allowed:
        return [], []
    found: list[tuple[int, float]] = []
    if mode != "vector" or query_vector is None:
        ranked = index.keyword(query, ALL_MATCHES)
        found = [(cid, score) for cid, score in ranked if cid in allowed][:candidates]
    if query_vector is None or mode == "bm25":
        return found, []
    scored = index.vectors().search(query_vector, 0, sorted(allowed))
    scored.sort(key=lambda pair: -pair[1])
    near = scored[:candidates]
    if mode == "hybrid":  # fusion wants the cosine of every BM25 candidate too
        listed = {cid for cid, _ in near}
        by_id = dict(scored)
        near += [(cid, by_id[cid]) for cid, _ in found if cid not in listed and cid in by_id]
    return found, near
