"""A field of a store in a bucket: a private working copy, and conditional writes back.

The working copy is an ordinary field folder (so reading, outlines, research and the SQLite
catalogue work unchanged) that this process fills from the bucket: a refresh lists the
field's prefix and fetches what changed by ETag, and runs before a write, at most every
REFRESH_S seconds before a search, and on a server in the background (bucket/poller.py).

A write is prepared in the working copy as on a local field (names, frontmatter, splitting)
and then published object by object: a page new to the bucket with ``If-None-Match: *``, a
page that was there with ``If-Match`` on the ETag this process last saw. If another writer
got there first, the bucket refuses; the working copy is put back to what the bucket holds,
and the write fails with :class:`~deepfield.errors.WriteConflictError` carrying the current
version: two writers never overwrite each other silently. (A new page named from its title
just takes the next free name instead.) Archiving copies the page into ``archive/`` and
then deletes it with ``If-Match``, so a page changed meanwhile is never lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..archive import ARCHIVE_DIR, Shelf
from ..errors import (
    InvalidPageError,
    PageNotFoundError,
    RemoteUnavailableError,
    WriteConflictError,
)
from ..fsutil import atomic_write, check_expected
from ..index.budget import Deadline
from ..page import INTRO_FILE, LISTING_FILE, Page, is_debris
from ..scan import SourceFile
from ..writer import WriteResult, refuse_special
from .archive import BucketShelf, archive_object, archived_names, put_archived
from .field_indexing import SharedIndexField
from .mirror import MirrorState
from .objects import STALLED_S, Got, ObjectConflictError
from .store import stale_copy

if TYPE_CHECKING:
    from ..embed.base import Embedder
    from ..index import SyncReport
    from .store import BucketStore

REFRESH_S = 2.0
"""A search refreshes the working copy from the bucket when it is older than this."""


def _mirrored(name: str) -> bool:
    """Files of a field's prefix kept in the working copy: pages and index.md (listing.md is
    generated from the pages by each process)."""
    return name.endswith(".md") and name != LISTING_FILE and not name.startswith(".") \
        and not is_debris(name) and "/" not in name


class BucketField(SharedIndexField):
    """A field of a :class:`~deepfield.bucket.store.BucketStore` (its index backend's side:
    bucket/field_indexing.py)."""

    def __init__(self, store: BucketStore, name: str, embedder: Embedder | None,
                 index_backend: str, state: MirrorState) -> None:
        super().__init__(store.root / name, embedder, name=name, index_backend=index_backend)
        self.store = store
        self.bucket = store.bucket
        self.state = state
        self.prefix = f"{name}/"

    def __repr__(self) -> str:
        return f"BucketField({self.name!r}, {self.store.url!r})"

    # ------------------------------------------------------------------ working copy

    def refresh_from_bucket(self) -> set[str]:
        """Bring the working copy in line with the bucket; returns the names that changed."""
        with self.store.reaching():
            return self._refresh_from_bucket()

    def _refresh_from_bucket(self) -> set[str]:
        with self.state.lock:
            objects, _ = self.bucket.list(self.prefix)
            listed = {o.name: o for o in objects if _mirrored(o.name)}
            changed: set[str] = set()
            for name, info in listed.items():
                if self._current(name, info.etag):
                    continue
                got = self.bucket.get(self.prefix + name)
                if got is not None:
                    self._keep(name, got)
                    changed.add(name)
            for name in self._local_names() | set(self.state.files):
                if name not in listed:
                    self._drop(name)
                    changed.add(name)
            self.state.refreshed = time.monotonic()
            if changed:
                self.state.save()
                self.mark_changed(changed)
            return changed

    def refresh_pages(self, names: Iterable[str]) -> None:
        """Fetch the current version of each named page (a read, or a write that checks
        a version, must not trust a copy another replica may have replaced)."""
        with self.store.reaching(), self.state.lock:
            changed = set()
            for name in names:
                if not _mirrored(name):
                    continue
                got = self.bucket.get(self.prefix + name)
                if got is None:
                    if name in self.state.files or (self.path / name).exists():
                        self._drop(name)
                        changed.add(name)
                elif not self._current(name, got.etag):
                    self._keep(name, got)
                    changed.add(name)
            if changed:
                self.state.save()
                self.mark_changed(changed)

    def _current(self, name: str, etag: str) -> bool:
        entry = self.state.files.get(name)
        if entry is None or entry[0] != etag:
            return False
        try:
            info = os.stat(self.path / name)
        except OSError:
            return False
        return (info.st_size, info.st_mtime_ns) == entry[1:]

    def _keep(self, name: str, got: Got) -> None:
        path = self.path / name
        atomic_write(path, got.data, durable=False)  # derived: the bucket has the page
        # Whole seconds carry Last-Modified (the page's last_modified in the index); the
        # nanoseconds part of the content hash, so a change within a second is seen.
        ns = int(got.modified) * 1_000_000_000 + \
            int.from_bytes(hashlib.sha256(got.data).digest()[:4], "big") % 1_000_000_000
        os.utime(path, ns=(ns, ns))
        self.state.files[name] = (got.etag, len(got.data), ns)

    def _record(self, name: str, etag: str) -> None:
        info = os.stat(self.path / name)
        self.state.files[name] = (etag, info.st_size, info.st_mtime_ns)

    def _drop(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / name).unlink()
        self.state.files.pop(name, None)

    def _local_names(self) -> set[str]:
        with os.scandir(self.path) as entries:
            return {e.name for e in entries if _mirrored(e.name) and e.is_file()}

    def _resync(self, names: set[str]) -> None:
        """The catalogue and listing.md after the working copy changed under a write."""
        files = [SourceFile(n, os.fspath(self.path), *_stat(self.path / n))
                 for n in sorted(names) if (self.path / n).is_file()]
        self._listing(self.index_handle().sync_names(files, names))
        self.mark_changed(names)

    # ------------------------------------------------------------------ reading

    def ensure_synced(self, *, embed: bool = True,
                      deadline: Deadline | None = None) -> SyncReport:
        """Refresh from the bucket when due, then sync as any field. A bucket that cannot be
        reached does not stop reads: they answer from this copy, with a warning."""
        problem = None
        if time.monotonic() - self.state.refreshed >= REFRESH_S:
            try:
                self.refresh_from_bucket()
            except RemoteUnavailableError as exc:
                problem = stale_copy(exc)
        report = super().ensure_synced(embed=embed, deadline=deadline)
        if problem is not None:
            report.warnings.append(problem)
        return report

    def copy_warnings(self) -> list[str]:
        problem = self.store.unreachable
        waited = self.bucket.stalled_s()
        if problem is None and waited >= STALLED_S:  # a hanging bucket fails only later
            problem = (f"the bucket of {self.store.url} has not answered for {waited:.0f} s; "
                       "answering from this process's copy of the pages")
        return [] if problem is None else [problem]

    def index(self, **options: Any) -> SyncReport:
        self.refresh_from_bucket()
        return super().index(**options)

    # ------------------------------------------------------------------ writing

    def write(self, content: str | bytes | Page, *, name: str | None = None,
              review: bool | None = None, split: bool = True, keep_previous: bool = True,
              expected: bytes | None = None) -> WriteResult:
        if isinstance(content, Page):
            content = content.copy()
        for attempt in range(3):
            with self.state.lock:
                # The page written (when named) as the bucket has it now; a new name is
                # checked by the bucket itself (If-None-Match), and a refresh follows a race.
                if attempt:
                    self.refresh_from_bucket()
                elif name is not None:
                    self.refresh_pages([f"{name.removesuffix('.md')}.md"])
                known = {n: self.state.etag(n) for n in self.state.files}
                before = self._local_names()
                source = content.copy() if isinstance(content, Page) else content
                # ``expected`` is checked against the copy just refreshed, and the bucket
                # then takes the write only over that same version (If-Match).
                result = super().write(source, name=name, review=review, split=split,
                                       keep_previous=keep_previous, expected=expected)
                try:
                    self._publish(result, known, before)
                    return result
                except WriteConflictError as exc:
                    taken = exc.current is not None and name is None and any(
                        p.action == "created" for p in result.pages)
                    if not taken or attempt == 2:
                        raise
                    # a free name was taken by another writer meanwhile: choose again
        raise AssertionError("unreachable")

    def _publish(self, result: WriteResult, known: dict[str, str | None],
                 before: set[str]) -> None:
        done: list[str] = []
        try:
            for number, page in enumerate(result.pages):
                if page.action == "unchanged":
                    continue
                self._put(page.filename, known.get(page.filename))
                done.append(page.filename)
                if page.previous:  # the replaced version, kept in archive/ as on disk
                    result.pages[number] = replace(
                        page, previous=self._keep_previous(page.previous, result.warnings))
            # Parts a rewrite no longer needs were archived in the working copy: likewise.
            for left in sorted((before & set(known)) - self._local_names()):
                archive_object(self.bucket, self.prefix, left, known[left] or "", None)
        except ObjectConflictError as exc:
            undo = {p.filename for p in result.pages if p.filename not in done}
            self._forget_previous(result, done)
            self.refresh_pages(undo | {exc.key.removeprefix(self.prefix)})
            self._resync(undo)
            raise _conflict(exc, self.prefix) from None
        except Exception:
            # The bucket failed otherwise (unreachable): the copy must not show what the
            # bucket never took. New pages go; replaced ones are fetched again next refresh.
            for page in result.pages:
                if page.filename in done:
                    continue
                if known.get(page.filename) is None:
                    self._drop(page.filename)
                elif page.filename in self.state.files:
                    etag, _, _ = self.state.files[page.filename]
                    self.state.files[page.filename] = (etag, -1, -1)
            self.state.refreshed = 0.0
            self._forget_previous(result, done)
            self._resync({p.filename for p in result.pages if p.filename not in done})
            raise
        finally:
            self.state.save()

    def _forget_previous(self, result: WriteResult, done: list[str]) -> None:
        """The working copy's archive/ copies of versions the failed write did not replace
        in the bucket: they were never replaced, so they are not kept either."""
        for page in result.pages:
            if page.previous and page.filename not in done:
                with contextlib.suppress(OSError):
                    (self.path / page.previous).unlink()

    def _keep_previous(self, archived: str, warnings: list[str]) -> str | None:
        """Copy the working copy's ``archive/`` file of a replaced page into the bucket's
        ``archive/``; where it went. The page itself is already written, so a failure here
        is a warning, never an error (a retry would write the page twice)."""
        try:
            target, _ = put_archived(self.bucket, self.prefix, Path(archived).name,
                                     (self.path / archived).read_bytes())
        except (OSError, RemoteUnavailableError, InvalidPageError) as exc:
            warnings.append(f"{self.name}/{archived}: the replaced version was not copied "
                            f"to the bucket's {ARCHIVE_DIR}/ ({exc})")
            return None
        return f"{ARCHIVE_DIR}/{target}"

    def _put(self, name: str, etag: str | None) -> None:
        data = (self.path / name).read_bytes()
        key = self.prefix + name
        new = self.bucket.put(key, data, if_match=etag) if etag else \
            self.bucket.put(key, data, create=True)
        self._record(name, new)

    def write_intro(self, data: bytes, *, expected: bytes | None = None) -> bool:
        with self.state.lock:
            self.refresh_pages([INTRO_FILE])
            if expected is not None:
                check_expected(self.path / INTRO_FILE, expected)
            etag = self.state.etag(INTRO_FILE)
            existed = (self.path / INTRO_FILE).is_file()
            atomic_write(self.path / INTRO_FILE, data)
            try:
                self._put(INTRO_FILE, etag)
            except ObjectConflictError as exc:
                self.refresh_pages([INTRO_FILE])
                raise _conflict(exc, self.prefix) from None
            finally:
                self.state.save()
            return existed

    # ------------------------------------------------------------------ archive

    def archive(self, ref: str) -> str:
        with self.state.lock:
            filename = self.resolve(ref)
            refuse_special(filename, "archive pages; edit index.md in place")
            self.refresh_pages([filename])
            etag = self.state.etag(filename)
            if etag is None:
                raise PageNotFoundError(f"no page {filename!r} in field {self.name}")
            data = (self.path / filename).read_bytes()
            try:
                where = archive_object(self.bucket, self.prefix, filename, etag, data)
            except ObjectConflictError as exc:
                self.refresh_pages([filename])
                self._resync({filename})
                raise _conflict(exc, self.prefix) from None
            super().archive(filename)  # the working copy follows
            self.state.files.pop(filename, None)
            self.state.save()
            return where

    def archive_intro(self) -> str:
        with self.state.lock:
            self.refresh_pages([INTRO_FILE])
            etag = self.state.etag(INTRO_FILE)
            if etag is None:
                raise PageNotFoundError(f"no {INTRO_FILE} in field {self.name}")
            try:
                where = archive_object(self.bucket, self.prefix, INTRO_FILE, etag,
                                       (self.path / INTRO_FILE).read_bytes())
            except ObjectConflictError as exc:
                self.refresh_pages([INTRO_FILE])
                raise _conflict(exc, self.prefix) from None
            self._drop(INTRO_FILE)
            self.state.save()
            return where

    def archived(self) -> list[str]:
        return archived_names(self.bucket, self.prefix)

    # restore (manage.removal.restore_page): planned and made on the bucket's archive/.

    def archive_shelf(self) -> Shelf:
        return BucketShelf(self)

    def moving(self) -> AbstractContextManager[object]:
        return self.state.lock  # re-entrant, like the field lock

    def restored(self, targets: list[str]) -> None:
        self.state.save()
        self._resync(set(targets))


def _stat(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_mtime_ns, info.st_size


def _conflict(exc: ObjectConflictError, prefix: str) -> WriteConflictError:
    name = exc.key.removeprefix(prefix)
    current = exc.current.data if exc.current is not None else None
    state = "was removed" if current is None else "was changed (or created)"
    return WriteConflictError(f"{name} {state} by another writer first; nothing was "
                              "overwritten", current=current)


def on_each_field(store: BucketStore, fn: Callable[[BucketField], None]) -> None:
    for name in store.field_names():
        fn(store.field(name))
