"""The library's hints said in HTTP's terms.

The library speaks to the CLI's user (``raise --budget to at least 111 tokens``, ``use
--level medium``); an HTTP client sets query parameters instead, so the server names those
(``raise budget= to at least 111 tokens``, ``use level=medium``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..errors import (
    ConfigError,
    DeepfieldError,
    EmbeddingError,
    FieldExistsError,
    IndexStateError,
    LLMError,
    NothingToPackError,
    PageConflictError,
    PageNotFoundError,
    ReviewItemError,
    SectionNotFoundError,
    StoreNotFoundError,
    SupersessionCycleError,
    TransportError,
    UnknownFieldError,
)

HTTP_HINTS = {
    UnknownFieldError.default_hint: "GET / lists the fields; a PUT of a page does not "
                                    "create one (`deepfield new NAME` does)",
    PageNotFoundError.default_hint: "GET /FIELD/_/pages lists the pages, /FIELD/search?q= "
                                    "finds them",
    SectionNotFoundError.default_hint: "GET /FIELD/_/read/PAGE (view=outline) lists its "
                                       "headings",
}
"""The CLI's hints an HTTP client cannot follow (run `deepfield ls`), said in routes."""

_PARAM = {"max-rounds": "rounds"}
"""CLI options whose query parameter has another name."""

_WITH_VALUE = re.compile(r"--(mode|level|unit|view) ([a-z0-9]+)\b")
_FLAG = re.compile(r"--(budget|depth|section|max-rounds|mode|level|unit)\b")
_ALREADY = re.compile(r" \(HTTP and MCP: [^)]*\)")
"""Hints that already name the parameter beside the option (search's) say it once."""


def for_http(text: str) -> str:
    """``text`` with the CLI's options (``--budget``) named as the query parameters
    (``budget=``) an HTTP client sends, and hints that name CLI commands as routes; other
    text is returned as is."""
    if text in HTTP_HINTS:
        return HTTP_HINTS[text]
    if "--" not in text:
        return text
    text = _ALREADY.sub("", text)
    text = _WITH_VALUE.sub(lambda m: f"{_PARAM.get(m[1], m[1])}={m[2]}", text)
    return _FLAG.sub(lambda m: f"{_PARAM.get(m[1], m[1])}=", text)


def restate_context(out: dict[str, Any],
                     say: Callable[[str], str] = for_http) -> dict[str, Any]:
    """A context result's warnings and left-out reasons in HTTP's terms (or ``say``'s: the
    MCP tools' argument names)."""
    out["warnings"] = [say(w) for w in out.get("warnings", [])]
    for left in out.get("omitted", []):
        if isinstance(left.get("reason"), str):
            left["reason"] = say(left["reason"])
    return out


def error_status(exc: DeepfieldError) -> int:
    """The HTTP status for a library error: the request's fault is 4xx (400 unless it names
    something missing, 404, or conflicting, 409), a model or remote behind us 502/503, the
    server's own state (configuration, index) 500."""
    if isinstance(exc, UnknownFieldError | PageNotFoundError | SectionNotFoundError
                  | ReviewItemError | NothingToPackError):
        return 404
    if isinstance(exc, PageConflictError | FieldExistsError | SupersessionCycleError):
        return 409
    if isinstance(exc, EmbeddingError):
        return 503
    if isinstance(exc, LLMError | TransportError):
        return 502
    if isinstance(exc, ConfigError | IndexStateError | StoreNotFoundError):
        return 500
    return 400
