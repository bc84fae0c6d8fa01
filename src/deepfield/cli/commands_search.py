"""Commands that build indexes and search them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from ..domains.atomic import KINDS, Filters
from ..errors import DeepfieldError
from ..field import Field
from ..relative_dates import shown
from ..search import MODES, UNITS, SearchResponse, search_fields
from .app import (
    app,
    json_option,
    print_json,
    print_json_or_fail,
    settings,
    warn,
)
from .indexing import fast_option, finish_interrupted, index_fields, runs_json
from .terminal import secho


def process_age() -> float:
    """Seconds since this process started (Linux; elsewhere 0)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            since_boot = float(uptime.read().split()[0])
        return max(0.0, since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _index_fields(fields: list[Field], *, rebuild: bool, embed: bool, verify: bool,
                  as_json: bool, strict: bool, fast: bool | None = None) -> None:
    started = time.perf_counter()
    if fast is not None:
        for fld in fields:
            fld.fast = fast
    runs = index_fields(fields, rebuild=rebuild, verify=verify, embed=embed, as_json=as_json)
    if any(run.interrupted for run in runs):
        finish_interrupted(runs, as_json, started)
        return
    warned = any(run.document["warnings"] for run in runs)
    failure = DeepfieldError("the index reported warnings and --strict was given",
                             "fix the files named in the warnings") if strict and warned else None
    print_json_or_fail(runs_json(runs, started) if as_json else None, failure)


@app.command("index")
@click.option("--field", "-f", "fields", multiple=True, help="Field to index (default: all).")
@click.option("--embed/--no-embed", default=True, show_default=True,
              help="Compute vectors now (keyword search works without them).")
@fast_option
@click.option("--quick", is_flag=True,
              help="Trust file size and mtime instead of re-hashing every page (and skip "
              "SQLite's check of the index file, which heals a damaged one).")
@click.option("--strict", is_flag=True, help="Exit non-zero when any page has a warning.")
@json_option
@click.pass_context
def index_cmd(ctx: click.Context, fields: tuple[str, ...], embed: bool, fast: bool | None,
              quick: bool, strict: bool, as_json: bool) -> None:
    """Bring indexes up to date: re-read changed pages, drop deleted ones, embed new chunks.

    Shows progress (a bar on a terminal, a line every few seconds otherwise) and reports the
    encoder's passes and tokens by purpose; Ctrl-C keeps everything computed so far."""
    env = settings(ctx)
    _index_fields(env.chosen_fields(fields), rebuild=False, embed=embed, verify=not quick,
                  as_json=as_json, strict=strict, fast=fast)


@app.command("reindex")
@click.option("--field", "-f", "fields", multiple=True, help="Field to rebuild (default: all).")
@click.option("--embed/--no-embed", default=True, show_default=True,
              help="Compute vectors now.")
@fast_option
@json_option
@click.pass_context
def reindex_cmd(ctx: click.Context, fields: tuple[str, ...], embed: bool, fast: bool | None,
                as_json: bool) -> None:
    """Rebuild indexes from the Markdown pages alone (indexes are derived data)."""
    env = settings(ctx)
    _index_fields(env.chosen_fields(fields), rebuild=True, embed=embed, verify=True,
                  as_json=as_json, strict=False, fast=fast)


def _print_response(response: SearchResponse) -> None:
    for warning in response.warnings:
        warn(warning)
    if not response.results:
        click.echo("no results")
        return
    confidence = response.confidence
    click.secho(f"confidence: {confidence.level} — {confidence.reason}", dim=True)
    for rank, hit in enumerate(response.results, start=1):
        secho(f"{rank:2}. {hit.field}/{hit.filename}", bold=True, nl=False)
        click.echo(f"  score {hit.score:.3f}")
        line = f"    {hit.title}" + (f" — {hit.summary}" if hit.summary else "")
        click.echo(line)
        where = f"§ {hit.heading} · " if hit.heading else ""
        # The line the snippet shows, as research cites it (the chunk's range is in --json).
        secho(f"    {where}line {hit.snippet_line}", dim=True)
        click.echo(f"    {hit.snippet}")
        if dates := shown(hit.relative_dates()):  # "yesterday" on the page's day
            secho(f"    {dates}", dim=True)


def _batch(fields: list[Field], path: str, k: int, mode: str | None, unit: str,
           where: Filters | None = None, *, include_superseded: bool = False) -> None:
    try:
        with click.open_file(path, "r", encoding="utf-8") as source:
            for number, raw in enumerate(source, start=1):
                _batch_line(fields, number, raw, k, mode, unit, where,
                            include_superseded=include_superseded)
    except UnicodeDecodeError as exc:
        raise DeepfieldError(f"batch file {path} is not UTF-8 text",
                             "write one query per line as UTF-8 text") from exc


BATCH_KEYS = frozenset({"query", "k", "mode", "unit", "id"})
"""What a JSON line of a batch file may hold."""


def _batch_line(fields: list[Field], number: int, raw: str, k: int, mode: str | None,
                unit: str, where: Filters | None = None, *,
                include_superseded: bool = False) -> None:
    """Answer one line of a batch file with one JSON line (errors included, never raised)."""
    line = raw.strip()
    if not line:
        return
    request: dict[str, Any] = {"query": line}
    if line.startswith("{"):
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            print_json({"line": number, "id": None, "error": f"invalid JSON: {exc.msg}"})
            return
        except RecursionError:  # ``{"q": [[[…]]]}`` deeper than Python's recursion limit
            print_json({"line": number, "id": None,
                        "error": "invalid JSON: nested too deeply"})
            return
    # A key this command does not read (``"field"``, ``"q"``) would otherwise be dropped and
    # the line answered as if it were not there: searching every field, say.
    if unknown := sorted(set(request) - BATCH_KEYS):
        print_json({"line": number, "id": request.get("id"),
                    "error": f"unknown key {', '.join(map(json.dumps, unknown))} (a line takes "
                             f"{', '.join(sorted(BATCH_KEYS))}; fields are chosen with -f)"})
        return
    query = request.get("query")
    if not isinstance(query, str) or not query.strip():
        print_json({"line": number, "id": request.get("id"), "error": "no query"})
        return
    try:
        asked_k, asked_mode, unit = _batch_options(request, k, mode, unit)
        response = search_fields(fields, query, k=asked_k, mode=asked_mode, unit=unit,
                                 include_superseded=include_superseded, where=where)
    except (DeepfieldError, ValueError) as exc:
        print_json({"line": number, "id": request.get("id"), "error": str(exc)})
        return
    out = response.to_json(with_text=unit == "chunk")
    out["line"] = number
    if "id" in request:
        out["id"] = request["id"]
    print_json(out)


MAX_K = 1000
"""The most results a search returns (-k, and a batch line's "k")."""


def _batch_options(request: dict[str, Any], k: int, mode: str | None,
                   unit: str) -> tuple[int, str | None, str]:
    """A batch line's k, mode and unit (the command's where it gives none), checked as the
    command's own -k, --mode and --unit are: ``"k": 1e9`` or ``true`` is an error line,
    not a search for a billion results or for one."""
    asked_k = request.get("k", k)
    if not isinstance(asked_k, int) or isinstance(asked_k, bool) or not 1 <= asked_k <= MAX_K:
        raise DeepfieldError(f"k must be a whole number from 1 to {MAX_K}, not "
                             f"{json.dumps(asked_k)}", 'send e.g. "k": 10')
    asked_mode = request.get("mode", mode)
    if asked_mode is not None and asked_mode not in MODES:
        raise DeepfieldError(f"unknown search mode {json.dumps(asked_mode)}",
                             "use bm25, vector or hybrid, or leave \"mode\" out")
    asked_unit = request.get("unit", unit)
    if asked_unit not in UNITS:
        raise DeepfieldError(f"unknown result unit {json.dumps(asked_unit)}",
                             "use page or chunk, or leave \"unit\" out")
    return asked_k, asked_mode, asked_unit


@app.command("search")
@click.argument("query", required=False)
@click.option("--field", "-f", "fields", multiple=True, help="Field to search (default: all).")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_K),
              help="Number of results.")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="bm25 (keywords), vector (meaning) or hybrid (both, BM25-led). Default: "
              "hybrid when the store has an embedding model, else bm25.")
