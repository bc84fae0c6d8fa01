"""deepfield's own HTTP routes, beside the spec's, under ``/{field}/_/``.

``_`` is not a valid page name, so these paths can never collide with a page:

    GET  /{field}/_/pages                       the catalogue as JSON
    GET  /{field}/_/read/{page}?view=&section=  progressive reading (outline, full, section)
    GET  /{field}/_/context?task=&budget=&level= a context block for a task
    GET  /{field}/_/research?q=&rounds=&budget= multi-round research with citations
    POST /{field}/_/remember                    memorize a text (a write: same rules as PUT)

Context, research and remember use the store's ``[llm]`` models when configured and their
offline algorithms otherwise.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import DeepfieldError
from ..field import Field
from ..writer import MAX_WRITE_BYTES
from .app import deny_read, deny_write, error_response, too_large_hint
from .hints import restate_context
from .pagefiles import read_view
from .params import checked
from .routes_spec import _check_body, _int_param
from .service import Service

CONTEXT_MIN_BUDGET = 100
"""deepfield.context.MIN_BUDGET (not imported: context building may be missing, _missing)."""


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def pages(request: Request) -> Response:
    if (denied := deny_read(request)) is not None:
        return denied
    name = request.path_params["field"]

    def run(field: Field) -> list[dict[str, Any]]:
        return [{"filename": d.filename, "uuid": d.uuid, "title": d.title,
                 "summary": d.summary, "last_modified": d.last_modified, "bytes": d.size}
                for d in field.pages()]

    service = _service(request)
    found = await service.run(name, run)
    return JSONResponse({"field": name, "pages": found, "count": len(found),
                         "warnings": service.field(name).copy_warnings()})


async def read(request: Request) -> Response:
    if (denied := deny_read(request)) is not None:
        return denied
    name, ref = request.path_params["field"], request.path_params["page"]
    section = request.query_params.get("section")
    view = read_view(request.query_params.get("view"), section, "view")
    depth = _int_param(request, "depth", 2, 1, 6)
    sentences = _int_param(request, "sentences", 1, 0, 20)
    service = _service(request)
    page = await run_in_threadpool(service.read, name, ref, view=view,
                                   section=section, depth=depth, sentences=sentences)
    # A bucket that could not be reached: this is the working copy's page (as the page route
    # and search say too).
    return JSONResponse({**page.to_json(), "warnings": service.field(name).copy_warnings()})


def _missing(feature: str) -> Response:
    return error_response(501, "NotImplemented", f"{feature} is not available in this build",
                          "upgrade deepfield")


async def context(request: Request) -> Response:
    if (denied := deny_read(request)) is not None:
        return denied
    name = request.path_params["field"]
    task = request.query_params.get("task", "")
    level = request.query_params.get("level", "deep")
    if not task.strip() and level == "deep":
        raise DeepfieldError("give the task as ?task=…", "or ask for level=light|medium")
    # From context.MIN_BUDGET: a smaller budget is refused all the same, and /openapi.json
    # states this range (it said 1, and 1 to 99 were refused by the library).
    budget = _int_param(request, "budget", 2000, CONTEXT_MIN_BUDGET, 100_000)
    service = _service(request)
    try:
        result = await service.run(name, lambda f: service.context(f, task, budget=budget,
                                                                   level=level))
    except ModuleNotFoundError:
        return _missing("context building")
    return JSONResponse(restate_context(result))


async def research(request: Request) -> Response:
    if (denied := deny_read(request)) is not None:
        return denied
    name = request.path_params["field"]
    question = request.query_params.get("q", "")
    if not question.strip():
        raise DeepfieldError("give the question as ?q=…", "e.g. ?q=what did we decide")
    rounds = _int_param(request, "rounds", 3, 1, 10)
    budget = _int_param(request, "budget", 1000, 50, 100_000)
    service = _service(request)
    try:
        result = await run_in_threadpool(service.research, [name], question,
                                         max_rounds=rounds, budget=budget)
    except ModuleNotFoundError:
        return _missing("research")
    return JSONResponse(result)


async def remember(request: Request) -> Response:
    if (denied := deny_write(request)) is not None:
        return denied
    name = request.path_params["field"]
    service = _service(request)
    service.field(name)
    body = await request.body()
    if (bad := _check_body(body, "the text to memorize (notes, a transcript, a document) "
                                 "as UTF-8")) is not None:
        return bad
    if len(body) > MAX_WRITE_BYTES:  # within the body limit's slack, as PUT refuses it
        return error_response(413, "RequestEntityTooLarge",
                              f"the text is {len(body):,} bytes; a text to memorize is at "
                              f"most {MAX_WRITE_BYTES:,}", too_large_hint(request.url.path))
    text = body.decode("utf-8")
    fmt = request.query_params.get("format") or None
    try:
        result = await run_in_threadpool(service.remember, name, text, format=fmt)
    except ModuleNotFoundError:
        return _missing("remember")
    # 201 when a page was written; 200 when this session was already remembered (unchanged).
    return JSONResponse(result, status_code=200 if result.get("action") == "unchanged" else 201)


async def no_page(request: Request) -> Response:
    """``/{field}/_`` and ``/{field}/_/`` name no route (and ``_`` no page): a 404 naming the
    routes that are there. Without it ``/_/`` was redirected to ``/_``, a 404 about pages."""
    base = f"/{request.path_params['field']}/_"
    return error_response(404, "NotFound", f"nothing at {request.url.path}",
                          f"deepfield's routes are GET {base}/pages, {base}/read/PAGE, "
                          f"{base}/context?task=, {base}/research?q= and POST {base}/remember")


def routes() -> list[BaseRoute]:
    return [
        # Not API routes (nothing is there): left out of /openapi.json.
        Route("/{field}/_", no_page, methods=["GET", "HEAD"], include_in_schema=False),
        Route("/{field}/_/", no_page, methods=["GET", "HEAD"], include_in_schema=False),
        *(Route(path, checked(path, endpoint), methods=methods) for path, endpoint, methods in (
            ("/{field}/_/pages", pages, ["GET"]),
            ("/{field}/_/read/{page}", read, ["GET"]),
            ("/{field}/_/context", context, ["GET"]),
            ("/{field}/_/research", research, ["GET"]),
            ("/{field}/_/remember", remember, ["POST"]),
        )),
    ]
