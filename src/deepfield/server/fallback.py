"""The spec's search fallback: substring matches over filename, title and summary.

memoryfield says a server without a vector index MUST fall back to a case-insensitive substring
match over the filename, title and summary. deepfield always has a keyword index; where a
search runs on it alone (bm25 mode, page results) and finds fewer than ``k`` pages, the
substring matches fill the rest (Service._search_fields): pages whose name or memo contains
the query though BM25 did not rank them (part of a word, punctuation). Superseded pages are
left out, as every default search leaves them out.
"""

from __future__ import annotations

from typing import Any

from ..field import Field
from ..index import FieldIndex
from ..manage.activation import orphaned
from ..manage.supersede import is_superseded
from ..page import load_frontmatter_json


def substring_matches(field: Field, query: str, seen: set[tuple[str, str]],
                      limit: int) -> list[dict[str, Any]]:
    """The spec's fallback for servers without a vector index: pages whose filename, title or
    summary contains the query (case-insensitive), after the keyword results.

    SQLite scans the rows (a Python loop over 10k catalogue entries cost ~20 ms per search);
    its ``lower`` folds ASCII only, so a needle with other letters is matched in Python."""
    needle = " ".join(query.lower().split())
    if not needle or limit <= 0:
        return []
    return field.with_index(lambda index: _matches(field, index, needle, seen, limit))


def _matches(field: Field, index: FieldIndex, needle: str, seen: set[tuple[str, str]],
             limit: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if needle.isascii():
        match = ("SELECT filename, title, summary, frontmatter, uuid FROM df_docs WHERE "
                 "instr(lower(filename || char(10) || title || char(10) || "
                 "coalesce(summary, '')), ?) > 0 AND "
                 "coalesce(CASE WHEN json_valid(frontmatter) THEN json_extract(frontmatter, "
                 "'$.superseded_by') END, '') {} IN ('', '[]') "
                 "ORDER BY filename LIMIT ?")
        rows = index.conn.execute(match.format(""), (needle, limit + len(seen))).fetchall()
        # A superseded page whose successor is gone (deleted by hand) is shown, as in search.
        hidden = index.conn.execute(match.format("NOT"), (needle, limit + len(seen))).fetchall()
        if hidden:
            shown = orphaned(index, [r[0] for r in hidden])
            rows = sorted(rows + [r for r in hidden if r[0] in shown], key=lambda r: r[0])
        candidates = [(r[0], r[1], r[2], load_frontmatter_json(r[3]) if r[3] else None, r[4])
                      for r in rows]
    else:
        candidates = []
        for entry in index.catalogue():
            haystack = f"{entry.filename}\n{entry.title}\n{entry.summary or ''}".lower()
            if needle in haystack:
                doc = index.doc_by_filename(entry.filename)
                candidates.append((entry.filename, entry.title, entry.summary,
                                   doc.frontmatter if doc else None, doc.uuid if doc else None))
    for filename, title, summary, frontmatter, uuid in candidates:
        if (field.name, filename) in seen or (is_superseded(frontmatter)
                                               and not orphaned(index, [filename])):
            continue  # superseded: hidden here as in every default search (one rule)
        found.append({
            "filename": filename, "frontmatter": frontmatter, "score": 0.0,
            "field": field.name, "uuid": uuid, "title": title, "summary": summary,
            "match": "substring",
        })
        seen.add((field.name, filename))
        if len(found) >= limit:
            break
    return found
