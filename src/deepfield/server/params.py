"""Query parameters a route does not take are refused (400), not ignored.

An agent that sends ``/_/research?max_rounds=0`` (the MCP tool's argument name) or
``/search?limit=5`` would otherwise get the defaults without a word, as if its choice had
been honoured. The names each route takes are the ones ``/openapi.json`` states, so the
description and the check cannot drift apart. The console (``/ui/``) is for people and
checks its own forms.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .openapi import openapi_document

Endpoint = Callable[[Request], Awaitable[Response]]

ALIASES = {"max_rounds": "rounds", "max-rounds": "rounds", "limit": "k", "top_k": "k",
           "n": "k", "query": "q", "question": "q", "mode": "view"}
"""Names an agent may bring from the MCP tools or the CLI, and the parameter they mean
(offered only on a route that takes it and not the name itself: ``mode`` is search's own)."""


@functools.cache
def accepted(path: str, method: str) -> tuple[str, ...]:
    """The query parameters ``/openapi.json`` lists for ``method`` on ``path``."""
    operation = openapi_document("0")["paths"].get(path, {}).get(method.lower(), {})
    return tuple(p["name"] for p in operation.get("parameters", []) if p.get("in") == "query")


def _suggestion(name: str, known: tuple[str, ...]) -> str | None:
    if ALIASES.get(name) in known:
        return ALIASES[name]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None


def refusal(request: Request, path: str) -> Response | None:
    """None when every query parameter of ``request`` is one ``path`` takes, else the 400."""
    method = "GET" if request.method == "HEAD" else request.method
    known = accepted(path, method)
    unknown = [key for key in dict.fromkeys(request.query_params.keys()) if key not in known]
    if not unknown:
        return None
    guesses = [f"{key} → {guess}" if len(unknown) > 1 else guess
               for key in unknown if (guess := _suggestion(key, known)) is not None]
    mean = f"did you mean {', '.join(guesses)}? " if guesses else ""
    takes = f"it takes {', '.join(known)}" if known else "it takes no query parameters"
    names = ", ".join(unknown)
    plural = "s" if len(unknown) > 1 else ""
    body = {"error": {
        "type": "BadRequest",
        "message": f"{method} {path} has no query parameter{plural} {names} ({mean}{takes})",
        "hint": "leave it out or use a parameter the route takes; /openapi.json lists each "
                "route's parameters"}}
    return JSONResponse(body, status_code=400)


def checked(path: str, endpoint: Endpoint) -> Endpoint:
    """``endpoint`` refusing query parameters that ``path`` does not take."""

    @functools.wraps(endpoint)
    async def handler(request: Request) -> Response:
        if (refused := refusal(request, path)) is not None:
            return refused
        return await endpoint(request)

    return handler
