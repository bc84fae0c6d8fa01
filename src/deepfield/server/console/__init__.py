"""The memory console: a web UI at ``/ui/`` on the HTTP server's own Starlette app.

Server-rendered HTML (Jinja2 templates, one stylesheet, no script and no build step) over the
same :class:`~deepfield.server.service.Service` and library calls as the HTTP and MCP servers:

    /ui/                                 fields
    /ui/status                           per field: pages, pending vectors, index health, last sync
    /ui/login                            the Basic login prompt (writes need it when users exist)
    /ui/f/{field}/                       pages: title, summary, updated, activation
    /ui/f/{field}/p/{page}[?view=outline] a page rendered (or its outline), its supersession graph
    /ui/f/{field}/raw/{page}             the page's text with line anchors (#L12)
    /ui/f/{field}/edit/{page}            edit (POST saves through PUT's writer, with the ETag)
    /ui/f/{field}/new                    a new page
    /ui/f/{field}/search?q=&mode=&unit=  search in the three modes
    /ui/f/{field}/research?q=            research: rounds, queries, evidence, packed context
    /ui/f/{field}/review                 the review queue (accept, merge, keep both)
    /ui/f/{field}/forget                 forget's dry run, and the archive button
    /ui/f/{field}/archive                archived pages, and restore

Security is guard.py's: the HTTP API's read and write rules, a per-session CSRF token on every
form, foreign Origins refused, a script-free Content-Security-Policy, memory text escaped.
Every path under ``/ui/`` belongs to the console, so a field named ``ui`` keeps all its routes
except its introduction at ``/ui/`` (read it as ``/ui/index.md``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from . import views_manage, views_memory, views_pages
from .guard import Refused
from .render import refusal_page

PREFIX = "/ui"


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    response = refusal_page(request, Refused(404, f"nothing at {request.url.path}",
                                             "start from the fields at /ui/"))
    await response(scope, receive, send)


async def _home_slash(request: Request) -> Response:
    return RedirectResponse(PREFIX + "/", status_code=308)


def routes() -> list[BaseRoute]:
    """The console's routes, to put before the spec's (``/{field}/…``) in the app."""
    f = "/f/{field}"
    pages, memory, manage = views_pages, views_memory, views_manage
    inner: list[BaseRoute] = [
        Route("/", pages.home, methods=["GET"]),
        Route("/status", manage.status, methods=["GET"]),
        Route("/login", manage.login, methods=["GET"]),
        Mount("/static", StaticFiles(packages=[("deepfield.server.console", "static")])),
        Route(f + "/", pages.field_pages, methods=["GET"]),
        Route(f + "/p/{page}", pages.page_view, methods=["GET"]),
        Route(f + "/p/{page}/archive", pages.archive_page, methods=["POST"]),
        Route(f + "/p/{page}/supersede", manage.supersede_page, methods=["POST"]),
        Route(f + "/raw/{page}", pages.raw_view, methods=["GET"]),
        Route(f + "/edit/{page}", pages.edit_form, methods=["GET"]),
        Route(f + "/edit/{page}", pages.edit_save, methods=["POST"]),
        Route(f + "/new", pages.new_form, methods=["GET"]),
        Route(f + "/new", pages.new_save, methods=["POST"]),
        Route(f + "/archive", pages.archived, methods=["GET"]),
        Route(f + "/archive/{page}", pages.archived_raw, methods=["GET"]),
        Route(f + "/restore", pages.restore, methods=["POST"]),
        Route(f + "/search", memory.search, methods=["GET"]),
        Route(f + "/research", memory.research, methods=["GET"]),
        Route(f + "/review", manage.review, methods=["GET"]),
        Route(f + "/review/{item}", manage.review_resolve, methods=["POST"]),
        Route(f + "/forget", manage.forget_preview, methods=["GET"]),
        Route(f + "/forget", manage.forget_archive, methods=["POST"]),
    ]
    return [Route(PREFIX, _home_slash, methods=["GET"]),
            Mount(PREFIX, app=Router(inner, default=_not_found))]
