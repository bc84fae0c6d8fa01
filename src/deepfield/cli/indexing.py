"""Indexing fields from the CLI: sync, embed with progress, report what the encoder did.

Shared by ``index``, ``reindex``, ``import``, ``remember`` and ``demo``. Each field is synced
(keyword search is complete at once), then its pending work is embedded with a progress bar
on a terminal or a line every few seconds elsewhere (cli/progress.py). The report gives, per
field, the wall and CPU seconds of the whole step and the encoder's passes, tokens and seconds
by purpose (deepfield.embed.meter), and what is still pending by kind.

Ctrl-C stops after the batch in progress: every vector and term stored so far stays (each
batch is its own transaction), and the command says what is pending and exits 130.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import click

from ..embed.meter import Tally, encoding_json, totals
from ..field import Field
from .app import print_json, progress_bar, warn

INTERRUPTED_EXIT = 130


@dataclass
class IndexRun:
    """The report of one field's index step."""

    name: str
    document: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False


def _work_total(fld: Field) -> int:
    """Units of embedding work pending (chunks to encode, for vectors and for terms)."""
    pending = fld.with_index(lambda index: index.pending())
    total = pending.chunk_vectors
    if not fld.fast and fld.embedder is not None and fld.embedder.has_latent:
        total += pending.latent_terms
    if fld.page_vectors == "whole":
        total += pending.page_vectors
    return total


def index_field(fld: Field, *, rebuild: bool = False, verify: bool = True, embed: bool = True,
                show: bool = True) -> IndexRun:
    """Sync and (``embed``) embed one field; KeyboardInterrupt is caught and reported."""
    started, cpu = time.perf_counter(), time.process_time()
    embedder = fld.embedder
    before: dict[str, Tally] = embedder.meter.snapshot() if embedder is not None else {}
    run = IndexRun(fld.name)
    chunks = pages = latent = lines = skipped = 0
    warnings: list[str] = []
    report = None
    waiting = None
    try:
        if rebuild:
            fld.clear_index()
        files = len(list(fld.path.glob("*.md")))
        with progress_bar(f"indexing {fld.name}", files, show, "pages") as tick:
            report = fld.index(verify=verify, embed=False, progress=tick)
        if embed and fld.embedder is not None:
            waiting = fld.with_index(lambda index: index.pending())
            with progress_bar(f"embedding {fld.name}", _work_total(fld), show,
                              "chunks") as tick:
                done = fld.embed(progress=tick)
            chunks, pages, latent, lines = (done.chunks, done.pages, done.latent_chunks,
                                            done.latent_lines)
            skipped, warnings = done.skipped, done.warnings
    except KeyboardInterrupt:
        run.interrupted = True
    spent = embedder.meter.since(before) if embedder is not None else {}
    pending = fld.with_index(lambda index: index.pending())
    if run.interrupted and waiting is not None:
        # What is stored is what stopped waiting: the encoder's passes undercount it (a
        # window of record lines is composed from its lines' vectors, not encoded).
        chunks = max(0, waiting.chunk_vectors - pending.chunk_vectors)
        pages = max(0, waiting.page_vectors - pending.page_vectors)
        latent = max(0, waiting.latent_terms - pending.latent_terms)
    stats = fld.with_index(lambda index: index.stats())
    run.document = {
        "field": fld.name,
        "added": report.added if report else 0,
        "updated": report.updated if report else 0,
        "removed": report.removed if report else 0,
        "unchanged": report.unchanged if report else 0,
        "chunks_embedded": chunks, "pages_embedded": pages, "latent_terms": latent,
        "latent_lines": lines, "skipped": skipped or totals(spent).skipped,
        "pending": pending.to_json(),
        "pending_vectors": pending.chunk_vectors + pending.page_vectors,
        "encoding": encoding_json(spent),
        "seconds": round(time.perf_counter() - started, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "index": stats["index"], "model_code": stats["model_code"], "pages": stats["pages"],
        "chunks": stats["chunks"], "unencodable_chunks": stats["unencodable_chunks"],
        # The report's own warnings (a healed index says so there) and every page's (what
        # --strict fails on), as `deepfield index` always said; then what the encoder skipped.
        "warnings": list(dict.fromkeys([*report.warnings, *fld.warnings()])) if report else [],
        "encoder_warnings": warnings,
        "interrupted": run.interrupted,
    }
    return run


def describe(run: IndexRun) -> str:
    """One line for people: what changed, what the encoder did, what is pending."""
    return describe_document(run.document)


def describe_document(doc: dict[str, Any]) -> str:
    enc = doc["encoding"]
    pending = doc["pending"]
    waiting = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in pending.items() if n)
    # What this pass re-read; a write already indexed its own pages, so often nothing.
    moved = [f"{doc[key]} {key}" for key in ("added", "updated", "removed") if doc[key]]
    changes = f" (pages: {', '.join(moved)})" if moved else ""
    text = (f"{doc['field']}: {doc['pages']} pages, {doc['chunks']} chunks{changes}, "
            f"{doc['chunks_embedded']} chunk vectors, {doc['latent_terms']} latent terms; "
            f"{enc['passes']} encoder passes, {enc['tokens']:,} tokens in {doc['seconds']:.1f} s")
    return text + (f"; pending: {waiting}" if waiting else "")


