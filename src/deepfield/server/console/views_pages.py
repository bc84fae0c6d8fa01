"""Console views of fields and pages: the lists, a page rendered or as its outline, its raw
text with line anchors, editing (the HTTP API's PUT writer, with its ETag), archive, restore.

Viewing a page in the console is an inspection, not a use: it is read with ``record=False``,
so browsing does not change the activation it shows.
"""

from __future__ import annotations

import errno
import math
import time
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...errors import DeepfieldError, InvalidPageError, PageNotFoundError
from ...field import Field
from ...fsutil import read_no_follow
from ...manage.activation import load_activation
from ...manage.supersede import _graph
from ...page import INTRO_FILE, LISTING_FILE, Page, derive_title, is_valid_name
from ...read import PageView
from ..hints import error_status
from ..routes_spec import _archive, _write, etag_of
from .common import Form, action, field_url, int_arg, one, redirect, service_of, view
from .render import MAX_RENDER_BYTES, chain_graph, markdown_html, page


@view
async def home(request: Request) -> Response:
    service = service_of(request)
    names = service.field_names()

    def summary(f: Field) -> dict[str, Any]:
        docs = f.pages()
        return {"name": f.name, "pages": len(docs), "intro": (f.intro() or "").strip()[:300]}

    fields = [await service.run(n, summary) for n in names]
    return page(request, "home.html", nav="fields", fields=fields)


def _page_rows(f: Field) -> list[dict[str, Any]]:
    """Every page with its title, summary, last update and activation (index only)."""
    log_ = load_activation(f.path)
    now = time.time()
    rows = []
    for doc in f.pages():
        front = doc.frontmatter or {}
        b = log_.base_level(log_.key_for(doc.filename, doc.uuid), now)
        rows.append({"filename": doc.filename, "title": doc.title, "summary": doc.summary,
                     "updated": str(front.get("updated") or doc.last_modified),
                     "activation": b, "bytes": doc.size, "warnings": doc.warnings,
                     "superseded": bool(front.get("superseded_by")),
                     "review": str(front.get("review", "")) == "pending"})
    return rows


SORTS = {"filename": (lambda r: r["filename"], False),
         "updated": (lambda r: r["updated"], True),
         "activation": (lambda r: -math.inf if r["activation"] is None else r["activation"], True)}


PAGE_ROWS = 500
"""Pages listed at once (a field of 10,000 pages is shown 500 at a time)."""


@view
async def field_pages(request: Request) -> Response:
    name = request.path_params["field"]
    rows, intro = await service_of(request).run(name, lambda f: (_page_rows(f), f.intro()))
    sort = request.query_params.get("sort", "filename")
    key, reverse = SORTS.get(sort, SORTS["filename"])
    rows.sort(key=key, reverse=reverse)
    start = int_arg(request.query_params.get("start"), 0, 0, max(0, len(rows) - 1),
                    "start") or 0
    return page(request, "field.html", field=name, nav="pages",
                pages=rows[start:start + PAGE_ROWS], total=len(rows), start=start,
                step=PAGE_ROWS, sort=sort, intro=intro)


@dataclass
class Loaded:
    """A page file as the console shows it."""

    filename: str
    data: bytes
    text: str
    page: Page | None
    view: PageView | None
    warnings: list[str]

    @property
    def etag(self) -> str:
        return etag_of(self.data)


def load_page(request: Request, f: Field, ref: str) -> Loaded:
    """The page's bytes and parsed view; a file deepfield cannot parse (not UTF-8, broken
    frontmatter) comes back as it is, with deepfield's warning."""
    filename = f.resolve(ref) if ref not in (INTRO_FILE, LISTING_FILE) else ref
    path = service_of(request).page_path(f, filename, existing=True)
    try:
        data, _ = read_no_follow(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.EISDIR):
            raise PageNotFoundError(f"no page {filename!r} in field {f.name}") from None
        raise
    text = data.decode("utf-8", errors="replace")
    if filename in (INTRO_FILE, LISTING_FILE):
        return Loaded(filename, data, text, Page(body=text), None, [])
    try:
        pview = f.read(filename, outline_only=True, record=False)
    except InvalidPageError as exc:  # not UTF-8, binary: shown as it is
        return Loaded(filename, data, text, None, None, [exc.message])
    parsed = Page.parse(text)
    return Loaded(filename, data, text, parsed, pview, list(pview.warnings))


