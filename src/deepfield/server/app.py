"""The HTTP server: a Starlette (ASGI) app serving every field of a store under its own prefix.

    /                          JSON list of the fields
    /openapi.json              OpenAPI 3.1 description of every route
    /{field}/                  the spec's routes (index.md, memoryfield.zip, pages, search)
    /{field}/_/…               deepfield's own routes (pages, read, context, research, remember)
    /ui/                       the memory console, for people (deepfield.server.console)

Run it with ``deepfield serve`` (uvicorn), or mount :func:`create_app` in any ASGI server.
Writes follow the spec's security rules (see :mod:`deepfield.server.auth`).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import DeepfieldError, WriteConflictError
from ..llm.config import LLMConfig
from ..store import RESERVED_FIELD_NAMES, Store
from ..writer import MAX_WRITE_BYTES
from .auth import Auth, is_local_name, is_loopback
from .hints import error_status, for_http
from .openapi import openapi_document
from .params import checked
from .service import Service


def error_response(status: int, kind: str, message: str, hint: str = "",
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """Every error has the CLI's JSON shape: ``{"error": {"type", "message", "hint"}}``."""
    body = {"error": {"type": kind, "message": message, "hint": hint}}
    return JSONResponse(body, status_code=status, headers=headers)


def deny_browser(request: Request, *, write: bool) -> Response | None:
    """403 for what a web page in the user's browser could send (the server trusts loopback):
    a loopback request naming another host (DNS rebinding) on a server without users, and a
    write whose ``Origin`` is not the server itself (cross-site request forgery)."""
    auth: Auth = request.app.state.auth
    host = request.headers.get("host", "")
    client = request.client.host if request.client else None
    if not auth.enabled and is_loopback(client) and not is_local_name(host):
        return error_response(403, "Forbidden", f"host {host!r} is not this loopback server",
                              "use http://127.0.0.1:PORT/ or http://localhost:PORT/")
    origin = request.headers.get("origin")
    if write and origin is not None and urlsplit(origin).netloc.lower() != host.lower():
        return error_response(403, "Forbidden", f"writes from the web origin {origin} are refused",
                              "write with an HTTP client, not from a web page")
    return None


_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip", "x-forwarded-host", "via")


def client_host(request: Request) -> str | None:
    """The client's address for the loopback rule, or None when the request came through a
    proxy: a reverse proxy on this machine connects from loopback on behalf of anyone, and
    uvicorn only rewrites the client for ``X-Forwarded-For``, not ``Forwarded`` (RFC 7239),
    ``X-Real-IP`` or ``Via``."""
    if any(name in request.headers for name in _PROXY_HEADERS):
        return None
    return request.client.host if request.client else None


def deny_read(request: Request) -> Response | None:
    """401 when the store is private and the request carries no valid login."""
    if (denied := deny_browser(request, write=False)) is not None:
        return denied
    auth: Auth = request.app.state.auth
    if auth.may_read(request.headers.get("authorization"), client_host(request)):
        return None
    if not auth.enabled:
        return error_response(
            403, "Forbidden", "this store is private and has no users, so only loopback may read",
            "add a user with `deepfield passwd USER` to read from other hosts",
        )
    return error_response(401, "Unauthorized", "this store needs a login to read",
                          "send HTTP Basic credentials", auth.challenge())


def deny_write(request: Request) -> Response | None:
    """401 (with a Basic challenge) or 403 when the request may not write."""
    if (denied := deny_browser(request, write=True)) is not None:
        return denied
    auth: Auth = request.app.state.auth
    if auth.may_write(request.headers.get("authorization"), client_host(request)):
        return None
    if auth.enabled:
        return error_response(401, "Unauthorized", "writing needs a valid login",
                              "send HTTP Basic credentials of a user in [server.users]",
                              auth.challenge())
    return error_response(
        403, "Forbidden", "this server has no users, so it only accepts writes from loopback",
        "add a user with `deepfield passwd USER` to write from other hosts",
    )


