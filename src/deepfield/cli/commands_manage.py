"""Commands that manage memory over time: activation, forget, supersede, review, watch."""

from __future__ import annotations

import math
import threading

import click

from ..manage.activation import load_activation, top_pages
from ..manage.forget import forget
from ..manage.review import ACTIONS, items, resolve_item, supersede_settling
from ..manage.watch import WatchEvent, watch
from .app import (
    app,
    archived_hint,
    json_option,
    print_json,
    said_in_report,
    say_error,
    settings,
    warn,
)
from .terminal import counted


@app.command("activation")
@click.argument("field")
@click.option("-k", "k", default=20, show_default=True, type=click.IntRange(1, 100000),
              help="Number of pages to show.")
@json_option
@click.pass_context
def activation_cmd(ctx: click.Context, field: str, k: int, as_json: bool) -> None:
    """Show FIELD's most used pages (reads, opened hits, citations) by activation."""
    fld = settings(ctx).field(field)
    with said_in_report():
        pages = top_pages(fld, k)
        warnings = load_activation(fld.path).warnings
    if as_json:
        print_json({"field": fld.name, "pages": [p.to_json() for p in pages],
                    "warnings": warnings})
        return
    for warning in warnings:
        warn(warning)
    for page in pages:
        click.echo(f"{page.activation:7.3f}  {page.uses:4} uses  last {page.last_used}  "
                   f"{page.filename}")
    if not pages:
        click.echo(f"no page of {fld.name} has been used yet")


