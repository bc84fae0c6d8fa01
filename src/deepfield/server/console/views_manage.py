"""Console views for managing memory: the review queue, forgetting (a dry run, then the
archive button), supersession, each field's index status, and the login prompt.

Each calls the library function the CLI command of the same name calls (``review``,
``forget``, ``supersede``, ``status``) and lays out its ``to_json()``.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...errors import DeepfieldError
from ...field import Field
from ...index.db import get_meta
from ...manage.forget import forget
from ...manage.review import ACTIONS, items, resolve_item, supersede_settling
from ...page import iso_from_timestamp
from .common import (
    Form,
    action,
    field_url,
    float_arg,
    int_arg,
    one,
    redirect,
    service_of,
    view,
)
from .guard import Refused, check_read, logged_in
from .render import page, refusal_page

ACTION_LABELS = {"accept": "accept: the new page supersedes the old",
                 "merge": "merge the new page into the old",
                 "keep-both": "keep both"}


@view
async def review(request: Request) -> Response:
    name = request.path_params["field"]
    show_all = request.query_params.get("all") == "1"

    def run(f: Field) -> tuple[list[dict[str, Any]], list[str]]:
        listed, warnings = items(f, include_resolved=show_all)
        return [i.to_json() for i in listed], warnings

    listed, warnings = await service_of(request).run(name, run)
    return page(request, "review.html", field=name, nav="review", items=listed,
                warnings=warnings, show_all=show_all, actions=ACTIONS, labels=ACTION_LABELS,
                done=request.query_params.get("done"))


@action
async def review_resolve(request: Request, form: Form) -> Response:
    name, item = request.path_params["field"], request.path_params["item"]
    chosen = one(form, "action")
    if chosen not in ACTIONS:
        raise DeepfieldError(f"unknown review action {chosen!r}", "use accept, merge or keep-both")
    outcome = await service_of(request).run(name, lambda f: resolve_item(f, item, chosen),
                                            write=True)
    return redirect(request, field_url(name, "review"),
                    done=f"{outcome['id']}: {chosen} ({outcome['new']} / {outcome['old']})")


def _rule(values: dict[str, str]) -> tuple[int | None, float | None]:
    keep_top = int_arg(values.get("keep_top"), None, 0, 10_000_000, "keep the top")
    older = float_arg(values.get("older_than"), "older than (days)")
    return keep_top, older


@view
async def forget_preview(request: Request) -> Response:
    name = request.path_params["field"]
    service = service_of(request)
    service.field(name)
    keep_top, older = _rule(dict(request.query_params))
    report = None
    if keep_top is not None or older is not None:
        report = (await service.run(name, lambda f: forget(
            f, keep_top=keep_top, older_than_days=older, dry_run=True))).to_json()
    return page(request, "forget.html", field=name, nav="forget", report=report,
                keep_top="" if keep_top is None else keep_top,
                older_than="" if older is None else older, result=None)


@action
async def forget_archive(request: Request, form: Form) -> Response:
    """Archive the pages of the dry run that are still ticked and still cold: the rule is run
    again under the field's lock, so a page pinned or used meanwhile is not archived."""
    name = request.path_params["field"]
    keep_top, older = _rule({k: one(form, k) for k in ("keep_top", "older_than")})
    if keep_top is None and older is None:
        raise DeepfieldError("forget needs a rule", "give keep the top and/or older than")
    ticked = set(form.get("page", []))

    def run(f: Field) -> dict[str, Any]:
        report = forget(f, keep_top=keep_top, older_than_days=older, dry_run=True)
        archived, skipped = [], []
        for entry in report.forgotten:
            if entry.filename in ticked and (f.path / entry.filename).is_file():
                # as `deepfield forget` does: a split page's parts go together (an earlier
                # part took this one along), and what it superseded is shown again
                archived += f.archive_page(entry.filename).archived
        still = {e.filename for e in report.forgotten}
        skipped = sorted(ticked - still)
        return {"archived": archived, "skipped": skipped}

    result = await service_of(request).run(name, run, write=True)
    return page(request, "forget.html", field=name, nav="forget", report=None,
                keep_top="" if keep_top is None else keep_top,
                older_than="" if older is None else older, result=result)


@action
async def supersede_page(request: Request, form: Form) -> Response:
    name, new = request.path_params["field"], request.path_params["page"]
    old = one(form, "old").strip()
    if not old:
        raise DeepfieldError("name the page this one supersedes", "a filename, stem or uuid")
    result = await service_of(request).run(name, lambda f: supersede_settling(f, old, new),
                                           write=True)
    done = f"{result.new} supersedes {', '.join(result.old)}"
    if result.warnings:
        done += " (" + "; ".join(result.warnings) + ")"
    return redirect(request, field_url(name, "p", result.new), done=done)


def field_status(f: Field) -> dict[str, Any]:
    """What ``deepfield status`` shows of a field, with the index's health and last sync."""
    report = f.ensure_synced(embed=False)
    index = f.index_handle()
    stats = dict(index.stats())
    synced = float(get_meta(index.conn, "synced_at") or 0.0)
    check = [row[0] for row in index.conn.execute("PRAGMA quick_check").fetchall()]
    pending, _ = items(f)
    return {"field": f.name, "stats": stats, "warnings": f.warnings() + report.warnings,
            "last_sync": iso_from_timestamp(synced) if synced else None,
            "last_sync_age": round(time.time() - synced, 1) if synced else None,
            "health": "ok" if check == ["ok"] else "; ".join(check[:5]),
            "review_pending": len(pending), "archived": len(f.archived())}


@view
async def status(request: Request) -> Response:
    service = service_of(request)
    rows = [await service.run(n, field_status) for n in service.field_names()]
    embedder = service.store.embedder
    return page(request, "status.html", nav="status", rows=rows,
                embedder=f"{embedder.name} ({embedder.model_code})" if embedder else None,
                store=str(service.store.root))


async def login(request: Request) -> Response:
    """The login prompt: 401 with the Basic challenge until the browser sends a valid login
    (it then sends it with every later request to /ui/), then back to the console."""
    try:
        check_read(request)
    except Refused as refusal:
        return refusal_page(request, refusal)
    auth = request.app.state.auth
    if not auth.enabled:
        return redirect(request, "/ui/", done="this server has no users: no login needed")
    if logged_in(request):
        back = request.query_params.get("next", "")
        # Only back into the console: never an open redirect to another site.
        return redirect(request, back if back.startswith("/ui/") and "//" not in back
                        else "/ui/")
    return refusal_page(request, Refused(401, "log in to write", "enter the user name and "
                                         "password set with `deepfield passwd USER`",
                                         auth.challenge(), login=True))
