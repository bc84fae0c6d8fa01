"""Reconcile the index with the field's Markdown files: the only writer of index rows.

A file is re-read only when its size or mtime changed (or always, with ``verify``), and
re-indexed only when its sha256 changed; deleted files are dropped; running it twice changes
nothing. Pages are parsed leniently: malformed frontmatter is indexed as text with a warning,
undecodable files are recorded with a warning and no chunks, and nothing is ever written to
the Markdown files. Vectors are computed afterwards, chunk by chunk, so keyword search is
complete as soon as the text is in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..page import PAGE_LIMIT_BYTES, Page, derive_title, frontmatter_json, metadata_warnings
from ..scan import SourceFile
from .chunking import chunk_page
from .cjk import cjk_index_terms
from .db import bump_generation, set_meta, transaction

MAX_INDEXED_BYTES = 1 << 20
"""Only the first MiB of a page is indexed (the spec requires only the first 8 KB)."""
RACY_SECONDS = 2.0
"""Files modified this close to the last sync are re-hashed even if size and mtime match."""
BATCH_DOCS = 200


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks_embedded: int = 0
    pages_embedded: int = 0
    pending_vectors: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    hashed: int = 0
    """Files read and hashed (new, changed by size or mtime, recently modified, or verified);
    0 means the folder was as the index last saw it."""

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


@dataclass(frozen=True)
class ParsedFile:
    sha256: bytes
    title: str
    uuid: str | None
    summary: str | None
    frontmatter: str
    chunks: list[tuple[int, str, str, int, int, str, str, str]]
    warnings: list[str]
    readable: bool = True
    """False for a binary or non-UTF-8 file: not a page (the spec: pages are UTF-8), so it
    gets no vector, no line in listing.md and no row in the spec's ``pages`` table."""


def read_source(source: SourceFile) -> tuple[bytes, bytes, bool]:
    """(sha256 of the whole file, the first MAX_INDEXED_BYTES, whether it was truncated)."""
    digest = hashlib.sha256()
    head = b""
    with source.path.open("rb") as handle:
        while True:
            block = handle.read(1 << 20)
            if not block:
                break
            digest.update(block)
            if len(head) < MAX_INDEXED_BYTES:
                head += block[: MAX_INDEXED_BYTES - len(head)]
    truncated = source.size > MAX_INDEXED_BYTES
    return digest.digest(), head, truncated


def _iso(moment: dt.date) -> str:
    return moment.isoformat().replace("+00:00", "Z")


_CONFLICT_MARK = re.compile(r"^(?:<{7}|>{7})(?: |$)|^={7}$")


def conflict_lines(text: str) -> list[int]:
    """Line numbers (1-based) of git's merge-conflict markers in ``text``, when it has both a
    start and an end marker (a lone "=======" is a setext heading's underline)."""
    found = [number for number, line in enumerate(text.split("\n"), 1)
             if _CONFLICT_MARK.match(line.rstrip("\r"))]
    lines = text.split("\n")
    starts = any(lines[n - 1].startswith("<<<<<<<") for n in found)
    ends = any(lines[n - 1].startswith(">>>>>>>") for n in found)
    return found if starts and ends else []


def parse_source(name: str, sha: bytes, head: bytes, truncated: bool) -> ParsedFile:
    stem = name[:-3]
    warnings: list[str] = []
    if b"\x00" in head:
        return ParsedFile(sha, stem, None, None, "null", [], [f"{name}: binary file, not indexed"],
                          readable=False)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(head) - 4:
            text = head[: exc.start].decode("utf-8")  # cut inside a multi-byte character
        else:
            return ParsedFile(
                sha, stem, None, None, "null", [],
                [f"{name}: not valid UTF-8 (byte {exc.start}), not indexed; re-save it as UTF-8"],
                readable=False,
            )
    if truncated:
        warnings.append(
            f"{name}: larger than {MAX_INDEXED_BYTES // 1024} KiB; only the start is indexed "
            "(split it into pages of at most 8 KB)"
        )
    if not text.strip():
        warnings.append(f"{name}: empty page")
    page = Page.parse(text.replace("\r\n", "\n"))
    conflict = conflict_lines(text)
    if conflict:
        # A git merge left both sides in the file: say that, not what YAML made of it.
        where = "frontmatter" if page.frontmatter_error else "text"
        warnings.append(f"{name}: unresolved merge conflict in its {where} (lines "
                        f"{', '.join(map(str, conflict[:6]))}); keep one side in an editor")
    elif page.frontmatter_error:
        warnings.append(
            f"{name}: {page.frontmatter_error}; indexed as plain text, the file was not changed"
        )
    else:
        warnings += [f"{name}: {problem}" for problem in metadata_warnings(page)]
        warnings += [f"{name}: {key} is an unquoted date, which YAML reads as a date object "
                     f"(the spec asks for a quoted string: {key}: "
                     f"'{_iso(page.get(key))}')"
                     for key in ("created", "updated")
                     if isinstance(page.get(key), dt.date)]
    title = derive_title(page, fallback=stem)
    rows = []
    for chunk in chunk_page(page):
        heading = " > ".join(chunk.heading_path)
        context = chunk_context(title, chunk.heading_path)
        rows.append(
            (
                chunk.ord, chunk.kind, heading, chunk.line_start, chunk.line_end,
                chunk.text, context, cjk_index_terms(f"{context}\n{chunk.text}"),
            )
        )
    return ParsedFile(
        sha, title, page.uuid, page.summary, frontmatter_json(page.frontmatter), rows, warnings
    )


