"""Commands that create, list, write, read and archive fields and pages."""

from __future__ import annotations

import click

from ..errors import InvalidPageError
from ..field import WriteResult
from .app import app, archived_hint, json_option, print_json, read_input, settings, warn
from .terminal import counted


def _report_write(result: WriteResult, as_json: bool) -> None:
    if as_json:
        print_json(result.to_json())
        return
    for page in result.pages:
        click.echo(f"{page.action} {result.field}/{page.filename} ({page.bytes:,} bytes)")
        if page.previous:
            click.echo(f"  the version it replaced is kept as {result.field}/{page.previous} "
                       "(`deepfield restore` brings it back)")
    if len(result.pages) > 1:
        click.echo(f"the page was over 8 KB and was split into {len(result.pages)} linked parts")
    for warning in result.warnings:
        warn(warning)


@app.command("new")
@click.argument("name")
@click.option("--intro", default=None, help="Introduction written to the field's index.md.")
@json_option
@click.pass_context
def new_field(ctx: click.Context, name: str, intro: str | None, as_json: bool) -> None:
    """Create a field NAME (a folder of pages) in the store.

    NAME uses lowercase letters, digits and hyphens; `ui` is reserved (the HTTP server's
    /ui/ is the memory console).
    """
    store = settings(ctx).store()
    field = store.create_field(name, intro=intro)
    # A bucket store's field lives in the bucket; field.path is only this process's copy.
    url = getattr(store, "url", None)
    where = f"{url.rstrip('/')}/{field.name}" if url else str(field.path)
    if as_json:
        print_json({"field": field.name, "path": where})
    else:
        click.echo(f"created field {field.name} at {where}")


@app.command("ls")
@click.argument("field", required=False)
@click.option("--archived", is_flag=True, help="List the pages in the field's archive/ instead.")
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, field: str | None, archived: bool, as_json: bool) -> None:
    """List the store's fields, or the pages of FIELD."""
    env = settings(ctx)
    if field is None and archived:  # silently listing the fields answered another question
        raise click.UsageError("--archived needs FIELD: `deepfield ls FIELD --archived`")
    if field is None:
        store = env.store()
        names = store.field_names()
        env.say_skipped()
        if as_json:
            print_json({"store": env.where(), "fields": names})
        else:
            click.echo("\n".join(names) if names else f"no fields yet in {env.where()}")
        return
    fld = env.field(field)
    if archived:
        names = fld.archived()
        if as_json:
            print_json({"field": fld.name, "archived": names})
        else:
            click.echo("\n".join(names) if names else "nothing archived")
        return
    docs = fld.pages()
    if as_json:
        print_json({
            "field": fld.name,
            "pages": [
                {"filename": d.filename, "uuid": d.uuid, "title": d.title, "summary": d.summary,
                 "last_modified": d.last_modified, "bytes": d.size}
                for d in docs
            ],
        })
        return
    for doc in docs:
        # One line per page: a title or summary written with line breaks is folded here.
        summary = f" — {' '.join(doc.summary.split())}" if doc.summary else ""
        click.echo(f"{doc.filename}  {' '.join(doc.title.split())}{summary}")
    if not docs:
        click.echo(f"no pages in {fld.name}")


@app.command("write")
@click.argument("field")
@click.argument("source", metavar="FILE|-")
@click.option("--name", default=None,
              help="Filename to use (default: derived from the title); a page of that name is "
              "replaced, keeping its uuid and created date, and its previous version is kept "
              "in the field's archive/.")
@json_option
@click.pass_context
def write_cmd(ctx: click.Context, field: str, source: str, name: str | None, as_json: bool) -> None:
    """Store a Markdown page (with or without frontmatter) from FILE or standard input.

    Missing frontmatter is filled in (title, uuid, created, updated), a page carrying the uuid
    of an existing page replaces it, and pages over 8 KB are split into linked parts.
    """
    fld = settings(ctx).field(field)
    what = "standard input" if source == "-" else source
    data = read_input(source)
    if not data.strip():
        raise InvalidPageError(f"{what} is empty", "give a file with Markdown text")
    _report_write(fld.write(data, name=name), as_json)


@app.command("add")
@click.argument("field")
@click.argument("text", metavar="TEXT|-")
@click.option("--title", required=True, help="Title of the new page.")
@click.option("--summary", default=None, help="One-sentence summary (the page's memo).")
@click.option("--name", default=None,
              help="Filename to use (default: derived from the title); a page of that name is "
              "replaced, keeping its uuid and created date, and its previous version is kept "
              "in the field's archive/.")
