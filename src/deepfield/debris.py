"""What killed processes leave behind, and how the next command tells it from work in progress.

deepfield's temporary files and folders all have ``.deepfield-`` names: page writes
(``.deepfield-*.tmp`` in a field), ``pack`` (``.deepfield-*.tmp`` and its index snapshot
``.deepfield-*.sqlite3`` beside the zip) and ``unpack`` (``.deepfield-unpack-*`` folders in
the store). The process that makes one holds an exclusive ``flock`` on it until it is renamed
into place or removed, and the kernel drops that lock when the process dies, however it dies
(``kill -9`` included). So the next command that touches the place removes every such name
nobody holds: no live process owns it; age decides nothing. A cleaner removes a name while
it holds its lock, and a maker checks, once it holds the lock on what it made, that the name
is still there (making another if not), so the instant between creating a name and locking
it is safe too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: nothing is held, nothing is cleaned
    fcntl = None  # type: ignore[assignment]

PREFIX = ".deepfield-"
UNPACK_PREFIX = f"{PREFIX}unpack-"
JOURNAL_SUFFIX = ".renames"
"""A split page's renames to come (fsutil.write_together): ``[[temp, target, create], …]``."""


def hold(fd: int) -> None:
    """Lock the file (or folder) open as ``fd`` for this process: it is work in progress
    until ``fd`` is closed (or the process dies). Waits while a cleaner looks at it."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)


def _still_named(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a cleaner may have removed the
    name between its creation and our lock)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def new_temp_file(folder: Path, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new ``.deepfield-*`` file in ``folder``, held (see :func:`hold`): close the
    descriptor once it is renamed into place or removed."""
    while True:
        fd, name = tempfile.mkstemp(prefix=PREFIX, suffix=suffix, dir=folder)
        hold(fd)
        if _still_named(fd, name):
            return fd, Path(name)
        os.close(fd)  # a cleaner took it in the instant before the lock: make another


def new_temp_dir(folder: Path, prefix: str = UNPACK_PREFIX) -> tuple[int, Path]:
    """A new ``.deepfield-*`` folder in ``folder``, held like :func:`new_temp_file`."""
    while True:
        name = tempfile.mkdtemp(prefix=prefix, dir=folder)
        try:
            fd = os.open(name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        hold(fd)
        if _still_named(fd, name):
            return fd, Path(name)
        os.close(fd)


def _take(path: Path) -> int | None:
    """An open descriptor holding ``path``'s lock when no live process holds it (the caller
    removes the debris, then closes it), else None."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held by a live process (or cannot be told): leave it
        os.close(fd)
        return None
    return fd


def finish_renames(folder: Path) -> list[str]:
    """Complete the renames of every journal whose writer died (none holds it): each part
    still in its temporary file takes its place, so a split page killed among its renames
    ends whole and new. Returns the targets completed. The caller holds the folder's
    writer lock, so no live writer is among its renames."""
    finished: list[str] = []
    for journal in sorted(folder.glob(f"{PREFIX}*{JOURNAL_SUFFIX}")):
        fd = _take(journal)
        if fd is None:
            continue
        try:
            try:
                plan = json.loads(journal.read_text("utf-8"))
            except (OSError, ValueError):
                plan = []  # cut short while written: no rename had begun
            for temp_name, target_name, create in plan if isinstance(plan, list) else []:
                temp, target = folder / Path(temp_name).name, folder / Path(target_name).name
                if not temp.exists():
                    continue
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.link(temp, target)
                    temp.unlink()
                else:
                    os.replace(temp, target)
                finished.append(target.name)
            journal.unlink()
        except OSError:
            pass
        finally:
            os.close(fd)
    return finished


def owned(path: Path) -> bool:
    """Whether a live process holds ``path``."""
    fd = _take(path)
    if fd is None:
        return path.exists()
    os.close(fd)
    return False


def clean(folder: Path, *, unpack: bool = False) -> list[str]:
    """Remove the ``.deepfield-*`` debris in ``folder`` that no live process holds; with
    ``unpack``, folders of killed unpacks too. Returns the names removed. A pack's index
    snapshot (``.deepfield-X.sqlite3`` and its journals) goes with its ``.deepfield-X.tmp``."""
    removed: list[str] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return removed
    for name in names:
        if not name.startswith(PREFIX):
            continue
        path = folder / name
        if path.is_symlink():
            continue
        is_dir = path.is_dir()
        if is_dir and not (unpack and name.startswith(UNPACK_PREFIX)):
            continue
        key = name[len(PREFIX):].split(".", 1)[0]
        owner = folder / f"{PREFIX}{key}.tmp"
        if not is_dir and owner.name != name and owner.exists():
            continue  # it goes (or stays) with its owner
        fd = _take(path)
        if fd is None:
            continue
        try:  # removed while the lock is held: a maker waiting for it finds the name gone
            if is_dir:
                shutil.rmtree(path, ignore_errors=True)
            else:
                for other in names:
                    if other == name or (other.startswith(f"{PREFIX}{key}.") and not is_dir):
                        with contextlib.suppress(OSError):
                            (folder / other).unlink()
                            removed.append(other)
                continue
            removed.append(name)
        finally:
            os.close(fd)
    return removed
