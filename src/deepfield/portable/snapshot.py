"""The index a zip ships (``pack --with-index``): a copy of the live index that holds only the
pages packed, and the same bytes for the same pages.

A field's index also holds pages that pack leaves out (a name the spec forbids, a page that is
not UTF-8): copied whole, their titles, text and search terms would travel in the zip although
the page itself does not. The copy is therefore pruned to the packed pages, its full-text index
is rebuilt (FTS5 only marks deleted rows, their terms stay in older segments), and VACUUM
rewrites the file so no freed page keeps old bytes. Keys that say when or where this copy was
made (``synced_at``, ``instance``) are dropped, and the header's change counters are fixed, so
packing the same pages twice gives the same sha256.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Collection
from pathlib import Path

VOLATILE_META = ("synced_at", "instance")
"""df_meta keys that change without the pages changing (the time of the last sync, the
identity of one file): a receiver builds its own (portable/shipped.py)."""
_COUNTER_OFFSETS = (24, 92)
"""SQLite header: the file change counter and the version-valid-for number; they must agree
(SQLite then trusts the header's page count), and each write bumps both."""


def snapshot_index(index_path: Path, target: Path, pages: Collection[str]) -> None:
    """A consistent, self-contained copy of a live SQLite index (WAL folded in, journal mode
    DELETE), holding only ``pages`` (filenames); see the module docstring."""
    source = sqlite3.connect(f"{index_path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)  # consistent even while a search or sync runs meanwhile
            copy.isolation_level = None
            copy.execute("PRAGMA journal_mode=DELETE")
            copy.execute("PRAGMA foreign_keys=ON")  # chunks and latent rows go with their doc
            _prune(copy, sorted(pages))
            copy.execute("VACUUM")
        finally:
            copy.close()
    finally:
        source.close()
    _fix_counters(target)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _prune(conn: sqlite3.Connection, pages: list[str]) -> None:
    tables = _tables(conn)
    conn.execute("BEGIN")
    conn.execute("CREATE TEMP TABLE packed (filename TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO packed VALUES (?)", [(p,) for p in pages])
    if "df_docs" in tables:
        conn.execute("DELETE FROM df_docs WHERE filename NOT IN (SELECT filename FROM packed)")
    if "pages" in tables:  # the spec's table, keyed by filename too
        conn.execute("DELETE FROM pages WHERE filename NOT IN (SELECT filename FROM packed)")
    if "df_chunks_fts" in tables:
        conn.execute("INSERT INTO df_chunks_fts(df_chunks_fts) VALUES ('rebuild')")
    if "df_meta" in tables:
        conn.executemany("DELETE FROM df_meta WHERE key = ?", [(k,) for k in VOLATILE_META])
    conn.execute("DROP TABLE temp.packed")
    conn.execute("COMMIT")


def _fix_counters(path: Path) -> None:
    # Every transaction bumps these, so the same content would differ by how often the live
    # file was written before its copy; both set to 1, they still agree with each other.
    with path.open("r+b") as handle:
        for offset in _COUNTER_OFFSETS:
            handle.seek(offset)
            handle.write(struct.pack(">I", 1))