@click.option("--unit", type=click.Choice(UNITS), default="page", show_default=True,
              help="One result per page (a stub) or per matching line, shown in its chunk "
              "(bm25 and hybrid rank the lines of the matching chunks on their own).")
@click.option("--batch", "batch", type=click.Path(allow_dash=True, dir_okay=False),
              default=None,
              help="Run many queries from a file (one per line, text or JSON objects with "
              "query/k/mode/unit/id); prints JSON lines.")
@click.option("--include-superseded", is_flag=True,
              help="Also return pages another page supersedes (hidden by default).")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS),
              help="Only atomic pages of this kind (repeat for several).")
@click.option("--category", "categories", multiple=True, metavar="NAME",
              help="Only pages filed under this category (repeat for several).")
@click.option("--concept", "concepts", multiple=True, metavar="NAME",
              help="Only pages tagged with this concept (repeat for several).")
@json_option
@click.pass_context
def search_cmd(ctx: click.Context, query: str | None, fields: tuple[str, ...], k: int,
               mode: str | None,
               unit: str, batch: str | None, include_superseded: bool, kinds: tuple[str, ...],
               categories: tuple[str, ...], concepts: tuple[str, ...], as_json: bool) -> None:
    """Search pages; results are stubs: filename, title, summary, score and best snippet.

    A first line (and "confidence" in --json) says how far the best snippets support an
    answer: high, low or none, with the reason (see `deepfield research --help`).
    """
    if any(not value.strip() for value in (*categories, *concepts)):
        raise click.UsageError("an empty --category or --concept would match every page; "
                               "give a name or leave the option out")
    env = settings(ctx)
    chosen = env.chosen_fields(fields)
    if batch is not None:
        if query:
            raise click.UsageError("give a QUERY or --batch FILE, not both")
        if batch != "-" and not Path(batch).is_file():
            raise click.BadParameter(f"no such file: {batch}", param_hint="--batch")
        _batch(chosen, batch, k, mode, unit, Filters.of(kinds, categories, concepts),
               include_superseded=include_superseded)
        return
    if not query or not query.strip():
        raise click.UsageError("give a QUERY (or --batch FILE)")
    # The budget counts from the start of this process: a one-shot search answers within it,
    # start-up included, and leaves what it could not embed to the next `deepfield index`.
    response = search_fields(chosen, query, k=k, mode=mode, unit=unit,
                             include_superseded=include_superseded,
                             where=Filters.of(kinds, categories, concepts),
                             started=time.monotonic() - process_age())
    if as_json:
        print_json(response.to_json(with_text=unit == "chunk"))
    else:
        _print_response(response)
