"""``rm`` and ``restore`` of whole pages: every part of a split page moves together, and the
supersede links follow — a page whose successor is archived is shown again, and hidden again
when the successor comes back (manage/supersede.py). The file moves are deepfield.archive's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..archive import (
    ARCHIVE_DIR,
    ArchiveResult,
    RestoreResult,
    plan_restore,
    read_page,
    split_parts,
)
from ..errors import DeepfieldError
from ..page import new_uuid
from ..scan import scan_field
from .review import settle_gone
from .supersede import release, relink

if TYPE_CHECKING:
    from ..field import Field


def archive_page(fld: Field, ref: str) -> ArchiveResult:
    """``rm``: archive a page with all its parts (Field.archive moves each file), then
    release the pages it superseded (manage.supersede.release). The parts are found and
    moved under the field's lock, the one writers hold: a write of the page between two
    moves left orphan parts, or a second set of parts beside the old ones."""
    with fld.moving():
        filename = fld.resolve(ref)
        names = split_parts(fld.path, filename)
        uuids = {n: page.uuid if (page := read_page(fld.path / n)) else None for n in names}
        result = ArchiveResult(fld.name, [fld.archive(filename)])
        for name in names[1:]:
            try:
                result.archived.append(fld.archive(name))
            except DeepfieldError as exc:  # removed by hand meanwhile: the rest still goes
                result.warnings.append(f"part {name} was not archived: {exc.message}")
    gone = {n: uuids[n] for n, where in zip(names, result.archived, strict=False) if where}
    result.unsuperseded, warnings = release(fld, gone)
    result.warnings += warnings
    result.settled = settle_gone(fld)
    return result


def restore_page(fld: Field, name: str, as_name: str | None) -> RestoreResult:
    """``restore``: plan_restore's moves (made by the field's archive Shelf), under the
    field's lock; a copy restored under another name gets a fresh uuid when its own still
    belongs to a live page (two pages with one uuid could not be read by it). Then the pages
    it supersedes are hidden again (manage.supersede.relink)."""
    with fld.moving():  # the field lock; a bucket field's own
        shelf = fld.archive_shelf()
        plan = plan_restore(shelf, fld.name, name, as_name)
        fresh = None
        if len(plan.moves) == 1 and plan.uuid:
            index = fld.index_handle()
            index.sync(scan_field(fld.path).files)  # pages written by hand count too
            if any((d.uuid or "").lower() == plan.uuid.lower()
                   for d in index.docs_by_uuid(plan.uuid)):
                fresh = new_uuid()
        targets = [shelf.take(archived, target, fresh if i == 0 else None)
                   for i, (archived, target) in enumerate(plan.moves)]
        fld.restored(targets)
    result = RestoreResult(fld.name, targets[0], f"{ARCHIVE_DIR}/{plan.source}", targets,
                           plan.others, fresh, warnings=plan.warnings)
    page = read_page(fld.path / targets[0])
    if page is not None:
        result.relinked, warnings = relink(fld, targets[0], page)
        result.warnings += warnings
    return result
