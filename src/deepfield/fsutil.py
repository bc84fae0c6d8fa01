"""File operations that never leave a torn or clobbered page behind.

Every write goes to a temporary file in the same directory, is flushed to disk, and is then
renamed over the target (``atomic_write``) or hard-linked to a name that must not exist yet
(``create_new``): a reader, or a crash, sees the old file or the new one, never half of one,
and two writers can never silently take the same new filename. ``field_lock`` serialises the
writers of one field across processes so derived files (``listing.md``) stay complete.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from .debris import JOURNAL_SUFFIX, PREFIX, clean, finish_renames, new_temp_file
from .errors import DeepfieldError, StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: writes stay atomic, just not serialised
    fcntl = None  # type: ignore[assignment]


TEMP_PREFIX = PREFIX
TEMP_SUFFIX = ".tmp"
COPY_CHUNK = 1 << 20


def _temp_in(directory: Path, data: bytes, durable: bool = True) -> tuple[Path, int]:
    """A temporary file holding ``data`` and the descriptor that keeps it held (debris.py):
    close the descriptor once the file is renamed into place or removed."""
    fd, path = new_temp_file(directory, TEMP_SUFFIX)
    name = str(path)
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            Path(name).unlink()
        os.close(fd)
        raise
    return Path(name), fd


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_no_follow(path: Path) -> tuple[bytes, float]:
    """A file's bytes and mtime, never through a symbolic link, even one swapped in after
    the path was checked (O_NOFOLLOW): a link could point anywhere on the machine. A link
    raises OSError with errno ELOOP."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read(), os.fstat(handle.fileno()).st_mtime


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace (or create) ``path`` with ``data`` in one rename.

    ``durable=False`` skips the fsyncs, for derived files (listing.md) that are rebuilt from
    the pages anyway: still never torn, but a power cut may leave the previous version."""
    temp, fd = _temp_in(path.parent, data, durable)
    try:
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    finally:
        os.close(fd)
    if durable:
        _fsync_dir(path.parent)


def copy_file(source: Path, path: Path, *, create_only: bool = False) -> bool:
    """Copy the file ``source`` to ``path`` a chunk at a time (an attachment may be a
    video of gigabytes, too big to hold in memory), replacing ``path`` in one rename as
    ``atomic_write`` does, or with ``create_only`` as ``create_new`` does: False, and
    nothing written, when a file has that name."""
    fd, temp = new_temp_file(path.parent, TEMP_SUFFIX)
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb", closefd=False) as out:
            shutil.copyfileobj(src, out, COPY_CHUNK)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        if create_only:
            done = _link_new(temp, path)
            with contextlib.suppress(FileNotFoundError):  # linked, or refused: not needed
                temp.unlink()
        else:
            os.replace(temp, path)
            done = True
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    finally:
        os.close(fd)
    _fsync_dir(path.parent)
    return done


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read a chunk at a time."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def create_new(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data`` only if no file has that name; False if one does."""
    return write_together([(path, data, True)])[0]


def _link_new(temp: Path, path: Path) -> bool:
    """Give the finished ``temp`` the name ``path`` only if no file has it yet."""
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    except OSError:
        # File systems without hard links: reserve the name exclusively, then fill it by
        # rename (still never torn; the empty reservation exists only for an instant).
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        os.close(fd)
        os.replace(temp, path)
    return True


def write_together(files: list[tuple[Path, bytes, bool]]) -> list[bool]:
    """Write several files of one folder as one (the parts of a split page). Every file is
    first written and flushed to a temporary file — the slow part, when an interruption
    leaves nothing behind — then a journal of the renames to come is written and flushed, and
    only then is each renamed over its target, or linked to a name that must not exist yet
    (``True`` in the tuple: create only), and the folder is synced once. A writer killed
    among the renames leaves the journal, and the next writer of the folder finishes them
    (``finish_renames``): the page is then all new, never half old. Returns, per file,
    whether it was written (False: a create-only name was taken meanwhile)."""
    temps: list[Path] = []
    held: list[int] = []
    journal: Path | None = None
    try:
        for path, data, _create in files:
            temp, fd = _temp_in(path.parent, data)
            os.chmod(temp, 0o644)
            temps.append(temp)
            held.append(fd)
        if len(files) > 1:
            plan = [[t.name, p.name, c] for t, (p, _d, c) in zip(temps, files, strict=True)]
            fd, journal = new_temp_file(files[0][0].parent, JOURNAL_SUFFIX)
            held.append(fd)
            os.write(fd, json.dumps(plan).encode())
            os.fsync(fd)
            _fsync_dir(journal.parent)
        done: list[bool] = []
        for temp, (path, _data, create) in zip(temps, files, strict=True):
            if create:
                done.append(_link_new(temp, path))
            else:
                os.replace(temp, path)
                done.append(True)
    finally:
        for temp in [*temps, *([journal] if journal else [])]:
            with contextlib.suppress(OSError):
                temp.unlink()
        for fd in held:
            os.close(fd)
    if files:
        _fsync_dir(files[0][0].parent)
    return done


def move_new(source: Path, target: Path) -> bool:
    """Rename ``source`` to ``target`` only if ``target`` does not exist yet."""
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError:
        if target.exists():
            return False
        os.replace(source, target)
        return True
    source.unlink()
    _fsync_dir(target.parent)
    return True


_held = threading.local()
"""The field directories this thread holds the lock of (``field_lock``)."""


@contextlib.contextmanager
def field_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on a field directory (blocks until it is free).
    Re-entrant within a thread: an operation made of several locked steps (``rm`` of a split
    page: each part is archived) holds the lock around all of them, so no writer slips in
    between; each flock is on its own descriptor, so a nested one would wait for itself."""
    key = os.path.abspath(directory)
    held: set[str] = getattr(_held, "dirs", None) or set()
    _held.dirs = held
    if key in held:
        yield
        return
    with _exclusive_lock(directory, os.O_RDONLY):
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def lock_file(path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold an exclusive advisory lock on the file ``path``, made if missing (blocks until it
    is free)."""
    return _exclusive_lock(path, os.O_RDWR | os.O_CREAT)


@contextlib.contextmanager
def _exclusive_lock(path: Path, flags: int) -> Iterator[None]:
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def remove_stale_temp_files(directory: Path) -> int:
    """Finish the renames of a split page whose writer died among them (``write_together``),
    then delete the temporary files of writers that died (killed mid-write): those no live
    process holds (debris.py), whatever their age. Call it holding the field lock."""
    finish_renames(directory)
    return len(clean(directory))


def check_expected(path: Path, expected: bytes) -> None:
    """WriteConflictError unless ``path`` holds exactly ``expected`` (a conditional write,
    HTTP's If-Match: the caller checks under the lock that serialises the field's writers)."""
    from .errors import WriteConflictError

    try:
        current: bytes | None = path.read_bytes()
    except FileNotFoundError:
        current = None
    if current != expected:
        raise WriteConflictError(f"{path.name} is no longer the version the write expected",
                                 current=current)


_REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """Turn the file system refusing a write (permissions, a read-only or full disk) into
    StorageError, a DeepfieldError with message and hint. Usable as a decorator on the
    library's write entry points; other OSErrors (a missing file …) pass as they are."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, DeepfieldError) or exc.errno not in _REFUSED:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        raise StorageError(f"{exc.strerror or exc}{where}", errno=exc.errno,
                           filename=None if exc.filename is None else str(exc.filename)) from exc
