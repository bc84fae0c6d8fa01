"""A bucket field's ``archive/``: archiving an object without losing a concurrent change, and
the :class:`~deepfield.archive.Shelf` that restores from it (manage.removal.restore_page).

Archiving copies the object into ``archive/`` under a free name and then deletes it only if it
still has the ETag the archiver read: a page another writer changed meanwhile stays, and the
copy goes again. Restoring creates the page only where none is (``If-None-Match: *``).
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from ..archive import ARCHIVE_DIR, Shelf
from ..errors import InvalidPageError, PageConflictError, PageNotFoundError
from ..page import Page
from .objects import Bucket, Got, ObjectConflictError

if TYPE_CHECKING:
    from .field import BucketField


def archived_names(bucket: Bucket, prefix: str) -> list[str]:
    """The pages in the ``archive/`` of the field at ``prefix``, by name."""
    objects, _ = bucket.list(f"{prefix}{ARCHIVE_DIR}/")
    return sorted(o.name for o in objects if o.name.endswith(".md"))


def archive_object(bucket: Bucket, prefix: str, name: str, etag: str,
                   data: bytes | None) -> str:
    """Copy ``name`` into ``archive/`` under a free name, then delete it if it still has
    ``etag`` (else the copy goes again and ObjectConflictError is raised); the archived path,
    or "" when ``data`` was None and the object is already gone."""
    if data is None:
        got = bucket.get(prefix + name)
        if got is None:
            return ""
        data, etag = got.data, got.etag
    target, copy = put_archived(bucket, prefix, name, data)
    try:
        bucket.delete(prefix + name, if_match=etag)
    except ObjectConflictError:
        with contextlib.suppress(ObjectConflictError):
            bucket.delete(f"{prefix}{ARCHIVE_DIR}/{target}", if_match=copy)
        raise
    return f"{ARCHIVE_DIR}/{target}"


def put_archived(bucket: Bucket, prefix: str, name: str, data: bytes) -> tuple[str, str]:
    """``data`` into the bucket's ``archive/`` as ``name`` or, when that is taken, a free
    ``--archived-`` name; (the name, its ETag)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    stem = name.split("--archived-")[0].removesuffix(".md")
    for counter in range(1, 1000):
        target = name if counter == 1 else f"{stem}--archived-{stamp}-{counter}.md"
        try:
            return target, bucket.put(f"{prefix}{ARCHIVE_DIR}/{target}", data, create=True)
        except ObjectConflictError:
            continue
    raise InvalidPageError(f"no free name in {ARCHIVE_DIR}/ for {name}")


class BucketShelf(Shelf):
    """A bucket field's ``archive/``: its bucket listing (when each object was written) and
    objects, each fetched once, whether the plan reads it or the restore moves it."""

    def __init__(self, fld: BucketField) -> None:
        super().__init__(fld.path, fld.name)
        self.fld = fld
        objects, _ = fld.bucket.list(f"{fld.prefix}{ARCHIVE_DIR}/")
        self.modified = {o.name: o.modified for o in objects if o.name.endswith(".md")}
        self.objects: dict[str, Got | None] = {}
        self.live: set[str] | None = None

    def names(self) -> list[str]:
        return sorted(self.modified)

    def archived_at(self, name: str) -> float:
        return self.modified.get(name, 0.0)

    def _get(self, name: str) -> Got | None:
        if name not in self.objects:
            self.objects[name] = self.fld.bucket.get(f"{self.fld.prefix}{ARCHIVE_DIR}/{name}")
        return self.objects[name]

    def page(self, name: str) -> Page | None:
        got = self._get(name)
        page = Page.parse(got.data.decode("utf-8", "replace")) if got else None
        return None if page is None or page.frontmatter_error else page

    def is_live(self, filename: str) -> bool:
        if self.live is None:
            objects, _ = self.fld.bucket.list(self.fld.prefix)
            self.live = {o.name for o in objects}
        return filename in self.live

    def take(self, archived: str, target: str, uuid: str | None = None) -> str:
        """Create ``target`` in the bucket only where no page is, then delete the archived
        object if it is still the one read."""
        got = self._get(archived)
        if got is None:
            raise PageNotFoundError(f"archived page {archived} left {self.field_name}'s bucket")
        data = got.data
        if uuid is not None:  # a copy under another name: a uuid of its own
            page = Page.parse(data.decode("utf-8", "replace"))
            page.set("uuid", uuid)
            data = page.render().encode("utf-8")
        fld = self.fld
        try:
            etag = fld.bucket.put(fld.prefix + target, data, create=True)
        except ObjectConflictError:
            raise PageConflictError(
                f"a page named {target} already exists in {self.field_name}",
                "restore it under another name with --as NAME") from None
        with contextlib.suppress(ObjectConflictError):
            fld.bucket.delete(f"{fld.prefix}{ARCHIVE_DIR}/{archived}", if_match=got.etag)
        fld._keep(target, Got(data, etag, time.time(), time.time()))
        return target
