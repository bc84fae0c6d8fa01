"""What killed processes leave behind, and how the next command tells it from work in progress.

deepfield's temporary files and folders all have ``.deepfield-`` names: page writes
(``.deepfield-*.tmp`` in a field), ``pack`` (``.deepfield-*.tmp`` and its index snapshot
``.deepfield-*.sqlite3`` beside the zip) and ``unpack`` (``.deepfield-unpack-*`` folders in
the store). The process that makes one holds an exclusive ``flock`` on it until it is renamed
into place or removed, and the kernel drops that lock when the process dies, however it dies
(``kill -9`` included). So the next command that touches the place removes every such name
nobody holds: no live process owns it. Age alone decides nothing; a grace of a few seconds
only covers the instant between creating a name and locking it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: nothing is held, nothing is cleaned
    fcntl = None  # type: ignore[assignment]

PREFIX = ".deepfield-"
UNPACK_PREFIX = f"{PREFIX}unpack-"
GRACE_S = 5.0
"""Newer debris is left alone: its maker may not have locked it yet."""


def hold(fd: int) -> None:
    """Lock the file (or folder) open as ``fd`` for this process: it is work in progress
    until ``fd`` is closed (or the process dies)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


@contextlib.contextmanager
def claimed(path: Path) -> Iterator[None]:
    """Hold ``path`` (a file or folder just made) while the block runs."""
    fd = os.open(path, os.O_RDONLY)
    try:
        hold(fd)
        yield
    finally:
        os.close(fd)


def owned(path: Path) -> bool:
    """Whether a live process holds ``path`` (True too when that cannot be told)."""
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    finally:
        os.close(fd)  # also drops the lock just taken
    return False


def _owner(folder: Path, name: str) -> Path:
    """The name whose lock says whether ``name`` is in use: a pack's index snapshot
    (``.deepfield-X.sqlite3`` and its journals) belongs to ``.deepfield-X.tmp``."""
    key = name[len(PREFIX):].split(".", 1)[0]
    holder = folder / f"{PREFIX}{key}.tmp"
    return holder if holder.name != name and holder.exists() else folder / name


def clean(folder: Path, *, unpack: bool = False, now: float | None = None) -> list[str]:
    """Remove the ``.deepfield-*`` debris in ``folder`` that no live process holds; with
    ``unpack``, folders of killed unpacks too. Returns the names removed."""
    moment = time.time() if now is None else now
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(PREFIX):
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and not (unpack and name.startswith(UNPACK_PREFIX)):
            continue
        if not is_dir and not entry.is_file(follow_symlinks=False):
            continue
        try:
            if moment - entry.stat(follow_symlinks=False).st_mtime < GRACE_S:
                continue
        except OSError:
            continue
        path = Path(entry.path)
        if owned(path if is_dir else _owner(folder, name)):
            continue
        if is_dir:
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(name)
    return removed
