"""A note that gains its own ``uuid`` in the source after it was imported.

Its page (found by its source path in the import manifest) takes the new uuid, rather than
the import making a second page for the same note beside it.
"""

from __future__ import annotations

from pathlib import Path

from ..field import Field
from ..fsutil import atomic_write, field_lock
from ..page import Page
from .manifest import Manifest, file_digests, untouched
from .sources import SourceDoc


def take_own_uuid(fld: Field | None, doc: SourceDoc, found: str | None, root: Path,
                  by_uuid: dict[str, str], manifest: Manifest, warnings: list[str], *,
                  dry_run: bool) -> None:
    """A note whose source now carries a ``uuid`` other than its page's (one given since the
    last import): ``found`` is the uuid of the page imported from its path before (a key of
    ``by_uuid``, uuid -> filename, and of the manifest, both updated here). Its page is the
    same note, so it takes the new uuid rather than a copy being made beside it; a uuid
    another page has already is reported, not taken."""
    own = doc.page.uuid
    if (fld is None or not own or found is None or found.lower() == own.lower()
            or found not in by_uuid):
        return
    current = by_uuid[found]
    if own in by_uuid:
        warnings.append(
            f"{doc.rel}: its frontmatter uuid {own} is the uuid of the field's page "
            f"{by_uuid[own]}, not of its own page {current} (imported from it before); give "
            "the note back its uuid, or remove one of the two pages")
        return
    record = manifest.pages[found]
    if not untouched(fld.path, record):
        warnings.append(
            f"{doc.rel}: it now has uuid {own}, but its page {current} was edited in the field "
            "since the last import, so it is imported as a new page")
        return
    if not dry_run:
        # The page is the import's own, untouched: give it the new uuid first (a write
        # refuses to change a page's uuid), so the update below replaces it in place.
        with field_lock(fld.path):
            page = Page.parse((fld.path / current).read_text("utf-8"))
            page.set("uuid", own)
            atomic_write(fld.path / current, page.render().encode("utf-8"))
        record.files.update(file_digests(fld.path, [current]))
        doc.uuid_taken = True
    by_uuid[own] = by_uuid.pop(found)
    manifest.pages[own] = manifest.pages.pop(found)
    doc.moved = record.root != str(root)
