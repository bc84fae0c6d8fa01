"""Turning memory into HTML for the console: templates, safe Markdown, the supersession graph.

Everything a page, a search result or a research trace holds is memory text, written by
people and agents alike, so it is escaped everywhere: the templates autoescape, and Markdown
is rendered by markdown-it with raw HTML turned off (a ``<script>`` in a page shows as text)
and its link check (no ``javascript:``, ``vbscript:``, ``file:`` or non-image ``data:``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from .guard import Refused, logged_in, secure, token_for

MAX_RENDER_BYTES = 512 * 1024
"""Pages larger than this are shown as their outline, with a link to the raw text."""

_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_env = Environment(
    loader=PackageLoader("deepfield.server.console", "templates"),
    autoescape=select_autoescape(["html"], default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def markdown_html(text: str) -> Markup:
    """``text`` rendered as HTML, raw HTML in it escaped (never passed through)."""
    return Markup(_markdown.render(text))


def _score(value: Any) -> str:
    """Scores to three decimals; other values (counts, text) as they are."""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


_env.filters["score"] = _score


def _done(request: Request) -> str | None:
    """The note a write's redirect carries (``?done=``), only when the browser came from the
    console itself: a link from elsewhere cannot put its words in the console's mouth."""
    if request.headers.get("sec-fetch-site", "same-origin") != "same-origin":
        return None
    return request.query_params.get("done")


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template rendered for ``request``, with the security headers and the session's
    CSRF token (``csrf``) available to its forms."""
    base = {"csrf": token_for(request), "request": request, "nav": context.pop("nav", ""),
            "field": context.pop("field", None), "login": logged_in(request),
            "done": context.pop("done", _done(request))}
    html = _env.get_template(template).render(**base, **context)
    response = HTMLResponse(html, status_code=status)
    return secure(response, request)  # type: ignore[return-value]


def refusal_page(request: Request, refusal: Refused) -> HTMLResponse:
    response = page(request, "error.html", refusal.status, title=f"{refusal.status}",
                    message=refusal.message, hint=refusal.hint, login_prompt=refusal.login)
    response.headers.update(refusal.headers)
    return response


# --------------------------------------------------------------------------- the graph


@dataclass(frozen=True)
class Node:
    filename: str
    x: int
    y: int
    focus: bool
    archived: bool = False


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Graph:
    """A supersession chain laid out left (oldest) to right (newest), for inline SVG."""

    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


NODE_W, NODE_H, GAP_X, GAP_Y = 220, 34, 60, 16
MAX_NODES = 40


def chain_graph(edges: dict[str, set[str]], focus: str) -> Graph | None:
    """The pages linked to ``focus`` by supersession (``edges``: newer -> {older}), or None
    when it is linked to none. Each page's column is the length of the longest chain of
    older pages behind it."""
    older = {k: set(v) for k, v in edges.items()}
    newer: dict[str, set[str]] = {}
    for new, olds in older.items():
        for old in olds:
            newer.setdefault(old, set()).add(new)
    seen = {focus}
    stack = [focus]
    while stack and len(seen) < MAX_NODES:
        current = stack.pop()
        for other in sorted(older.get(current, set()) | newer.get(current, set())):
            if other not in seen:
                seen.add(other)
                stack.append(other)
    if len(seen) == 1:
        return None
    column: dict[str, int] = {}

    def depth(name: str, path: frozenset[str]) -> int:
        if name not in column:
            behind = [o for o in older.get(name, ()) if o in seen and o not in path]
            column[name] = 1 + max((depth(o, path | {name}) for o in behind), default=-1)
        return column[name]

    for name in sorted(seen):
        depth(name, frozenset())
    rows: dict[int, int] = {}
    place: dict[str, tuple[int, int]] = {}
    for name in sorted(seen, key=lambda n: (column[n], n)):
        row = rows.get(column[name], 0)
        rows[column[name]] = row + 1
        place[name] = (8 + column[name] * (NODE_W + GAP_X), 8 + row * (NODE_H + GAP_Y))
    nodes = [Node(n, *place[n], focus=n == focus) for n in sorted(seen)]
    lines = []
    for new in sorted(seen):
        for old in sorted(older.get(new, ())):
            if old in place:
                (nx, ny), (ox, oy) = place[new], place[old]
                lines.append(Edge(ox + NODE_W, oy + NODE_H // 2, nx, ny + NODE_H // 2))
    width = 16 + (max(column.values()) + 1) * (NODE_W + GAP_X) - GAP_X
    height = 16 + max(rows.values()) * (NODE_H + GAP_Y) - GAP_Y
    return Graph(nodes, lines, width, height)