@view
async def page_view(request: Request) -> Response:
    name, ref = request.path_params["field"], request.path_params["page"]
    service = service_of(request)
    wanted = request.query_params.get("view", "rendered")

    def run(f: Field) -> tuple[Loaded, Any]:
        f.ensure_synced(embed=False)
        loaded = load_page(request, f, ref)
        edges, _ = _graph(f)
        return loaded, chain_graph(edges, loaded.filename)

    loaded, graph = await service.run(name, run)
    parsed, pview = loaded.page, loaded.view
    too_large = len(loaded.data) > MAX_RENDER_BYTES
    as_is = parsed is None or parsed.frontmatter_error is not None
    shown = "as-is" if as_is else ("outline" if wanted == "outline" or too_large
                                   else "rendered")
    html = markdown_html(parsed.body) if shown == "rendered" and parsed is not None else None
    title = pview.title if pview else (derive_title(parsed, loaded.filename[:-3])
                                      if parsed else loaded.filename)
    return page(request, "page.html", field=name, nav="pages", filename=loaded.filename,
                title=title, view=pview, shown=shown, html=html, text=loaded.text,
                too_large=too_large, size=len(loaded.data), etag=loaded.etag,
                warnings=loaded.warnings, graph=graph,
                frontmatter=(parsed.frontmatter if parsed else None) or {},
                editable=loaded.filename != LISTING_FILE,
                # Writes take spec names only: a page kept under another name ("My Notes.md")
                # offered an edit that every save refused.
                savable=loaded.filename == INTRO_FILE or is_valid_name(loaded.filename[:-3]))


@view
async def raw_view(request: Request) -> Response:
    name, ref = request.path_params["field"], request.path_params["page"]
    loaded = await service_of(request).run(name, lambda f: load_page(request, f, ref))
    lines = loaded.text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return page(request, "raw.html", field=name, nav="pages", filename=loaded.filename,
                lines=lines, warnings=loaded.warnings, etag=loaded.etag)


@view
async def edit_form(request: Request) -> Response:
    name, ref = request.path_params["field"], request.path_params["page"]
    loaded = await service_of(request).run(name, lambda f: load_page(request, f, ref))
    if loaded.filename == LISTING_FILE:
        raise DeepfieldError(f"{LISTING_FILE} is generated from the pages",
                             "edit the pages instead")
    return page(request, "edit.html", field=name, nav="pages", filename=loaded.filename,
                text=loaded.text, etag=loaded.etag, current=None, error=None, new=False)


def put_request(if_match: str | None) -> Request:
    """The request the HTTP API's PUT writer reads its precondition from: the console's save
    is a PUT with ``If-Match`` set to the ETag the edit started from, and a new page's is a
    create-only PUT (``If-None-Match: *``), checked under the same lock as the write."""
    # A form's etag is whatever the browser posts: one that is not a header value (a
    # character beyond Latin-1) matches no version, so it is a stale edit (412), never a 500.
    headers = [(b"if-match", if_match.encode("latin-1", errors="replace"))] if if_match \
        else [(b"if-none-match", b"*")]
    return Request({"type": "http", "method": "PUT", "path": "/", "query_string": b"",
                    "headers": headers})


@action
async def edit_save(request: Request, form: Form) -> Response:
    name, filename = request.path_params["field"], request.path_params["page"]
    return await save_page(request, form, name, filename)


