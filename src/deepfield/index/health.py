"""A damaged index heals itself: corruption is told from other SQLite errors, the damaged
file is moved aside (kept for a post-mortem) and the operation runs again on a new index,
which the next sync rebuilds from the pages.

Only corruption is healed: ``SQLITE_CORRUPT`` and ``SQLITE_NOTADB`` (a file overwritten in
the middle, truncated, or not SQLite at all), a file that is sound SQLite without deepfield's
schema (a table, column or trigger dropped or altered: db.schema_problem), and a folder in
the index file's place. A busy, locked, read-only or full database is
not damaged and is reported as it is. The damaged file, with its ``-wal`` and ``-shm``
companions, is renamed to ``.deepfield/<name>.corrupt-<UTC time>`` beside it, under a lock
and only while it is still the file the caller found damaged: several processes (a server's
searchers, a CLI command) that hit the same damage move it aside once, and none of them
moves away the new index another one has built meanwhile.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

from ..errors import IndexCorruptError
from ..fsutil import lock_file
from .db import schema_problem

T = TypeVar("T")
P = ParamSpec("P")
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
KEEP_CORRUPT = 3
"""Damaged copies kept per index file (older ones are deleted: they are derived data)."""
CORRUPT_MARK = ".corrupt-"
SIDE_FILES = ("-wal", "-shm", "-journal")


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` says an index file is damaged (not merely busy, locked or full)."""
    if isinstance(exc, IndexCorruptError):
        return exc.damaged
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (SQLITE_CORRUPT, SQLITE_NOTADB)
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def is_schema_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite missing a table or column: an index file whose schema was
    dropped or altered (healed like a damaged one once :func:`damage` confirms it; else it
    is a query's own error, and the file is left alone)."""
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and (
        text.startswith("no such table") or text.startswith("no such column"))


def damage(conn: sqlite3.Connection, *, thorough: bool = True) -> str | None:
    """What is wrong with an open index (None: nothing found). SQLite's ``quick_check`` reads
    every page of the file; ``thorough`` adds FTS5's own check of the keyword index, which
    tokenizes every chunk again (it runs only after an operation failed, to learn which of
    several indexes it was)."""
    try:
        problem = schema_problem(conn)
        if problem:
            return problem
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if rows != [("ok",)]:
            return "; ".join(str(r[0]) for r in rows[:3])
        if thorough:
            conn.execute(
                "INSERT INTO df_chunks_fts(df_chunks_fts) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            return str(exc)
    return None


def file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``, or None when there is no file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def quarantine(path: Path, found: tuple[int, int] | None) -> Path | None:
    """Move the damaged index ``path`` (and its side files) into ``.deepfield/`` beside it,
    if it is still the file ``found`` (its :func:`file_id` when the damage was seen; None: any
    file there). Returns the new path, or None when another process moved it first."""
    folder = path.parent / ".deepfield"
    folder.mkdir(exist_ok=True)
    with lock_file(folder / "heal.lock"):
        current = file_id(path)
        if current is None or (found is not None and current != found):
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = folder / f"{path.name}{CORRUPT_MARK}{stamp}"
        counter = 1
        while target.exists():
            counter += 1
            target = folder / f"{path.name}{CORRUPT_MARK}{stamp}-{counter}"
        os.replace(path, target)
        for suffix in SIDE_FILES:  # a new file must not pick up the old one's journal
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{path}{suffix}", f"{target}{suffix}")
        _prune(folder, path.name)
        return target


def _prune(folder: Path, name: str) -> None:
    copies = sorted(p for p in folder.glob(f"{name}{CORRUPT_MARK}*")
                    if not p.name.endswith(SIDE_FILES))
    for old in copies[:-KEEP_CORRUPT]:
        for suffix in ("", *SIDE_FILES):
            with contextlib.suppress(OSError):
                Path(f"{old}{suffix}").unlink()


class Healable(Protocol):
    """What :func:`healing` needs of a field (deepfield.Field)."""

    def heal_index(self, exc: BaseException, *, probe: bool = False) -> bool: ...

    def take_notices(self) -> list[str]: ...


def healing(fields: Sequence[Healable], run: Callable[[], T]) -> T:
    """``run()``; if an index turns out damaged, move it aside and run once more (the new
    index is synced from the pages by the call itself). With several fields, only those whose
    index is found damaged are healed."""
    try:
        return run()
    except (sqlite3.DatabaseError, IndexCorruptError) as exc:
        if not is_corruption(exc) and not is_schema_error(exc):
            raise
        healed = [f for f in fields if f.heal_index(exc, probe=len(fields) > 1)]
        if not healed:
            if is_schema_error(exc):
                raise  # every schema is whole: the query's own error, not a file's
            raise IndexCorruptError(
                f"an index is damaged ({exc}) and no damaged file was found",
                "rebuild the indexes with `deepfield reindex`", damaged=True) from exc
    return run()


def heals_fields(fn: Callable[P, T]) -> Callable[P, T]:
    """Decorate a function whose first argument is a field or a list of fields (search,
    research) so a damaged index is healed and the call made again; what healing says is put
    first in the result's ``warnings``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        given = args[0] if args else kwargs.get("fields")
        fields: list[Healable] = (list(given) if isinstance(given, Sequence)
                                  else [given])  # type: ignore[list-item]
        result = healing(fields, lambda: fn(*args, **kwargs))
        warnings = getattr(result, "warnings", None)
        if isinstance(warnings, list):
            warnings[:0] = [n for f in fields for n in f.take_notices()]
        return result

    return wrapper
