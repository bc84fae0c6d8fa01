"""Search over one or more fields: keyword, vector or hybrid, returning stubs or chunk hits.

Candidates come from each field's index (BM25 over chunks, cosine over chunk vectors), are fused
across all requested fields at once (so scores are comparable between fields), and are returned
either per page (a stub: title, summary, best snippet with its heading path) or per chunk (the
unit an agent can quote with its line numbers). The JSON shape extends the spec's ``/search``
response: ``{"results": [{"filename", "frontmatter", "score", ...}]}``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from typing import TYPE_CHECKING, Any, Literal

from .confidence import SEARCH, Confidence, Line, assess
from .domains.atomic import Filters
from .domains.filtering import filtered_retrieve
from .errors import DeepfieldError, EmbeddingError
from .fusion import convex, max_normalized
from .index.budget import Deadline
from .index.health import heals_fields
from .index.keyword import query_terms
from .manage.activation import rerank

if TYPE_CHECKING:
    from .field import Field

Mode = Literal["bm25", "vector", "hybrid"]
Unit = Literal["page", "chunk"]
MODES: tuple[str, ...] = ("bm25", "vector", "hybrid")
UNITS: tuple[str, ...] = ("page", "chunk")

KEYWORD_WEIGHT = 0.35
"""Weight of BM25 in hybrid fusion; the rest is dense similarity (docs/DESIGN.md)."""
CANDIDATES = 200
"""Chunks taken from each retriever before fusion (100-200 measured equal to unlimited)."""
SNIPPET_CHARS = 280


@dataclass(frozen=True)
class Hit:
    """One search result: a page stub (unit=page) or a single chunk (unit=chunk)."""

    field: str
    filename: str
    uuid: str | None
    title: str
    summary: str | None
    frontmatter: dict[str, Any] | None
    score: float
    snippet: str
    """The best part of the chunk: a window around the first query term, or for a window of
    record lines (transcript turns, list items) the line that matches the query best."""
    snippet_line: int
    """Line of the page file where the snippet starts."""
    heading: str
    line_start: int
    line_end: int
    text: str
    """The whole matching chunk (the snippet is cut from it)."""
    matches: int = 1
    """How many of the page's chunks matched (page results); for chunk results, how many
    overlapping chunks pointed at this hit's line."""

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "frontmatter": self.frontmatter,
            "score": round(self.score, 6),
            "field": self.field,
            "uuid": self.uuid,
            "title": self.title,
            "summary": self.summary,
            "snippet": self.snippet,
            "snippet_line": self.snippet_line,
            "heading": self.heading,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "matches": self.matches,
        }


@dataclass
class SearchResponse:
    query: str
    mode: str
    unit: str
    k: int
    results: list[Hit]
    took_ms: float
    warnings: list[str] = dc_field(default_factory=list)
    pending_vectors: int = 0

    @property
    def confidence(self) -> Confidence:
        """How far the best results' lines support an answer (deepfield.confidence)."""
        return assess(self.query, [Line(hit.snippet, hit.score, hit.title)
                                   for hit in self.results], SEARCH)

    def to_json(self, with_text: bool = False) -> dict[str, Any]:
        results = []
        for hit in self.results:
            item = hit.to_json()
            if with_text:
                item["text"] = hit.text
            results.append(item)
        return {
            "results": results,
            "count": len(results),
            "query": self.query,
            "mode": self.mode,
            "unit": self.unit,
            "k": self.k,
            "took_ms": round(self.took_ms, 2),
            "pending_vectors": self.pending_vectors,
            "warnings": self.warnings,
            "confidence": self.confidence.to_json(),
        }


def best_line(lines: Sequence[str], terms: Sequence[str], ties: str = "middle") -> int:
    """Index of the line with the most distinct query terms; ties go to the line nearest the
    middle (a record window is centred on its own line) or, with ``ties="first"``, to the
    earliest (prose reads from the top)."""
    middle = (len(lines) - 1) / 2

    def rank(index: int) -> tuple[int, float]:
        lower = lines[index].lower()
        place = -abs(index - middle) if ties == "middle" else -index
        return (sum(1 for t in terms if t[:6] in lower), place)

    return max(range(len(lines)), key=rank)


def pointed_line(body: str, kind: str, line_start: int, line_end: int,
                 terms: Sequence[str]) -> tuple[str, int]:
    """(the text a hit's snippet is cut from, the page line it points at): the chunk's line
    with the most query terms, so a paragraph wrapped over many lines points at the sentence
    that matched, not at its first line. A record window keeps its own (middle) line when no
    line matches better; prose keeps its first. Chunks whose text does not keep the page's
    line breaks (a memo, a paragraph cut at sentences) point at their first line."""
    lines = body.split("\n")
    if kind == "summary" or len(lines) < 2 or len(lines) != line_end - line_start + 1:
        return body, line_start
    if kind == "record":
        best = best_line(lines, terms)
        return lines[best], line_start + best
    best = best_line(lines, terms, ties="first")
    return "\n".join(lines[best:]), line_start + best


