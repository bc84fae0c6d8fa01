"""The memoryfield spec's HTTP routes, one set per field under ``/{field}/``.

``GET /`` (index.md), ``GET /memoryfield.zip``, ``GET /{page}.md``, ``GET /search?q=`` and the
writable pages: ``PUT`` (201 created, 204 replaced; 400 bad name or empty body, 415 not UTF-8,
409 uuid conflict, 412 failed ``If-Match`` or ``If-None-Match``, e.g. ``If-None-Match: *`` on
a page that exists) and ``DELETE`` (204; the page moves into the field's ``archive/`` and
leaves the index; 405 for ``index.md`` and ``listing.md``, which are not pages; 412 for a
failed ``If-Match``: the page is kept). The index
and ``listing.md`` are brought up to date inside the request, before the page can be
returned again.
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import hashlib
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import (
    DeepfieldError,
    InvalidNameError,
    PageNotFoundError,
    RemoteUnavailableError,
    UnknownFieldError,
)
from ..field import Field
from ..fsutil import field_lock, read_no_follow
from ..page import INTRO_FILE, LISTING_FILE
from ..search import MODES, UNITS
from ..writer import MAX_WRITE_BYTES
from .app import deny_read, deny_write, error_response
from .params import checked
from .service import Service

MARKDOWN = "text/markdown; charset=utf-8"
MAX_K = 100
WARNING_HEADER = "X-Deepfield-Warning"
"""Set on a PUT's 201/204 when the page was stored but something after it was not (the
index, listing.md) or the write has review notes: the same lines as the JSON ``warnings``."""


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def etag_of(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest() + '"'


def _markdown(request: Request, data: bytes, mtime: float | None = None,
              warnings: list[str] | None = None) -> Response:
    """A Markdown file with validators: ETag (sha256) and Last-Modified (its mtime), and
    304 for a matching ``If-None-Match`` or (without one) ``If-Modified-Since``;
    ``warnings`` (e.g. the bucket could not be reached: the working copy's file) in
    X-Deepfield-Warning."""
    headers = {"ETag": etag_of(data)}
    if warnings:
        headers[WARNING_HEADER] = header_text(" | ".join(warnings))
    if mtime is not None:
        headers["Last-Modified"] = email.utils.formatdate(mtime, usegmt=True)
    match = request.headers.get("if-none-match")
    since = request.headers.get("if-modified-since")
    if match is not None:
        if headers["ETag"] in match or match.strip() == "*":
            return Response(status_code=304, headers=headers)
    elif since is not None and mtime is not None:
        try:
            when = email.utils.parsedate_to_datetime(since).timestamp()
        except (TypeError, ValueError):
            when = None
        if when is not None and int(mtime) <= when:
            return Response(status_code=304, headers=headers)
    return Response(data, media_type=MARKDOWN, headers=headers)


def _read(path: Path) -> tuple[bytes, float]:
    """The file's bytes and mtime; never through a symbolic link, even one swapped in after
    the path was checked (O_NOFOLLOW: ELOOP, reported as a missing page)."""
    try:
        return read_no_follow(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileNotFoundError(str(path)) from None
        raise


async def get_intro(request: Request) -> Response:
    """``GET /{field}/``: the field's index.md (a short generated one if it has none)."""
    if (denied := deny_read(request)) is not None:
        return denied
    name = request.path_params["field"]
    service = _service(request)
    field = service.field(name)
    try:
        data, mtime = await run_in_threadpool(_read, field.path / INTRO_FILE)
        return _markdown(request, data, mtime, field.copy_warnings())
    except (FileNotFoundError, IsADirectoryError):
        pass  # no index.md (or a link, never followed): a short generated one
    data = (f"# {name}\n\nA memoryfield served by deepfield. Its catalogue of pages is "
            f"[listing.md](listing.md); search it at `search?q=`.\n").encode()
    return _markdown(request, data)


async def get_zip(request: Request) -> Response:
    """``GET /{field}/memoryfield.zip``: the whole field (pages, index.md, listing.md)."""
    if (denied := deny_read(request)) is not None:
        return denied
    name = request.path_params["field"]
    snap = await run_in_threadpool(_service(request).snapshot, name)
    tag = f'"{snap.sha256}"'
    match = request.headers.get("if-none-match")
    if match is not None and (tag in match or match.strip() == "*"):  # as a page's (_markdown)
        return Response(status_code=304, headers={"ETag": tag})
    return Response(snap.data, media_type="application/zip", headers={
        "ETag": tag,
        "Content-Disposition": f'attachment; filename="{name}.memoryfield.zip"',
    })


def _int_param(request: Request, key: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(key)
    if raw is None or raw == "":
        return default
    hint = f"send {key}= a whole number from {low} to {high}, or leave it out for {default}"
    try:
        value = int(raw)
    except ValueError:
        raise DeepfieldError(f"{key} must be a whole number, not {raw!r}", hint) from None
    if not low <= value <= high:
        raise DeepfieldError(f"{key} must be between {low} and {high}, not {value}", hint)
    return value


async def search(request: Request) -> Response:
    """``GET /{field}/search?q=&mode=&unit=&k=``: ranked results in the spec's JSON shape."""
    if (denied := deny_read(request)) is not None:
        return denied
    name = request.path_params["field"]
    query = request.query_params.get("q", "")
    k = _int_param(request, "k", 10, 1, MAX_K)
    mode = request.query_params.get("mode") or None
    unit = request.query_params.get("unit") or "page"
    if mode is not None and mode not in MODES:
        raise DeepfieldError(f"unknown search mode {mode!r}", "use bm25, vector or hybrid")
    if unit not in UNITS:
        raise DeepfieldError(f"unknown result unit {unit!r}", "use page or chunk")
    service = _service(request)
    if not query.strip():
        service.field(name)  # 404 for an unknown field even without a query
        return JSONResponse({"results": [], "count": 0, "query": query, "field": name})
    out = service.search_inline(name, query, k=k, mode=mode, unit=unit)
    if out is None:
        out = await run_in_threadpool(service.search, name, query, k=k, mode=mode, unit=unit)
    return JSONResponse(out)


async def get_page(request: Request) -> Response:
    """``GET /{field}/{page}.md``: the page exactly as stored."""
    if (denied := deny_read(request)) is not None:
        return denied
    name, filename = request.path_params["field"], request.path_params["filename"]
    service = _service(request)
    field = service.field(name)
    path = service.page_path(field, filename, existing=True)
    if filename == LISTING_FILE:  # make sure the catalogue reflects edits made meanwhile
        await service.run(name, lambda f: f.ensure_synced(embed=False))
    elif type(field).refresh_pages is not Field.refresh_pages:  # a copy of a bucket's pages
        # Unreachable: the read goes on from the working copy, with the warning
        # (copy_warnings), as every other read does.
        with contextlib.suppress(RemoteUnavailableError):
            await service.run(name, lambda f: f.refresh_pages([filename]))
    try:
        data, mtime = await run_in_threadpool(_read, path)
    except (FileNotFoundError, IsADirectoryError):
        raise PageNotFoundError(f"no page {filename!r} in field {name}") from None
    return _markdown(request, data, mtime, field.copy_warnings())


def _check_body(body: bytes, wanted: str = "the complete page as UTF-8 Markdown"
                ) -> Response | None:
    """400 for an empty body, 415 for one that is not UTF-8; ``wanted`` is what the hint
    asks for (a page for PUT, the text to memorize for remember)."""
    if not body.strip():
        return error_response(400, "InvalidPageError", "the request body is empty",
                              f"send {wanted}")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return error_response(415, "InvalidPageError",
                              f"the request body is not UTF-8 (bad byte at offset {exc.start})",
                              "encode the page as UTF-8")
    return None


def _precondition(request: Request, path_exists: bool, current: bytes | None) -> str | None:
    """``If-Match`` and ``If-None-Match`` (optional, never required; RFC 9110 13.1): None
    when the write may go ahead, else the 412's message. ``If-None-Match: *`` makes a PUT
    create-only: it never replaces a page someone else created meanwhile."""
    wanted = request.headers.get("if-match")
    if wanted is not None and not (
        path_exists if wanted.strip() == "*"
        else current is not None and etag_of(current) in wanted
    ):
        return "does not match If-Match"
    unwanted = request.headers.get("if-none-match")
    if unwanted is not None and current is not None and (
        unwanted.strip() == "*" or etag_of(current) in unwanted
    ):
        return "already exists (If-None-Match)" if unwanted.strip() == "*" \
            else "matches If-None-Match"
    return None


def _other_processes_out(field: Field) -> contextlib.AbstractContextManager[object]:
    """The field's folder lock (fsutil.field_lock, re-entrant), held from a conditional
    write's check to its write: ``serve --workers N`` runs N processes, and the service's
    lock only keeps out this one's threads, so two workers could both find no page for
    ``If-None-Match: *`` and both answer 201, the second replacing the first. A bucket's
    field checks versions against the bucket instead (its writes take ``expected``)."""
    if type(field).moving is Field.moving:  # a folder on disk
        if not field.path.is_dir():  # removed while served: a 404, not the lock's OSError
            raise UnknownFieldError(f"the field folder {field.path} is gone",
                                    "list fields with `deepfield ls`")
        return field_lock(field.path)
    return contextlib.nullcontext()


def _write(field: Field, filename: str, body: bytes, request: Request) -> tuple[int, Any]:
    """Store the page (under the field lock); (status, JSON result or None)."""
    field.refresh_pages([filename])  # a copy of a bucket's page: check against the bucket's
    with _other_processes_out(field):
        return _write_checked(field, filename, body, request)


def _write_checked(field: Field, filename: str, body: bytes,
                   request: Request) -> tuple[int, Any]:
    """:func:`_write` once no other process can write the field: the preconditions, then
    the page (or the introduction)."""
    path = field.path / filename
    existed = path.is_file()
    current = path.read_bytes() if existed else None
    if (failed := _precondition(request, existed, current)) is not None:
        return 412, (failed, None if current is None else etag_of(current))
    expected = current if request.headers.get("if-match") and current is not None else None
    if filename == INTRO_FILE:  # the introduction is free text, stored as sent
        field.write_intro(body, expected=expected)
        # The keys of every other PUT's result (Field.write's WriteResult), so a client
        # reading ``warnings`` or ``split`` of a 201 needs no special case for the intro.
        return (204 if existed else 201), {"field": field.name, "pages": [
            {"filename": INTRO_FILE, "uuid": None, "title": None,
             "action": "updated" if existed else "created", "bytes": len(body),
             "previous": None}], "split": False, "warnings": []}
    # The spec's PUT replaces the one file with the page sent, whatever its size (pages MAY
    # exceed 8 KB): no split into parts.
    # With If-Match the write is conditional on the version just checked (``expected``): a
    # page kept in a bucket may change between the check and the write (another replica).
    result = field.write(body, name=filename[:-3], split=False, keep_previous=False,
                         expected=expected)
    return (204 if existed else 201), result.to_json()


async def put_page(request: Request) -> Response:
    """``PUT /{field}/{page}.md``: create (201) or replace (204) one page."""
    target = _write_target(request)
    if isinstance(target, Response):
        return target
    service, name, filename = target
    body = await request.body()
    if (bad := _check_body(body)) is not None:
        return bad
    if len(body) > MAX_WRITE_BYTES:  # within the body limit's slack: the 413 docs promise
        return error_response(413, "RequestEntityTooLarge",
                              f"the page is {len(body):,} bytes; a page is at most "
                              f"{MAX_WRITE_BYTES:,}", "send a smaller page (PUT stores the "
                              "page whole: it is never split into parts)")
    status, result = await service.run(name, lambda f: _write(f, filename, body, request),
                                       write=True)
    if status == 412:  # with the current version's ETag, when there is one
        failed, tag = result
        return error_response(412, "PreconditionFailed", f"{filename} {failed}",
                              "GET it again, then retry (or PUT it under another name)",
                              {"ETag": tag} if tag else None)
    headers = {"Location": f"/{name}/{filename}"}
    warnings = (result.get("warnings") or []) if isinstance(result, dict) else []
    if warnings:  # the page is stored; what went wrong after that is a warning, not a 5xx
        headers[WARNING_HEADER] = header_text(" | ".join(warnings))
    if status == 204:
        return Response(status_code=204, headers=headers)
    return JSONResponse(result, status_code=201, headers=headers)


def header_text(text: str, limit: int = 1000) -> str:
    """``text`` as one header line: printable ASCII only, at most ``limit`` characters."""
    flat = "".join(c if " " <= c <= "~" else "?" for c in " ".join(text.split()))
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def _write_target(request: Request) -> tuple[Service, str, str] | Response:
    """(service, field name, filename) of a PUT or DELETE, or the refusal to send: no login,
    unknown field, a path escaping the field, or the generated listing.md."""
    if (denied := deny_write(request)) is not None:
        return denied
    name, filename = request.path_params["field"], request.path_params["filename"]
    service = _service(request)
    # A DELETE may name a page made by hand under a non-spec name ("My Notes.md"): GET
    # serves it and listing.md links it, so it can be archived too; PUT takes spec names only.
    deleting = request.method == "DELETE"
    service.page_path(service.field(name), filename, existing=deleting, deleting=deleting)
    if filename == LISTING_FILE:
        return _generated(filename)
    return service, name, filename


def _generated(filename: str) -> Response:
    return error_response(405, "MethodNotAllowed",
                          f"{filename} is generated from the pages and cannot be written",
                          "change the pages instead", {"Allow": "GET"})


def _archive(field: Field, filename: str) -> str:
    if not (field.path / filename).is_file():
        raise PageNotFoundError(f"no page {filename!r} in field {field.name}")
    return field.archive_page(filename).archived[0]  # as `rm`: every part of a split page


def _delete(field: Field, filename: str, request: Request) -> tuple[int, str]:
    """Archive the page under the field lock: (204, where it went), or (412, the current
    ETag) when ``If-Match`` / ``If-None-Match`` fails. RFC 9110: a DELETE that states the
    version it expects must not remove a page changed meanwhile (it used to be archived
    whatever the header said)."""
    field.refresh_pages([filename])  # a copy of a bucket's page: check against the bucket's
    with _other_processes_out(field):
        path = field.path / filename
        current = path.read_bytes() if path.is_file() else None
        if current is not None and _precondition(request, True, current) is not None:
            return 412, etag_of(current)
        return 204, _archive(field, filename)


async def delete_page(request: Request) -> Response:
    """``DELETE /{field}/{page}.md``: move the page into ``archive/`` (never destroyed)."""
    target = _write_target(request)
    if isinstance(target, Response):
        return target
    service, name, filename = target
    if filename == INTRO_FILE:  # not a page (as for MCP and listing.md): a field keeps one
        return error_response(
            405, "MethodNotAllowed",
            f"{INTRO_FILE} is the field's introduction, not a page, and cannot be deleted",
            f"change the introduction with PUT /{name}/{INTRO_FILE}", {"Allow": "GET, PUT"})
    status, where = await service.run(name, lambda f: _delete(f, filename, request),
                                      write=True)
    if status == 412:  # ``where`` is the current version's ETag
        return error_response(412, "PreconditionFailed",
                              f"{filename} does not match If-Match or If-None-Match: it was "
                              "not deleted", "GET it again, then decide whether to delete it",
                              {"ETag": where})
    return Response(status_code=204, headers={"X-Deepfield-Archived-As": where})


async def page(request: Request) -> Response:
    """One route for GET / PUT / DELETE, so a bad name is 400 whatever the method (the spec:
    a write to a name that is not a page filename, ``.md`` missing included, is 400; the
    write handlers check the login first, then the name)."""
    filename = request.path_params["filename"]
    if request.method == "PUT":
        return await put_page(request)
    if request.method == "DELETE":
        return await delete_page(request)
    if not filename.endswith(".md"):
        raise PageNotFoundError(f"no route or page {filename!r}",
                                "pages end in .md; see /openapi.json for the routes")
    if not filename[:-3] or "/" in filename:
        raise InvalidNameError(f"{filename!r} is not a page filename")
    return await get_page(request)


def routes() -> list[BaseRoute]:
    return [Route(path, checked(path, endpoint), methods=methods) for path, endpoint, methods in (
        ("/{field}/", get_intro, ["GET"]),
        ("/{field}/memoryfield.zip", get_zip, ["GET"]),
        ("/{field}/search", search, ["GET"]),
        ("/{field}/{filename}", page, ["GET", "PUT", "DELETE"]),
    )]