def chunk_context(title: str, path: tuple[str, ...]) -> str:
    """The page title and the chunk's heading path, searched and embedded with the chunk.

    The first heading usually repeats the title; it is dropped so the title's words do not
    count twice in BM25.
    """
    if path and path[0].strip().lower() == title.strip().lower():
        path = path[1:]
    return "\n".join([title, " > ".join(path)]) if path else title


Progress = Callable[[int], None]


def sync_files(
    conn: sqlite3.Connection,
    files: list[SourceFile],
    *,
    verify: bool = False,
    with_vectors: bool = True,
    last_sync: float = 0.0,
    progress: Progress | None = None,
    only: set[str] | None = None,
) -> SyncReport:
    """Bring the index rows in line with ``files``; returns what changed.

    ``files`` is the whole folder, unless ``only`` names the files to look at (a partial
    sync after a write): then ``files`` lists those that still exist, and rows of the other
    names in ``only`` are dropped.
    """
    started = time.monotonic()
    report = SyncReport()
    known = {row[0]: (row[1], row[2], row[3], bytes(row[4])) for row in _doc_rows(conn, only)}
    present = {f.name for f in files}
    racy_ns = int((last_sync - RACY_SECONDS) * 1e9)
    todo: list[tuple[SourceFile, int | None]] = []
    for source in files:
        entry = known.get(source.name)
        if entry is None:
            todo.append((source, None))
            continue
        doc_id, mtime_ns, size, _ = entry
        fresh = mtime_ns == source.mtime_ns and size == source.size and mtime_ns < racy_ns
        if fresh and not verify:
            report.unchanged += 1
            if progress:
                progress(1)
        else:
            todo.append((source, doc_id))
    report.hashed = len(todo)
    removed = [(name, entry[0]) for name, entry in known.items() if name not in present]
    # A page came or went, or one's title, summary or readability changed: what listing.md
    # shows (an edit of a page's body alone leaves the catalogue as it was).
    catalogue_changed = bool(removed)

    for start in range(0, len(todo), BATCH_DOCS):
        batch = todo[start : start + BATCH_DOCS]
        prepared: list[tuple[SourceFile, int | None, ParsedFile | None]] = []
        for source, doc_id in batch:
            try:
                sha, head, truncated = read_source(source)
            except OSError as exc:  # vanished or unreadable between scan and read
                report.warnings.append(f"{source.name}: could not be read ({exc.strerror})")
                continue
            if doc_id is not None and known[source.name][3] == sha:
                prepared.append((source, doc_id, None))
            else:
                prepared.append((source, doc_id, parse_source(source.name, sha, head, truncated)))
        with transaction(conn):
            batch_changed = False
            for source, doc_id, parsed in prepared:
                if parsed is None:
                    _, old_mtime, old_size, _ = known[source.name]
                    if (old_mtime, old_size) == (source.mtime_ns, source.size):
                        report.unchanged += 1  # re-hashed and identical: nothing to write
                        continue
                    conn.execute(
                        "UPDATE df_docs SET mtime_ns = ?, size = ?, last_modified = ? WHERE id = ?",
                        (source.mtime_ns, source.size, source.last_modified, doc_id),
                    )
                    if with_vectors:
                        conn.execute(
                            "UPDATE pages SET last_modified = ? WHERE filename = ?",
                            (source.last_modified, source.name),
                        )
                    report.unchanged += 1
                    continue
                if _write_doc(conn, source, doc_id, parsed, with_vectors):
                    catalogue_changed = True
                report.warnings.extend(parsed.warnings)
                if doc_id is None:
                    report.added += 1
                else:
                    report.updated += 1
                batch_changed = True
            if batch_changed:
                # In the same transaction as the rows: a reader that saw the generation
                # unchanged saw none of them (chunk ids are reused once freed, so lookup tables
                # of an older generation would give a new chunk the wrong page).
                bump_generation(conn)
            if progress:
                progress(len(batch))
    if removed:
        with transaction(conn):
            for name, doc_id in removed:
                conn.execute("DELETE FROM df_docs WHERE id = ?", (doc_id,))
                if with_vectors:
                    conn.execute("DELETE FROM pages WHERE filename = ?", (name,))
            bump_generation(conn)
        report.removed = len(removed)
    if catalogue_changed:
        # Kept in the index until listing.md is rendered (listing.refresh_listing): a caller
        # that drops this report, or dies before rendering, leaves the render due.
        with transaction(conn):
            set_meta(conn, "listing_stale", str(time.time_ns()))
    report.seconds = time.monotonic() - started
    return report