def _finite_days(value: float | None) -> float | None:
    """``inf`` and ``nan`` pass FloatRange(0): a usage error like ``-1`` (exit 2), not 1."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number of days")
    return value


@app.command("forget")
@click.argument("field")
@click.option("--dry-run", is_flag=True, help="List what would be archived; move nothing.")
@click.option("--keep-top", type=click.IntRange(0), default=None,
              help="Keep the K most active pages.")
@click.option("--older-than", "older_than", type=click.FloatRange(0), default=None,
              metavar="DAYS", callback=lambda _ctx, _param, value: _finite_days(value),
              help="Only pages unused and unchanged for more than DAYS.")
@json_option
@click.pass_context
def forget_cmd(ctx: click.Context, field: str, dry_run: bool, keep_top: int | None,
               older_than: float | None, as_json: bool) -> None:
    """Move FIELD's coldest pages into archive/ (never deleted; `deepfield restore` undoes it).

    Pinned pages (`pinned: true`), `always_load: true` pages, domain pages (`role:`) and pages
    waiting for review (`review: pending`) are never forgotten; they are listed as kept. So
    is a page that supersedes a page that stays (archived, it would bring the outdated page
    back into search).
    """
    fld = settings(ctx).field(field)
    with said_in_report():
        report = forget(fld, keep_top=keep_top, older_than_days=older_than, dry_run=dry_run)
    if as_json:
        print_json(report.to_json())
    else:
        for warning in report.warnings:
            warn(warning)
        verb = "would archive" if dry_run else "archived"
        failed = set(report.not_archived)
        for entry in report.forgotten:
            if entry.filename not in failed:
                click.echo(f"{verb} {entry.filename}  ({entry.reason})")
        for entry in report.kept:
            click.echo(f"kept {entry.filename}  ({entry.reason})")
        done = "would be archived" if dry_run else "archived"
        count = len(report.forgotten) - len(failed)
        click.echo(f"{count} of {report.pages} pages {done}, "
                   f"{counted(len(report.kept), 'cold page')} kept (protected)")
        if report.archived:
            click.echo(f"bring one back with `deepfield restore {fld.name} NAME`", err=True)
    if report.not_archived:  # said above; the exit status tells scripts it did not all work
        if not as_json:
            say_error(f"{len(report.not_archived)} page(s) could not be archived",
                      "check the field folder's permissions")
        ctx.exit(1)


@app.command("supersede")
@click.argument("field")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@json_option
@click.pass_context
def supersede_cmd(ctx: click.Context, field: str, old: str, new: str, as_json: bool) -> None:
    """Mark page NEW as superseding page OLD (OLD is kept, hidden from default search).

    Review items about the two pages (`deepfield review`) are settled: the queue asked what
    this decides."""
    fld = settings(ctx).field(field)
    with archived_hint(fld, old, new):
        result = supersede_settling(fld, old, new)
    if as_json:
        print_json(result.to_json())
        return
    click.echo(f"{fld.name}/{result.new} supersedes {', '.join(result.old)}")
    for warning in result.warnings:
        warn(warning)
    if result.settled:
        click.echo(f"settled review {counted(len(result.settled), 'item')}: "
                   f"{', '.join(result.settled)}")


@app.command("review")
@click.argument("field")
@click.argument("item", required=False)
@click.argument("action", required=False, type=click.Choice(ACTIONS))
@click.option("--all", "show_all", is_flag=True, help="Also list resolved items.")
@json_option
@click.pass_context
def review_cmd(ctx: click.Context, field: str, item: str | None, action: str | None,
               show_all: bool, as_json: bool) -> None:
    """List FIELD's review queue, or resolve ITEM: accept (new supersedes old), merge (new
    page's text appended to the old one, new page archived) or keep-both (a dismissal: it
    works even when a page of the item is gone)."""
    fld = settings(ctx).field(field)
    if item is not None:
        if action is None:
            raise click.UsageError("give an ACTION: accept, merge or keep-both")
        outcome = resolve_item(fld, item, action)
        if as_json:
            print_json(outcome)
        else:
            click.echo(f"{outcome['id']}: {action} ({outcome['new']} / {outcome['old']})")
            for name in outcome.get("relinked", []):
                click.echo(f"  {fld.name}/{name} is now superseded by {outcome['old']} (the "
                           "merged page superseded it)")
            for name in outcome.get("unsuperseded", []):
                click.echo(f"  {fld.name}/{name} is no longer marked superseded (the merged "
                           "page that superseded it was archived)")
            if outcome.get("settled_reviews"):
                click.echo(f"  review {counted(len(outcome['settled_reviews']), 'item')} "
                           f"naming the merged page closed as obsolete: "
                           f"{', '.join(outcome['settled_reviews'])}")
            for warning in outcome.get("warnings", []):
                warn(warning)
        return
    listed, warnings = items(fld, include_resolved=show_all)
    if as_json:
        print_json({"field": fld.name, "items": [i.to_json() for i in listed],
                    "warnings": warnings})
        return
    for warning in warnings:
        warn(warning)
    for entry in listed:
        status = "" if entry.status == "pending" else f" [{entry.status}]"
        click.echo(f"{entry.id}  {entry.kind}{status}: {entry.new} vs {entry.old} — "
                   f"{entry.reason}")
    if not listed:
        click.echo("nothing to review")


@app.command("watch")
@click.argument("fields", nargs=-1, required=True)
@click.option("--embed/--no-embed", default=True, show_default=True,
              help="Embed new chunks as they appear (a few seconds per change), and the rest "
              "in the background between changes.")
@click.option("--seconds", type=click.FloatRange(0), default=None,
              help="Stop after this many seconds (default: until Ctrl-C).")
@json_option
@click.pass_context
def watch_cmd(ctx: click.Context, fields: tuple[str, ...], embed: bool, seconds: float | None,
              as_json: bool) -> None:
    """Re-index FIELDS whenever their pages change (prints one line per batch of changes)."""
    env = settings(ctx)
    chosen = [env.field(name) for name in fields]
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set) if seconds is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()

    def report(event: WatchEvent) -> None:
        if as_json:
            print_json(event.to_json())
        else:
            if event.background:
                left = sum(event.pending.values())
                click.echo(f"{event.field}: background: {event.chunks_embedded} chunk vectors, "
                           f"{event.latent_terms} latent terms, {left} pending")
            else:
                what = ", ".join(event.changed) if event.changed else "initial sync"
                click.echo(f"{event.field}: {what}: +{event.added} ~{event.updated} "
                           f"-{event.removed}, {event.chunks_embedded} chunks embedded")
            for warning in event.warnings:
                warn(f"{event.field}/{warning}")

    if not as_json:
        click.echo(f"watching {', '.join(f.name for f in chosen)} (Ctrl-C to stop)", err=True)
    try:
        watch(chosen, report, stop=stop, embed=embed)
    finally:
        if timer is not None:
            timer.cancel()