def pending_note(runs: list[IndexRun]) -> str:
    """What an interrupted run left to do."""
    total: dict[str, int] = {}
    for run in runs:
        for kind, count in run.document["pending"].items():
            total[kind] = total.get(kind, 0) + count
    waiting = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in total.items() if n)
    return (f"interrupted: everything computed so far is stored; pending: {waiting or 'nothing'}"
            " (run `deepfield index` to finish)")


def index_fields(fields: list[Field], *, rebuild: bool = False, verify: bool = True,
                 embed: bool = True, as_json: bool = False) -> list[IndexRun]:
    """Index ``fields`` one after the other; prints a line per field (not with --json).
    Stops at Ctrl-C, after saying what is pending (then the caller exits 130)."""
    runs: list[IndexRun] = []
    for fld in fields:
        run = index_field(fld, rebuild=rebuild, verify=verify, embed=embed, show=not as_json)
        runs.append(run)
        if not as_json:
            click.echo(describe(run))
            for warning in run.document["warnings"] + run.document["encoder_warnings"]:
                warn(f"{fld.name}/{warning}")
        if run.interrupted:
            break
    return runs


def runs_json(runs: list[IndexRun], started: float) -> dict[str, Any]:
    """The --json document: per field, plus the totals of the whole command."""
    by_purpose: dict[str, Tally] = {}
    for run in runs:
        for name, values in run.document["encoding"]["by_purpose"].items():
            by_purpose.setdefault(name, Tally()).add(Tally(**values))
    return {"fields": [run.document for run in runs], "encoding": encoding_json(by_purpose),
            "seconds": round(time.perf_counter() - started, 3),
            "interrupted": any(run.interrupted for run in runs)}


def finish_interrupted(runs: list[IndexRun], as_json: bool, started: float) -> None:
    """After Ctrl-C: print what is stored and pending, exit 130."""
    if as_json:
        print_json(runs_json(runs, started))
    click.echo(pending_note(runs), err=True)
    click.get_current_context().exit(INTERRUPTED_EXIT)


fast_option = click.option(
    "--fast/--no-fast", default=None,
    help="Fast mode: keyword entries and chunk vectors now, latent terms later (default: "
    "[index] fast in deepfield.toml, else off). --no-fast also computes what a fast run left.")


def index_after_write(fields: list[Field], *, fast: bool | None,
                      as_json: bool) -> list[dict[str, Any]]:
    """Index fields an import or remember just wrote (progress shown unless --json); on
    Ctrl-C, say what is pending and exit 130. Returns the fields' reports."""
    runs = []
    for fld in fields:
        if fast is not None:
            fld.fast = fast
        runs.append(index_field(fld, show=not as_json))
        if runs[-1].interrupted:
            click.echo(pending_note(runs), err=True)
            click.get_current_context().exit(INTERRUPTED_EXIT)
    return [run.document for run in runs]
