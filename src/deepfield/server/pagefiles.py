"""A field's files as both servers hand them out: which file a page name may reach (the
name, separator, hidden-file and delete rules), which view of a page a read asks for, and
the field's ``.memoryfield.zip``. Nothing here holds a lock: :class:`~.service.Service`
calls these under the field's.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import DeepfieldError, InvalidNameError, PageNotFoundError
from ..field import Field
from ..page import can_be_a_file_name, check_name, is_debris
from ..portable.archive import pack_folder, pack_members


def page_path(field: Field, filename: str, *, existing: bool = False,
              deleting: bool = False) -> Path:
    """The file of page ``filename`` inside the field, refusing anything that escapes it
    (``..``, absolute paths, symbolic links pointing out of the folder). ``existing``
    (reads): a page already in the folder is served even when its name breaks the spec's
    rules ("My Notes.md" made in an editor: indexed with a warning, so search lists it);
    writes only ever take spec names. ``deleting``: such a name that is not there (any
    more) is PageNotFoundError, as for any missing page: a second DELETE of "My Notes.md"
    after it was archived was a 400, as if the name had never been accepted."""
    # A backslash separates folders only on Windows; elsewhere it is a character of a
    # name ("Q1\\Q2.md" from a bucket), which scan indexes and search lists: it is read.
    separators = {"/", os.sep, os.altsep or "/"}
    if any(sep in filename for sep in separators) or not filename.endswith(".md"):
        raise InvalidNameError(f"{filename!r} is not a page filename")
    if not can_be_a_file_name(filename):  # a NUL, or longer than any file name
        if existing:
            raise PageNotFoundError(f"no page {filename[:60]!r}… in field {field.name}")
        raise InvalidNameError(f"{filename[:60]!r}… is not a page filename (a NUL "
                               "character, or over 255 bytes)")
    try:
        check_name(filename)
    except InvalidNameError:
        hidden = filename.startswith(".") or is_debris(filename)  # never indexed either
        if not existing or hidden:
            raise
        if not (field.path / filename).is_file():
            if deleting:
                raise PageNotFoundError(
                    f"no page {filename!r} in field {field.name}") from None
            raise
    root = field.path.resolve()
    path = field.path / filename
    if path.is_symlink() or path.resolve().parent != root:
        raise PageNotFoundError(f"no page {filename!r} in field {field.name}")
    return path


READ_VIEWS = ("outline", "full", "section")


def read_view(asked: str | None, section: str | None, key: str) -> str:
    """The view a read asks for (HTTP's ``view``, MCP's ``mode``: ``key`` names it in the
    messages): left out, ``section`` given means that section, else the outline (a section
    alone used to be ignored, the outline answered as if it had been read); a view the
    section contradicts, or ``section`` without one, is refused."""
    view = asked or ("section" if section else "outline")
    if view not in READ_VIEWS:
        raise DeepfieldError(f"unknown {key} {view!r}", "use outline, full or section")
    if view == "section" and not section:
        raise DeepfieldError(f"{key}=section needs section=HEADING",
                             f"add section, a heading or 'Parent > Child'; {key}=outline "
                             "lists the headings")
    if section and view != "section":
        raise DeepfieldError(f"section reads one section, but {key}={view} was asked for",
                             f"send {key}=section (or leave {key} out), or leave section out")
    return view


@dataclass(frozen=True)
class Snapshot:
    """A ``.memoryfield.zip`` of a field as it was when ``key`` was taken."""

    key: str
    data: bytes
    sha256: str


def snapshot_of(field: Field, cached: Snapshot | None) -> Snapshot:
    """The field's zip: ``cached`` when no file changed since it was made, else a new one
    (call under the field's lock)."""
    field.ensure_synced(embed=False)  # listing.md current before it is packed
    stats = [(n, p.stat()) for n, p in zip_members(field.path)]
    key = hashlib.sha256(repr([(n, s.st_mtime_ns, s.st_size) for n, s in stats])
                         .encode()).hexdigest()
    if cached is not None and cached.key == key:
        return cached
    data = pack_zip(field.path)
    return Snapshot(key, data, hashlib.sha256(data).hexdigest())


def zip_members(folder: Path) -> list[tuple[str, Path]]:
    """(name in the zip, file) of everything a memoryfield zip of ``folder`` holds."""
    return pack_members(folder)[0]


def pack_zip(folder: Path) -> bytes:
    """The zip's bytes, through ``deepfield pack``'s own writer (the same bytes as the
    command, so the same sha256). Its sha256 is the ETag."""
    with tempfile.TemporaryDirectory(prefix="deepfield-zip-") as tmp:
        out = Path(tmp) / "field.memoryfield.zip"
        return pack_folder(folder, out, force=True).path.read_bytes()