def _doc_rows(conn: sqlite3.Connection, only: set[str] | None) -> Iterator[tuple[Any, ...]]:
    """(filename, id, mtime_ns, size, sha256) of every page, or of the ``only`` ones (a sync
    of a few files at 10k pages would otherwise spend ~15 ms fetching rows it never uses)."""
    sql = "SELECT filename, id, mtime_ns, size, sha256 FROM df_docs"
    if only is None:
        yield from conn.execute(sql)
        return
    wanted = sorted(only)
    for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
        part = wanted[start : start + 500]
        yield from conn.execute(f"{sql} WHERE filename IN ({','.join('?' * len(part))})", part)


def _write_doc(
    conn: sqlite3.Connection,
    source: SourceFile,
    doc_id: int | None,
    parsed: ParsedFile,
    with_vectors: bool,
) -> bool:
    """Write one page's rows; whether what listing.md shows of it changed."""
    listed = (parsed.title, parsed.summary, parsed.readable)
    before = None if doc_id is None else conn.execute(
        f"SELECT title, summary, page_embedded != {NOT_A_PAGE} FROM df_docs WHERE id = ?",
        (doc_id,)).fetchone()
    values = (
        parsed.uuid, parsed.title, parsed.summary, parsed.frontmatter, parsed.sha256,
        source.mtime_ns, source.size, source.last_modified, json.dumps(parsed.warnings),
    )
    if doc_id is None:
        # Another process may have added it since we looked: upsert by filename.
        cursor = conn.execute(
            """INSERT INTO df_docs(uuid, title, summary, frontmatter, sha256, mtime_ns, size,
                                   last_modified, warnings, filename)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(filename) DO UPDATE SET
                 uuid = excluded.uuid, title = excluded.title, summary = excluded.summary,
                 frontmatter = excluded.frontmatter, sha256 = excluded.sha256,
                 mtime_ns = excluded.mtime_ns, size = excluded.size,
                 last_modified = excluded.last_modified, warnings = excluded.warnings,
                 page_embedded = 0
               RETURNING id""",
            (*values, source.name),
        )
        doc_id = int(cursor.fetchone()[0])
    else:
        conn.execute(
            """UPDATE df_docs SET uuid = ?, title = ?, summary = ?, frontmatter = ?, sha256 = ?,
                 mtime_ns = ?, size = ?, last_modified = ?, warnings = ?, page_embedded = 0
               WHERE id = ?""",
            (*values, doc_id),
        )
    # Unchanged chunks keep their vectors: editing one paragraph re-embeds one paragraph.
    kept = {
        (row[0], row[1]): row[2]
        for row in conn.execute(
            "SELECT body, context, embedding FROM df_chunks "
            "WHERE doc_id = ? AND embedding IS NOT NULL",
            (doc_id,),
        )
    }
    conn.execute("DELETE FROM df_chunks WHERE doc_id = ?", (doc_id,))  # and their latent terms
    if with_vectors:
        conn.execute("DELETE FROM df_latent_lines WHERE doc_id = ?", (doc_id,))
    conn.executemany(
        """INSERT INTO df_chunks(doc_id, ord, kind, heading, line_start, line_end, body,
                                 context, cjk, embedding)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [(doc_id, *row, kept.get((row[5], row[6]))) for row in parsed.chunks],
    )
    if not parsed.readable:
        conn.execute(f"UPDATE df_docs SET page_embedded = {NOT_A_PAGE} WHERE id = ?", (doc_id,))
        if with_vectors:
            conn.execute("DELETE FROM pages WHERE filename = ?", (source.name,))
    elif with_vectors:
        # A page vector of these exact bytes stays (a re-read of an unchanged page, e.g. an
        # unpacked index being checked); otherwise the spec row reappears once the page's new
        # embedding is computed.
        kept_page = conn.execute(
            "UPDATE pages SET frontmatter = ?, last_modified = ? WHERE filename = ? "
            "AND sha256_hash = ? AND embedding IS NOT NULL",
            (parsed.frontmatter, source.last_modified, source.name, parsed.sha256),
        ).rowcount
        if kept_page:
            conn.execute("UPDATE df_docs SET page_embedded = 1 WHERE id = ?", (doc_id,))
        else:
            conn.execute("DELETE FROM pages WHERE filename = ?", (source.name,))
    return before is None or tuple(before) != (listed[0], listed[1], int(listed[2]))


NOT_A_PAGE = -2
"""``df_docs.page_embedded`` of a file that is not a readable page (ParsedFile.readable)."""


def page_embedding_text(data: bytes) -> str:
    """The spec's embedding input: the whole file, truncated to 8 KB at a character boundary."""
    return data[:PAGE_LIMIT_BYTES].decode("utf-8", "ignore")
