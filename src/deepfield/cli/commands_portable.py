"""Commands that move fields around: pack, unpack, and remote fields (fetch, search).

Any command that takes a FIELD (``search -f``, ``read``, ``ls``, ...) also accepts a remote
field there: ``NAME.memoryfield.zip``, ``http(s)://…``, ``s3://bucket/prefix`` or
``git+URL[#ref]``, pinned with ``#sha256=HEX`` for zips (see deepfield.portable.remote).
"""

from __future__ import annotations

from pathlib import Path

import click

from ..portable import open_remote, pack, remote_search, unpack
from ..search import MODES, search_fields
from .app import app, json_option, print_json, settings, warn


@app.command("pack")
@click.argument("field")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=None,
              help="Zip to write, outside the field's folder (default: "
              "./FIELD.memoryfield.zip).")
@click.option("--with-index", is_flag=True,
              help="Include the field's <model-code>.sqlite3 index (a consistent snapshot).")
@click.option("--force", is_flag=True, help="Replace the output file if it exists.")
@json_option
@click.pass_context
def pack_cmd(ctx: click.Context, field: str, output: Path | None, with_index: bool,
             force: bool, as_json: bool) -> None:
    """Write FIELD as a memoryfield zip and print its sha256 (the pin to share with it).

    The zip holds the pages, index.md, listing.md and other files and sub-folders without
    pages (review/ too); archive/, activation/ (this machine's usage log) and hidden folders
    are left out. Packing the same pages twice gives the same sha256.
    """
    result = pack(settings(ctx).field(field), output, with_index=with_index, force=force)
    if as_json:
        print_json(result.to_json())
        return
    for warning in result.warnings:
        warn(warning)
    extra = f", index {result.index}" if result.index else ""
    click.echo(f"packed {result.pages} pages ({result.files} files{extra}, "
               f"a {result.bytes:,}-byte zip) into {result.path}")
    click.echo(f"sha256 {result.sha256}")


@app.command("unpack")
@click.argument("zip_path", metavar="ZIP", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--as", "name", default=None, help="Field name (default: the zip's name).")
@click.option("--sha256", "pin", default=None,
              help="Refuse the zip unless its sha256 is this (checked before anything is used).")
@json_option
@click.pass_context
def unpack_cmd(ctx: click.Context, zip_path: Path, name: str | None, pin: str | None,
               as_json: bool) -> None:
    """Check ZIP and unpack it into the store as a new field (never over an existing one).

    Refused with a clear error: a wrong pin, a damaged zip, path traversal, absolute paths,
    symbolic links, pages in sub-folders, names that differ only in case and zip bombs.
    Nothing is written unless all is well. Left out with a warning: what pack never writes (a
    sender's activation/ log, index journals, page names the spec forbids, pages that are not
    UTF-8). A shipped index lends only vectors of the pages' own text; the index is rebuilt.
    """
    result = unpack(settings(ctx).store(), zip_path, name=name, sha256=pin)
    if as_json:
        print_json(result.to_json())
        return
    for warning in result.warnings:  # what was left out, and why (as pack says it)
        warn(warning)
    click.echo(f"unpacked {result.pages} pages ({result.files} files, {result.bytes:,} bytes "
               f"unzipped) into {result.path}")
    click.echo(f"sha256 {result.sha256}" + (" (matches the pin)" if pin else ""))


@app.group("remote")
def remote_group() -> None:
    """Fields elsewhere: a zip, an HTTP(S) server, s3://bucket/prefix, git+URL[#ref].

    They are mirrored into a local cache ($XDG_CACHE_HOME/deepfield/remote) with their own
    index; every other command accepts them as FIELD too. When the source cannot be reached,
    the cached copy is used with a warning.
    """


@remote_group.command("fetch")
@click.argument("source")
@click.option("--sha256", "pin", default=None, help="Pin for a zip source.")
@json_option
@click.pass_context
def remote_fetch(ctx: click.Context, source: str, pin: str | None, as_json: bool) -> None:
    """Refresh the local mirror of SOURCE (only changed files are fetched)."""
    remote = open_remote(source, embedder=settings(ctx).embedder(), pin=pin)
    remote.close()  # only the refresh was wanted; its index connection is not needed
    report = remote.refresh_report
    assert report is not None
    if as_json:
        print_json(report.to_json() | {"field": remote.name, "mirror": str(remote.path)})
        return
    for warning in report.warnings:
        warn(warning)
    click.echo(f"{remote.name}: {report.fetched} fetched, {report.unchanged} unchanged, "
               f"{report.removed} removed ({report.seconds:.2f} s), mirror {remote.path}")


@remote_group.command("search")
@click.argument("source")
@click.argument("query")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="Mode for the local mirror (a server's /search picks its own). Default: "
              "hybrid with an embedding model, else bm25.")
@click.option("--sha256", "pin", default=None, help="Pin for a zip source.")
@json_option
@click.pass_context
def remote_search_cmd(ctx: click.Context, source: str, query: str, k: int, mode: str | None,
                      pin: str | None, as_json: bool) -> None:
    """Search SOURCE: an HTTP server's own /search when it has one, else the local mirror."""
    from ..portable.remote import split_pin

    if pin is None:
        source, pin = split_pin(source)
    # A pin is checked on the zip, so a pinned server is searched through its mirror.
    if pin is None and source.lower().startswith(("http://", "https://")) \
            and not source.endswith(".zip"):
        from ..errors import RemoteUnavailableError

        try:
            results = remote_search(source, query, k)
        except RemoteUnavailableError:
            results = None
        if results is not None:
            if as_json:
                print_json({"results": results, "count": len(results), "query": query,
                            "source": "server"})
                return
            for rank, item in enumerate(results, start=1):
                front = item.get("frontmatter") or {}
                title = front.get("title", "") if isinstance(front, dict) else ""
                click.echo(f"{rank:2}. {item['filename']}  {title}")
            if not results:
                click.echo("no results")
            return
    remote = open_remote(source, embedder=settings(ctx).embedder(), pin=pin)
    for warning in remote.refresh_report.warnings if remote.refresh_report else ():
        warn(warning)
    try:
        response = search_fields([remote], query, k=k, mode=mode)
    finally:
        remote.close()
    if as_json:
        print_json(response.to_json() | {"source": "mirror"})
        return
    from .commands_search import _print_response

    _print_response(response)