async def _no_route(request: Request, exc: Exception) -> Response:
    """No route for the path. A write to a path under a field that is not a flat page name
    (``a%2Fb.md`` decodes to a sub-folder) is the spec's bad filename: 400, not 404."""
    segments = [s for s in request.url.path.split("/") if s]
    if request.method in ("PUT", "DELETE") and len(segments) >= 2:
        return error_response(400, "BadRequest",
                              f"{request.url.path} does not name a page of a field",
                              "pages are flat: PUT /FIELD/NAME.md with a lowercase "
                              "hyphenated NAME and no '/'")
    return error_response(404, "NotFound", f"nothing at {request.url.path}",
                          "GET / lists the fields; GET /openapi.json the routes")


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (405, 413, …) in the JSON shape every other error has."""
    assert isinstance(exc, HTTPException)
    phrase = HTTPStatus(exc.status_code).phrase
    headers = dict(exc.headers) if exc.headers else None
    if request.url.path == "/ui" or request.url.path.startswith("/ui/"):
        # The console's pages are for people: its own HTML error page (with its security
        # headers), not the API's JSON, e.g. for a GET of a URL that only takes a form post.
        from .console.guard import Refused
        from .console.render import refusal_page

        hint = too_large_hint(request.url.path) if exc.status_code == 413 else \
            "start from the fields at /ui/"
        return refusal_page(request, Refused(exc.status_code, str(exc.detail), hint, headers))
    hint = too_large_hint(request.url.path) if exc.status_code == 413 else \
        "see /openapi.json for the routes and methods"
    return error_response(exc.status_code, phrase.replace(" ", ""), str(exc.detail), hint,
                          headers)


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with a JSON 413 (the shape of every other
    error). Starlette's own ``max_body_size`` sits outside the exception handlers and
    answers a Content-Length over the limit in plain text; here a declared length is
    refused before the app runs, and a chunked body that grows past the limit raises an
    HTTPException inside the app, where :func:`_http_error` answers it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            declared = int(Headers(scope=scope).get("content-length", ""))
        except ValueError:
            declared = None
        if declared is not None and declared > self.limit:
            # Answered as the handlers answer a body that grows too large (_http_error): the
            # console's HTML page under /ui/, the API's JSON elsewhere.
            request = Request(scope, receive)
            response = await _http_error(request, HTTPException(413, self._message()))
            await response(scope, receive, send)
            return
        total = 0

        async def limited() -> Message:
            nonlocal total
            message = await receive()
            if message["type"] == "http.request":
                total += len(message.get("body", b""))
                if total > self.limit:
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, limited, send)

    def _message(self) -> str:
        return f"the request body is larger than {self.limit} bytes"


def too_large_hint(path: str) -> str:
    """The 413's hint: what the body at ``path`` is, and how large it may be. POST
    ``/FIELD/_/remember`` takes a session's text (its pages are cut from it), not a page."""
    if path.rstrip("/").endswith("/_/remember"):
        return (f"a text to memorize is at most {MAX_WRITE_BYTES >> 20} MiB; send a long "
                "session in parts, one POST each")
    return f"a page is at most {MAX_WRITE_BYTES >> 20} MiB; send a smaller body"


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug or an environment failure: still the JSON shape (uvicorn logs the traceback)."""
    return error_response(500, "InternalServerError", f"{type(exc).__name__}: {exc}",
                          "this is a deepfield bug or a problem of the machine; the server "
                          "log has the details")


async def _deepfield_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DeepfieldError)
    if isinstance(exc, WriteConflictError):
        # A lost race on a page in a bucket: 412 when the client stated the version it
        # expected, else 409; the current version's ETag (absent: the page is gone) says
        # what to read before writing again.
        conditional = request.headers.get("if-match") or request.headers.get("if-none-match")
        status = 412 if conditional else 409
        headers = {} if exc.current is None else {
            "ETag": '"' + hashlib.sha256(exc.current).hexdigest() + '"'}
        return error_response(status, type(exc).__name__, exc.message, for_http(exc.hint),
                              headers)
    # The library's hints name the CLI's options (--budget): say the query parameters.
    return error_response(error_status(exc), type(exc).__name__, exc.message,
                          for_http(exc.hint))


async def list_fields(request: Request) -> Response:
    if (denied := deny_read(request)) is not None:
        return denied
    service: Service = request.app.state.service
    # A field named like one of the server's own paths (made before the name was reserved,
    # or by hand) cannot be reached at /NAME/: never advertise it.
    fields = [{"name": n, "url": f"/{n}/", "search": f"/{n}/search?q=",
               "zip": f"/{n}/memoryfield.zip", "listing": f"/{n}/listing.md"}
              for n in service.field_names() if n not in RESERVED_FIELD_NAMES]
    warnings = service.copy_warnings()
    return JSONResponse({"fields": fields, "openapi": "/openapi.json",
                         **({"warnings": warnings} if warnings else {})})


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(request.app.state.version))


def create_app(
    store: Store,
    *,
    auth: Auth | None = None,
    llm_config: LLMConfig | None = None,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """The ASGI app for ``store``. ``auth`` defaults to the users in its deepfield.toml (a
    change to that file counts within a second),
    ``llm_config`` to its ``[llm]`` table (no table: offline research and memorizing)."""
    from importlib.metadata import PackageNotFoundError, version

    from .console import routes as console_routes
    from .routes_deepfield import routes as deepfield_routes
    from .routes_spec import routes as spec_routes

    if auth is None:  # read again when deepfield.toml changes (`deepfield passwd`)
        auth = Auth.for_store(store.root)
    routes: list[BaseRoute] = [
        Route("/", checked("/", list_fields), methods=["GET"]),
        Route("/openapi.json", checked("/openapi.json", openapi), methods=["GET"]),
        *(extra_routes or []),
        *console_routes(),  # /ui/: before the spec's /{field}/ routes
        *deepfield_routes(),
        *spec_routes(),
    ]
    handlers: dict[Any, Any] = {DeepfieldError: _deepfield_error, 404: _no_route,
                                HTTPException: _http_error, Exception: _unexpected}
    service = Service(store, llm_config)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        service.start_backfill()
        yield
        service.close()  # the server stops: close the connections it opened

    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan,
                    middleware=[Middleware(BodyLimit, limit=MAX_WRITE_BYTES + 4096)])
    app.state.service = service
    app.state.auth = auth
    try:
        app.state.version = version("deepfield")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        app.state.version = "0"
    return app