def make_snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of ``text`` around the first query term, whitespace collapsed."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lower = flat.lower()
    positions = [lower.find(t[:6]) for t in terms if t and lower.find(t[:6]) >= 0]
    centre = min(positions) if positions else 0
    start = max(0, min(centre - width // 3, len(flat) - width))
    if start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 20 else start
    end = start + width
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def check_mode(mode: str, unit: str, k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise DeepfieldError(f"k must be a whole number, not {type(k).__name__}")
    if mode not in MODES:
        raise DeepfieldError(f"unknown search mode {mode!r}", "use bm25, vector or hybrid")
    if unit not in UNITS:
        raise DeepfieldError(f"unknown result unit {unit!r}", "use page or chunk")
    if k < 1:
        raise DeepfieldError(f"k must be at least 1, not {k}")


@heals_fields
def search_fields(
    fields: Sequence[Field],
    query: str,
    *,
    k: int = 10,
    mode: str | None = None,
    unit: str = "page",
    sync: bool = True,
    include_superseded: bool = False,
    activation: bool = True,
    where: Filters | None = None,
    parallel: bool = True,
    distinct_lines: bool = True,
    started: float | None = None,
) -> SearchResponse:
    """Search ``fields`` together; see :meth:`deepfield.Field.search`.

    ``mode`` None: hybrid when every field has an embedding model, else BM25 (a keyword-only
    store searches by keywords without being told).

    Superseded pages (``superseded_by`` set) are left out unless ``include_superseded``;
    pages in use get a small boost (deepfield.manage.activation) unless ``activation=False``.
    ``where`` keeps only pages whose frontmatter matches (kind, category, concept), applied
    before candidates are cut so k results come back whenever they exist.
    The search answers within SEARCH_BUDGET_S (index/budget.py) of ``started`` (a
    time.monotonic() value; default: now), embedding new chunks meanwhile as far as the time
    allows; the rest is pending and reported.

    ``parallel``: a hybrid search runs its BM25 leg on a second thread while the vectors are
    scored. That shortens one search on an idle machine; a server with a process per core
    passes False, as the extra thread only competes with the other searches for the CPU.
    ``distinct_lines`` (unit="chunk"): each hit points at a different page line (see
    :func:`collect_hits`); False returns every chunk as ranked (the researcher, whose line
    votes count each window that holds a line).
    """
    if not isinstance(query, str):
        raise DeepfieldError(f"the query must be text, not {type(query).__name__}")
    if mode is None:
        mode = "hybrid" if fields and all(f.embedder is not None for f in fields) else "bm25"
    check_mode(mode, unit, k)
    started = time.perf_counter()
    # Shared by every field searched.
    deadline = Deadline.for_search(time.monotonic() if started is None else started)
    warnings: list[str] = []
    pending = 0
    indexes = []
    for fld in fields:
        if sync:
            report = fld.ensure_synced(embed=mode != "bm25", deadline=deadline)
            warnings.extend(f"{fld.name}/{w}" for w in report.warnings)
        # Filtered searches run on the SQLite catalogue, whatever serves the field otherwise.
        index = fld.search_backend(catalogue=bool(where))
        if mode != "bm25" and index.embedder is None:
            raise DeepfieldError(
                f"field {fld.name!r} has no embedding model, so {mode} search is impossible",
                "use --mode bm25, or configure an embedder and run `deepfield reindex`",
            )
        pending += index.pending_chunk_vectors() if mode != "bm25" else 0
        indexes.append((fld, index))
    codes = {index.model_code for _, index in indexes}
    if mode != "bm25" and len(codes) > 1:
        raise DeepfieldError(
            f"these fields use different embedding models ({', '.join(sorted(codes))}), "
            "so their vectors cannot be compared",
            "search them one at a time, or with --mode bm25",
        )
    if pending and mode != "bm25":
        warnings.append(
            f"{pending} chunks have no vector yet and are found by keywords only; "
            "run `deepfield index` to embed them"
        )
    candidates = max(CANDIDATES, 5 * k)
    keyword: list[tuple[tuple[int, int], float]] = []
    dense: list[tuple[tuple[int, int], float]] = []
    query_vector = None
    if mode != "bm25":
        embedder = indexes[0][1].embedder if indexes else None
        try:
            query_vector = embedder.embed_query(query) if embedder is not None else None
        except EmbeddingError as exc:
            if mode == "vector":
                raise
            # Keyword results beat no results: a dead endpoint degrades hybrid to BM25.
            warnings.append(f"vector search unavailable, keyword results only: {exc.message}")
            mode = "bm25"
    for position, (fld, index) in enumerate(indexes):
        if where:
            found, near = filtered_retrieve(fld.index_handle(), query, query_vector, candidates,
                                            mode, where)
        else:
            found, near = index.candidates(query, query_vector, candidates, mode,
                                           parallel=parallel)
        keyword += [((position, cid), s) for cid, s in found]
        dense += [((position, cid), s) for cid, s in near]
    keyword.sort(key=lambda pair: -pair[1])
    if mode == "bm25":
        fused = list(max_normalized(keyword[:candidates]).items())
    elif mode == "vector":
        dense.sort(key=lambda pair: -pair[1])
        fused = dense[:candidates]
    else:
        # Every backend lists the cosine of each keyword hit that has a vector, so a keyword
        # hit missing from the dense list has none yet (pending, or not encodable).
        without_vector = {item for item, _ in keyword} - {item for item, _ in dense}
        fused = convex(keyword, dense, KEYWORD_WEIGHT, keyword_only=without_vector)
    fused = rerank(indexes, fused, activation=activation, include_superseded=include_superseded,
                   scale=activation_scale(mode, fused))
    hits = collect_hits(indexes, fused, k, unit, query, distinct_lines)
    took = (time.perf_counter() - started) * 1000
    return SearchResponse(query, mode, unit, k, hits, took, warnings, pending)


def activation_scale(mode: str, fused: Sequence[tuple[Any, float]]) -> float:
    """How much of the activation boost a search's scores can take. BM25 and hybrid scores
    are normalised to [0, 1]: all of it. Vector search keeps raw cosines, which crowd into a
    narrow band (0.78-0.86 for e5 on LoCoMo): the boost shrinks to the band of its candidates,
    else a page used in the last hours would outrank every better match."""
    if mode != "vector" or not fused:
        return 1.0
    scores = [score for _, score in fused]
    return max(0.0, min(1.0, max(scores) - min(scores)))


def collect_hits(
    indexes: list[tuple[Field, Any]],
    fused: list[tuple[tuple[int, int], float]],
    k: int,
    unit: str,
    query: str,
    distinct_lines: bool = True,
) -> list[Hit]:
    """Turn fused chunk scores into page stubs or chunk hits, best first.

    Chunk hits with ``distinct_lines`` point at k different page lines: the overlapping
    windows of a transcript or list all hold the line that matches, so the windows after the
    best one that point at that same line are folded into it (``matches`` counts them) and
    the next candidates take their places."""
    terms = query_terms(query) or re.findall(r"\w+", query.lower())
    if unit == "chunk":
        if not distinct_lines:
            return _hits(indexes, fused[:k], {}, terms)
        hits: list[Hit] = []
        where: dict[tuple[str, str, int], int] = {}
        start = 0
        while len(hits) < k and start < len(fused):
            batch = fused[start:start + 2 * k]
            start += len(batch)
            for found in _hits(indexes, batch, {}, terms):
                line = (found.field, found.filename, found.snippet_line)
                if line in where:
                    first = where[line]
                    hits[first] = replace(hits[first], matches=hits[first].matches + 1)
                    continue
                if len(hits) == k:
                    break
                where[line] = len(hits)
                hits.append(found)
        return hits
    by_doc: dict[tuple[int, int], tuple[tuple[int, int], float]] = {}
    doc_of: dict[tuple[int, int], tuple[int, int]] = {}
    for position, (_fld, index) in enumerate(indexes):
        ids = [cid for (pos, cid), _ in fused if pos == position]
        for cid, doc in index.chunk_docs(ids).items():
            doc_of[(position, cid)] = (position, doc)
    counts: dict[tuple[int, int], int] = {}
    for key, score in fused:
        doc = doc_of.get(key)
        if doc is None:
            continue  # removed by a concurrent sync
        counts[doc] = counts.get(doc, 0) + 1
        if doc not in by_doc:
            by_doc[doc] = (key, score)
    chosen = list(by_doc.values())[:k]
    counts = {by_doc[d][0]: n for d, n in counts.items() if d in by_doc}
    return _hits(indexes, chosen, counts, terms)


def _hits(
    indexes: list[tuple[Field, Any]],
    chosen: list[tuple[tuple[int, int], float]],
    counts: dict[tuple[int, int], int],
    terms: Sequence[str],
) -> list[Hit]:
    """The hits of ``chosen`` chunks, in order (chunks a concurrent sync removed are left
    out); ``counts``: how many chunks of its page matched, per chosen chunk."""
    rows: dict[tuple[int, int], Any] = {}
    for position, (_fld, index) in enumerate(indexes):
        ids = [cid for (pos, cid), _ in chosen if pos == position]
        for cid, row in index.chunks(ids).items():
            rows[(position, cid)] = row
    hits = []
    for key, score in chosen:
        row = rows.get(key)
        if row is None:
            continue
        fld = indexes[key[0]][0]
        doc = row.doc
        snippet_text, snippet_line = pointed_line(row.body, row.kind, row.line_start,
                                                  row.line_end, terms)
        hits.append(
            Hit(
                field=fld.name, filename=doc.filename, uuid=doc.uuid, title=doc.title,
                summary=doc.summary, frontmatter=doc.frontmatter, score=score,
                snippet=make_snippet(snippet_text, terms), snippet_line=snippet_line,
                heading=row.heading,
                line_start=row.line_start, line_end=row.line_end, text=row.body,
                matches=counts.get(key, 1),
            )
        )
    return hits