async def save_page(request: Request, form: Form, name: str, filename: str) -> Response:
    """Save the edit form through the HTTP API's PUT writer. A stale ETag is 412 with both
    versions; a new page (no ETag) is refused when one of that name appeared meanwhile."""
    service = service_of(request)
    text, etag = one(form, "text"), one(form, "etag")
    new = not etag

    def again(status: int, error: str, current: Loaded | None = None) -> Response:
        """The form again, the text as sent (nothing typed is lost), with what went wrong."""
        return page(request, "edit.html", status, field=name, nav="pages", filename=filename,
                    text=text, etag=current.etag if current else etag,
                    current=current.text if current else None, error=error, new=new)

    def save(f: Field) -> tuple[int, Any]:
        return _write(f, filename, text.encode("utf-8"), put_request(etag or None))

    try:
        service.page_path(service.field(name), filename, existing=not new)
        if filename == LISTING_FILE:
            raise DeepfieldError(f"{LISTING_FILE} is generated from the pages",
                                 "edit the pages instead")
        if not text.strip():
            return again(400, "the page is empty: write its text, or archive the page instead")
        status, _ = await service.run(name, save, write=True)
    except DeepfieldError as exc:
        return again(error_status(exc), f"{exc.message} ({exc.hint})" if exc.hint
                     else exc.message)
    if status == 412:
        current = await service.run(name, lambda f: load_page(request, f, filename))
        what = "already exists" if new else "changed since you opened it"
        return again(412, f"{filename} {what}: both versions are below", current)
    return redirect(request, field_url(name, "p", filename), done=f"saved {filename}")


@view
async def new_form(request: Request) -> Response:
    name = request.path_params["field"]
    service_of(request).field(name)
    return page(request, "edit.html", field=name, nav="pages", filename="",
                text="---\ntitle: \n---\n", etag="", current=None, error=None, new=True)


@action
async def new_save(request: Request, form: Form) -> Response:
    stem = one(form, "name").strip().removesuffix(".md")
    if not stem:
        raise DeepfieldError("give the new page a name", "lowercase letters, digits, hyphens")
    return await save_page(request, form, request.path_params["field"], f"{stem}.md")


@action
async def archive_page(request: Request, form: Form) -> Response:
    name, filename = request.path_params["field"], request.path_params["page"]
    service = service_of(request)
    service.page_path(service.field(name), filename, existing=True)
    where = await service.run(name, lambda f: _archive(f, filename), write=True)
    return redirect(request, field_url(name, "archive"), done=f"archived {filename} as {where}")


@view
async def archived(request: Request) -> Response:
    name = request.path_params["field"]
    names = await service_of(request).run(name, lambda f: f.archived())
    return page(request, "archive.html", field=name, nav="archive", archived=names,
                done=request.query_params.get("done"))


@action
async def restore(request: Request, form: Form) -> Response:
    name = request.path_params["field"]
    archived_name = one(form, "name")
    as_name = one(form, "as").strip() or None
    target = await service_of(request).run(
        name, lambda f: f.restore(archived_name, as_name=as_name), write=True)
    return redirect(request, field_url(name, "p", target), done=f"restored {target}")


@view
async def archived_raw(request: Request) -> Response:
    """An archived page's text (read only): what a restore would bring back."""
    name, archived_name = request.path_params["field"], request.path_params["page"]
    field = service_of(request).field(name)
    if archived_name not in await service_of(request).run(name, lambda f: f.archived()):
        raise PageNotFoundError(f"no archived page {archived_name!r} in {name}")
    path = field.path / "archive" / archived_name
    data, _ = await run_in_threadpool(read_no_follow, path)
    lines = data.decode("utf-8", errors="replace").split("\n")
    return page(request, "raw.html", field=name, nav="archive", filename=archived_name,
                lines=lines, warnings=["archived: restore it to make it a page again"],
                etag=etag_of(data))