@json_option
@click.pass_context
def add_cmd(
    ctx: click.Context, field: str, text: str, title: str, summary: str | None,
    name: str | None, as_json: bool,
) -> None:
    """Add a page titled --title whose body is TEXT (or standard input for -).

    A frontmatter block the text begins with (a note piped in whole) is not kept as body
    text: its keys join the page's frontmatter, --title and --summary winning over its
    title and summary (a uuid there is refused: use `deepfield write` for that; so is a
    block that is not valid YAML)."""
    if not title.strip():
        raise click.BadParameter("the title is empty; give the page a few words",
                                 param_hint="--title")
    fld = settings(ctx).field(field)
    if text == "-":
        body = read_input("-")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidPageError("standard input is not valid UTF-8") from None
    # A frontmatter block the text begins with is read by Field.add (field_add.py).
    _report_write(fld.add(title, text, summary=summary, name=name), as_json)


@app.command("read")
@click.argument("field")
@click.argument("page", metavar="PAGE|UUID")
@click.option("--outline", "outline_only", is_flag=True,
              help="Headings and first sentences instead of the whole page (for a page split "
              "into parts: of every part, each part's file named).")
@click.option("--depth", default=2, show_default=True, type=click.IntRange(0, 6),
              help="Deepest heading level in the outline.")
@click.option("--sentences", default=1, show_default=True, type=click.IntRange(0, 50),
              help="Sentences shown under each outline heading.")
@click.option("--section", default=None,
              help="Return one section (heading text or A > B path; where several "
              "headings match, NAME@LINE: the line its heading is on, e.g. Notes@11). A page "
              "split into parts: from the part read, else the first part that has it.")
@json_option
@click.pass_context
def read_cmd(
    ctx: click.Context, field: str, page: str, outline_only: bool, depth: int, sentences: int,
    section: str | None, as_json: bool,
) -> None:
    """Read a page by filename, name or uuid: whole, as an outline, or one section."""
    if outline_only and section is not None:  # one would be ignored (HTTP answers 400)
        raise click.UsageError("--outline and --section ask for different views: give one "
                               "(--section reads that section, --outline lists the headings)")
    view = settings(ctx).field(field).read(
        page, outline_only=outline_only, depth=depth, sentences=sentences, section=section
    )
    if as_json:
        print_json(view.to_json())
        return
    for warning in view.warnings:
        warn(warning)
    click.echo(view.text, nl=not view.text.endswith("\n"))


@app.command("rm")
@click.argument("field")
@click.argument("page", metavar="PAGE|UUID")
@json_option
@click.pass_context
def rm_cmd(ctx: click.Context, field: str, page: str, as_json: bool) -> None:
    """Archive a page: move it into the field's archive/ folder (restorable, never deleted).

    A page split into parts goes with all its parts; pages it superseded are shown in search
    again (their superseded_by link is removed, and said); pending review items naming it are
    closed as obsolete (they could never be resolved)."""
    fld = settings(ctx).field(field)
    with archived_hint(fld, page):
        result = fld.archive_page(page)
    if as_json:
        print_json(result.to_json())
        return
    click.echo(f"archived to {fld.name}/{result.archived[0]} (bring it back with "
               "`deepfield restore`)")
    if len(result.archived) > 1:
        click.echo(f"  with the page's other {len(result.archived) - 1} parts: "
                   + ", ".join(result.archived[1:]))
    for name in result.unsuperseded:
        click.echo(f"  {fld.name}/{name} is no longer marked superseded (its successor was "
                   "archived; its superseded_by link was removed)")
    if result.settled:
        click.echo(f"  review {counted(len(result.settled), 'item')} naming it closed as "
                   f"obsolete: {', '.join(result.settled)}")
    for warning in result.warnings:
        warn(warning)


@app.command("restore")
@click.argument("field")
@click.argument("name")
@click.option("--as", "as_name", default=None,
              help="Restore under another filename (not index or listing; not for a split "
              "page).")
@json_option
@click.pass_context
def restore_cmd(
    ctx: click.Context, field: str, name: str, as_name: str | None, as_json: bool
) -> None:
    """Move an archived page back into the field.

    NAME is a page's name or uuid (its most recently archived version comes back, with all
    its parts if it was split) or an archived file exactly, as `deepfield ls FIELD --archived`
    lists it (archive/NAME.md, NAME--archived-….md)."""
    fld = settings(ctx).field(field)
    result = fld.restore_page(name, as_name=as_name)
    if as_json:
        print_json(result.to_json())
        return
    click.echo(f"restored {fld.name}/{result.filename} from {result.source}")
    if result.others:
        click.echo(f"  the newest of {len(result.others) + 1} archived versions; others: "
                   + ", ".join(f"archive/{n}" for n in result.others)
                   + f" (`deepfield restore {fld.name} archive/NAME.md` restores one)")
    if len(result.restored) > 1:
        click.echo(f"  with the page's other {len(result.restored) - 1} parts: "
                   + ", ".join(result.restored[1:]))
    if result.new_uuid:
        click.echo(f"  given a new uuid {result.new_uuid} (its own belongs to a live page)")
    for old in result.relinked:
        click.echo(f"  {fld.name}/{old} is marked superseded by it again")
    for warning in result.warnings:
        warn(warning)
