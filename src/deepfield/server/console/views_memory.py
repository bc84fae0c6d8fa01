"""Console views of what search and research return: the library's JSON, laid out.

Both call the same :class:`~deepfield.server.service.Service` methods as the HTTP routes
``/{field}/search`` and ``/{field}/_/research``, and show the JSON those return: keys the
library adds later (a confidence, a new count) appear under "more" without a change here.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...errors import DeepfieldError
from ...search import MODES, UNITS
from ..routes_spec import MAX_K, _int_param
from .common import extras, service_of, view
from .render import page

SEARCH_KEYS = {"results", "count", "query", "mode", "unit", "k", "field", "took_ms",
               "pending_vectors", "warnings"}
HIT_KEYS = {"filename", "frontmatter", "score", "field", "uuid", "title", "summary", "snippet",
            "heading", "line_start", "line_end", "text", "matches", "snippet_line", "match"}
RESEARCH_KEYS = {"question", "context", "summary", "evidence", "sources", "rounds", "usage",
                 "budget", "tokens", "left_out", "mode", "warnings"}
EVIDENCE_KEYS = {"field", "filename", "line", "last_line", "heading", "text", "title", "date",
                 "score", "round", "queries"}


@view
async def search(request: Request) -> Response:
    name = request.path_params["field"]
    service = service_of(request)
    service.field(name)
    params = request.query_params
    query = params.get("q", "")
    mode = params.get("mode") or None
    unit = params.get("unit") or "page"
    k = _int_param(request, "k", 10, 1, MAX_K)
    if mode is not None and mode not in MODES:
        raise DeepfieldError(f"unknown search mode {mode!r}", "use bm25, vector or hybrid")
    if unit not in UNITS:
        raise DeepfieldError(f"unknown result unit {unit!r}", "use page or chunk")
    out: dict[str, Any] | None = None
    if query.strip():
        out = await run_in_threadpool(service.search, name, query, k=k, mode=mode, unit=unit)
    hits = [dict(hit, more=extras(hit, HIT_KEYS)) for hit in (out or {}).get("results", [])]
    return page(request, "search.html", field=name, nav="search", query=query,
                mode=mode or "", unit=unit, k=k, modes=MODES, units=UNITS, out=out, hits=hits,
                more=extras(out, SEARCH_KEYS) if out else {},
                default_mode="hybrid" if service.embedder is not None else "bm25")


@view
async def research(request: Request) -> Response:
    name = request.path_params["field"]
    service = service_of(request)
    service.field(name)
    params = request.query_params
    question = params.get("q", "")
    rounds = _int_param(request, "rounds", 3, 1, 10)  # the HTTP route's bounds
    budget = _int_param(request, "budget", 1000, 50, 100_000)
    out: dict[str, Any] | None = None
    if question.strip():
        out = await run_in_threadpool(service.research, [name], question,
                                      max_rounds=rounds, budget=budget)
    evidence = [dict(e, more=extras(e, EVIDENCE_KEYS)) for e in (out or {}).get("evidence", [])]
    return page(request, "research.html", field=name, nav="research", question=question,
                rounds=rounds, budget=budget, out=out, evidence=evidence,
                more=extras(out, RESEARCH_KEYS) if out else {})
