"""A zip's index (``<model-code>.sqlite3``) is the sender's file: only its vectors are used.

Its author controls every byte of it: text rows that no page holds, and schema objects that
run code inside SQLite (a trigger that rewrites each chunk as it is inserted, a view in place
of a table). So a shipped index is never opened as the field's index. The receiver builds its
own from the pages, with deepfield's own schema; the shipped file is then attached read-only,
with ``trusted_schema`` off (its views and triggers cannot call functions with side effects),
and only vectors are copied: a chunk's vector where the same page has a chunk with the same
text and heading path, a page's vector where the page's sha256 matches, each of the length
the model makes. Nothing is ever written into the shipped file, so none of its triggers fire,
and it is deleted afterwards. Indexes of another model than the store's are left out (the
receiver would have to trust them whole); their pages are indexed anew by the store's model.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path

from ..debris import UNPACK_PREFIX, new_temp_dir
from ..errors import DeepfieldError
from ..field import Field
from ..index.db import BUSY_TIMEOUT_MS, bump_generation, get_meta, transaction

_SHIP_TABLES = {"df_docs": True, "df_chunks": True, "pages": False, "df_meta": True}
"""Tables read from a shipped index (name -> required); each must be a table, not a view."""


def adopt_shipped(field: Field, names: list[str]) -> list[str]:
    """Index ``field`` (a folder just unpacked) from its pages, taking vectors from the shipped
    index files ``names`` at its root as the module docstring says; the warnings."""
    warnings: list[str] = []
    own = field.index_path()
    holder, aside_dir = new_temp_dir(field.path.parent, UNPACK_PREFIX)
    try:
        aside: Path | None = None
        for name in names:
            path = field.path / name
            if own.parent == field.path and name == own.name:
                aside = aside_dir / name
                os.replace(path, aside)  # the field's own index is built anew from its pages
            else:
                path.unlink()
                warnings.append(f"{name}: an index for another model than this store's "
                                f"({own.stem}); left out, the pages are indexed anew")
        try:
            report = field.index(embed=False)
        except DeepfieldError as exc:  # e.g. the index backend: ours is built on first search
            return [*warnings, f"shipped index not used: {exc.message}"]
        warnings += report.warnings
        # Keyword-only stores have no vectors; another index backend has no such file.
        if aside is not None and field.embedder is not None and own.is_file():
            warnings += _copy_vectors(own, aside)
    finally:
        field.close()
        shutil.rmtree(aside_dir, ignore_errors=True)
        os.close(holder)
    return warnings


def _copy_vectors(own: Path, shipped: Path) -> list[str]:
    # URIs on: the shipped file is attached read-only (mode=ro), so nothing writes into it.
    conn = sqlite3.connect(own.resolve().as_uri(), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.isolation_level = None  # transaction() below decides where it ends
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("ATTACH DATABASE ? AS ship", (f"{shipped.resolve().as_uri()}?mode=ro",))
        problem = _ship_problem(conn)
        if problem:
            return [f"{shipped.name}: shipped index not used ({problem}); vectors are "
                    "computed anew by `deepfield index`"]
        size = 4 * int(get_meta(conn, "dim") or 0)
        with transaction(conn):
            chunks = conn.execute(
                """UPDATE main.df_chunks AS m SET embedding = (
                       SELECT c.embedding FROM ship.df_chunks AS c
                       JOIN ship.df_docs AS d ON d.id = c.doc_id
                       JOIN main.df_docs AS md ON md.id = m.doc_id
                       WHERE d.filename = md.filename AND c.body = m.body
                         AND c.context = m.context AND typeof(c.embedding) = 'blob'
                         AND length(c.embedding) = :size LIMIT 1)
                   WHERE m.embedding IS NULL""", {"size": size}).rowcount
            if _has(conn, "main", "pages") and _has(conn, "ship", "pages"):
                conn.execute(
                    """INSERT OR IGNORE INTO main.pages
                           (filename, frontmatter, last_modified, sha256_hash, embedding)
                       SELECT d.filename, d.frontmatter, d.last_modified, d.sha256, p.embedding
                       FROM main.df_docs AS d JOIN ship.pages AS p ON p.filename = d.filename
                       WHERE p.sha256_hash = d.sha256 AND d.page_embedded = 0
                         AND typeof(p.embedding) = 'blob' AND length(p.embedding) = :size""",
                    {"size": size})
                conn.execute("UPDATE main.df_docs SET page_embedded = 1 WHERE page_embedded = 0 "
                             "AND filename IN (SELECT filename FROM main.pages)")
            if chunks:
                bump_generation(conn)
    except sqlite3.Error as exc:
        return [f"{shipped.name}: not a deepfield index ({exc}); ignored"]
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("DETACH DATABASE ship")
        conn.close()
    return []


def _has(conn: sqlite3.Connection, schema: str, table: str) -> bool:
    row = conn.execute(f"SELECT type FROM {schema}.sqlite_master WHERE name = ?",
                       (table,)).fetchone()
    return row is not None and row[0] == "table"


def _ship_problem(conn: sqlite3.Connection) -> str | None:
    """Why the shipped file's vectors cannot be ours (None: they can be compared)."""
    for table, required in _SHIP_TABLES.items():
        row = conn.execute("SELECT type FROM ship.sqlite_master WHERE name = ?",
                           (table,)).fetchone()
        if row is None and required:
            return f"no table {table}"
        if row is not None and row[0] != "table":
            return f"{table} is a {row[0]}, not a table"
    code = conn.execute("SELECT value FROM ship.df_meta WHERE key = 'model_code'").fetchone()
    ours = get_meta(conn, "model_code")
    if code is None or code[0] != ours:
        return f"vectors of model {code[0] if code else None!r}, not {ours!r}"
    if not get_meta(conn, "dim"):
        return "the model's vector size is not known yet"
    return None
