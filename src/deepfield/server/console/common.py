"""What every console view shares: the read and write checks around a handler, form parsing,
and library errors shown as HTML pages."""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...errors import (
    DeepfieldError,
    PageNotFoundError,
    ReviewItemError,
    SectionNotFoundError,
    UnknownFieldError,
)
from ..hints import error_status
from ..service import Service
from .guard import CSRF_FIELD, Refused, check_origin, check_read, check_write, secure
from .render import page, refusal_page

Handler = Callable[[Request], Awaitable[Response]]
Form = dict[str, list[str]]
FormHandler = Callable[[Request, Form], Awaitable[Response]]
MAX_FORM_BYTES = 64 * 1024 * 1024


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


CONSOLE_HINTS = {
    UnknownFieldError.default_hint: "the Fields page lists the fields",
    PageNotFoundError.default_hint: "the field's Pages view lists its pages, and Search "
                                    "finds them",
    SectionNotFoundError.default_hint: "the page's outline view lists its headings",
    ReviewItemError.default_hint: "the field's Review view lists the open items",
}
"""The CLI's hints (``list fields with `deepfield ls```) said in the console's own views,
as server/hints.py says them in routes for HTTP clients."""


def error_page(request: Request, exc: DeepfieldError) -> Response:
    return page(request, "error.html", error_status(exc), title=type(exc).__name__,
                message=exc.message, hint=CONSOLE_HINTS.get(exc.hint or "", exc.hint),
                login_prompt=False, field=request.path_params.get("field"))


def view(handler: Handler) -> Handler:
    """A GET view: refused unless the console may be read; library errors become pages."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            check_read(request)
            return await handler(request)
        except Refused as refusal:
            return refusal_page(request, refusal)
        except DeepfieldError as exc:
            return error_page(request, exc)

    return wrapped


async def read_form(request: Request) -> Form:
    """The urlencoded form of a POST (the console's forms send nothing else)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise Refused(415, f"the console takes form posts, not {kind or 'no content type'}")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Refused(413, "the form is too large")
    try:
        return parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise Refused(400, "the form is not UTF-8") from None


def one(form: Form, key: str, default: str = "") -> str:
    values = form.get(key)
    return values[0] if values else default


def action(handler: FormHandler) -> Handler:
    """A POST: the Origin, CSRF and login checks of guard.py, then ``handler(request, form)``."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            check_origin(request)  # before the body is even read
            form = await read_form(request) \
                if request.headers.get("content-length") != "0" else {}
            check_write(request, one(form, CSRF_FIELD) or None)
            return await handler(request, form)
        except Refused as refusal:
            return refusal_page(request, refusal)
        except DeepfieldError as exc:
            return error_page(request, exc)

    return wrapped


def redirect(request: Request, path: str, **query: str) -> Response:
    """303 to a console path after a write (so a reload does not post again)."""
    if query:
        path += "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())
    return secure(RedirectResponse(path, status_code=303), request)


def field_url(name: str, *parts: str) -> str:
    return "/ui/f/" + "/".join(quote(p, safe="") for p in (name, *parts))


def int_arg(raw: str | None, default: int | None, low: int, high: int,
            what: str) -> int | None:
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DeepfieldError(f"{what} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise DeepfieldError(f"{what} must be between {low} and {high}, not {value}")
    return value


def float_arg(raw: str | None, what: str) -> float | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        raise DeepfieldError(f"{what} must be a number, not {raw!r}") from None
    if not math.isfinite(value) or value < 0:  # "nan" compares false with everything
        raise DeepfieldError(f"{what} must be a number from 0 up, not {raw.strip()!r}")
    return value


def extras(record: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """Keys of a library result the view does not lay out itself (shown as they are, so a
    key added to the library's JSON appears without a change here)."""
    return {k: v for k, v in record.items() if k not in known and v not in (None, [], {}, "")}
