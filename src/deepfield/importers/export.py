"""Export a field to a plain folder: its pages and files, optionally as they were imported.

By default every page (and ``index.md``) is copied byte for byte into the target, with the
field's non-page files (images, attachments); the derived ``listing.md``, the index files and
the ``archive/`` and ``.deepfield/`` folders stay behind. ``original_paths`` puts imported
pages back at their ``source_path`` (folders recreated), and ``plain`` removes the
frontmatter keys deepfield added (exactly those, as recorded by the import; ``split_from``,
``part`` and ``parts`` too) and unwraps memory-tool files, so an unedited, unsplit import
exports back to the very bytes it came from. The target must be empty or new unless ``force``;
even then only files of the same name are replaced, one atomic rename each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ExportTargetError
from ..field import Field
from ..fsutil import TEMP_PREFIX, atomic_write, copy_file
from ..integrations.memory_files import MEMORY_PATH_KEY
from ..integrations.memory_files import ROOT as MEMORY_ROOT
from ..page import INTRO_FILE, LISTING_FILE, Page, is_debris
from ..page_text import is_utf8
from ..scan import scan_field
from .dates import restore_dates
from .links import relink
from .manifest import Manifest, PageRecord, sha256_hex
from .markdown_dirs import IMPORT_KEYS
from .memory_tool import unwrap

SPLIT_KEYS = ("split_from", "part", "parts")
BOOKKEEPING_KEYS = ("uuid", "created", "updated")
"""What deepfield fills in on every page it writes: a page no import recorded loses these in a
plain export (for an imported page its record says which keys the import added)."""
_INDEX_SUFFIXES = (".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".sqlite3-journal")


@dataclass
class ExportReport:
    field: str
    target: str
    pages: int = 0
    """Pages exported (index.md, the field's introduction, is not one: see ``intro``)."""
    intro: bool = False
    attachments: int = 0
    replaced: int = 0
    files: list[str] = dc_field(default_factory=list)
    skipped: list[dict[str, str]] = dc_field(default_factory=list)
    warnings: list[str] = dc_field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field, "target": self.target, "pages": self.pages,
            "intro": self.intro, "attachments": self.attachments, "replaced": self.replaced,
            "files": self.files,
            "skipped": self.skipped, "warnings": self.warnings,
        }


def safe_relative(path: str) -> str | None:
    """``path`` if it is a plain relative path that stays inside the target, else None."""
    if not path or "\\" in path or "\0" in path:
        return None
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(p in ("..", "") for p in pure.parts) or pure.parts[0] == ".":
        return None
    return pure.as_posix()


def _check_target(fld: Field, target: Path, force: bool) -> None:
    if target.exists() and not target.is_dir():
        raise ExportTargetError(f"{target} is a file", "give a folder to export into")
    resolved, field_dir = target.resolve(), fld.path.resolve()
    if resolved == field_dir or field_dir in resolved.parents:
        raise ExportTargetError(f"{target} is inside the field {fld.name}",
                                "export to a folder outside the field")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise ExportTargetError(
            f"{target} is not empty",
            "export into a new or empty folder, or pass --force to write into it: "
            "files of the same name are replaced, nothing else is touched",
        )


def _attachments(folder: Path) -> list[str]:
    names = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        name = entry.name
        if (name.endswith(".md") or name.startswith((".", TEMP_PREFIX)) or is_debris(name)
                or name.endswith(_INDEX_SUFFIXES) or not entry.is_file(follow_symlinks=False)):
            continue
        names.append(name)
    return names


def _plain(text: str, record: PageRecord | None) -> str:
    page = Page.parse(text)
    if page.frontmatter is None or page.frontmatter_error:
        return text
    added = record.added_keys if record else BOOKKEEPING_KEYS
    for key in {*SPLIT_KEYS, *IMPORT_KEYS, *added}:
        page.remove(key)
    if record is not None:
        restore_dates(page, record.source_dates)
    else:
        memory = _memory_rel(page)
        if memory is not None:  # written by the memory tool: its text is the file
            page.remove(MEMORY_PATH_KEY)
            if page.get("title") == memory:  # the tool's own title, not a person's
                page.remove("title")
    if (record is None or not record.had_frontmatter) and not page.frontmatter:
        page.frontmatter = None  # no empty "---" block where there was none
    if record is not None and record.wrapped is not None:
        inner = unwrap(page.body)
        if inner is not None:
            return inner if page.frontmatter is None else page.render_frontmatter() + inner
    return page.render()


def _original_lines(data: bytes, name: str, record: PageRecord | None) -> str | None:
    """The page's text with the lines whose links the import rewrote as the source had them,
    when the page is exactly as imported and in one file; else None."""
    if (record is None or not record.original_lines or list(record.files) != [name]
            or record.files[name] != sha256_hex(data)):
        return None  # edited since (the recorded lines may no longer be there) or split
    page = Page.parse(data.decode("utf-8", "replace"))
    if page.frontmatter_error:
        return None
    lines = page.body.split("\n")
    for number, line in record.original_lines.items():
        if not number.isdigit() or int(number) >= len(lines):
            return None
        lines[int(number)] = line
    page.body = "\n".join(lines)
    return page.render()


def _unedited(data: bytes, name: str, record: PageRecord | None) -> PageRecord | None:
    """``record`` when the page is one file exactly as its import wrote it, else None."""
    if record is None or list(record.files) != [name] or record.files[name] != sha256_hex(data):
        return None
    return record


def _source_bytes(text: str, record: PageRecord | None) -> str:
    """The exported text with the source's ``\r\n`` line breaks and byte order mark back
    (and no line break after a closing ``---`` that ended the file without one)."""
    if record is not None and record.bare_end and text.endswith("\n"):
        text = text[:-1]
    if record is not None and record.crlf:
        text = text.replace("\n", "\r\n")
    return ("\ufeff" + text) if record is not None and record.bom else text


def _memory_rel(page: Page) -> str | None:
    """``a/b.md`` for a page the memory tool keeps as ``/memories/a/b.md``."""
    path = page.get_str(MEMORY_PATH_KEY)
    if path is None or not path.startswith(MEMORY_ROOT + "/"):
        return None
    return safe_relative(path[len(MEMORY_ROOT) + 1:])


def _original_path(text: str, record: PageRecord | None) -> str | None:
    page = Page.parse(text)
    source = record.source_path if record else (
        page.get_str("source_path") or _memory_rel(page))
    rel = safe_relative(source) if source else None
    if rel is None:
        return None
    part = page.get("part")
    if isinstance(part, int) and part > 1:  # later parts of a split page sit beside part 1
        pure = PurePosixPath(rel)
        rel = str(pure.with_name(f"{pure.stem}-part-{part}{pure.suffix}"))
    return rel


def _free(rel: str, taken: set[str], report: ExportReport, name: str) -> str:
    """``rel``, or ``stem-2.ext``... when another file of the export already has it."""
    pure, n, free = PurePosixPath(rel), 1, rel
    while free in taken:
        n += 1
        free = str(pure.with_name(f"{pure.stem}-{n}{pure.suffix}"))
    if free != rel:
        report.warnings.append(f"{name}: {rel} was taken, exported as {free}")
    taken.add(free)
    return free


def _relink(text: str, here: str, places: dict[str, str]) -> str:
    page = Page.parse(text)
    if page.frontmatter_error or page.frontmatter is None:
        return relink(text, here, places)
    return page.render_frontmatter() + relink(page.body, here, places)


def _check_places(dest: Path, rels: list[str]) -> None:
    """Refuse before writing anything when a file would go where the target has a folder, or
    below a file (with ``force``, half an export would be left behind otherwise)."""
    for rel in rels:
        path = dest / rel
        if path.is_dir():
            raise ExportTargetError(f"{path} is a folder, where the export puts a file",
                                    "export into an empty folder, or move it away")
        for parent in path.parents:
            if parent == dest:
                break
            if parent.exists() and not parent.is_dir():
                raise ExportTargetError(f"{parent} is a file, where the export needs a folder",
                                        "export into an empty folder, or move it away")


def _put(path: Path, data: bytes, report: ExportReport) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise ExportTargetError(f"{path} is a folder", "export into an empty folder")
    if path.exists():
        report.replaced += 1
    atomic_write(path, data)


def _put_file(path: Path, source: Path, report: ExportReport) -> None:
    """As ``_put``, copying the file ``source`` a chunk at a time (a multi-GB video)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise ExportTargetError(f"{path} is a folder", "export into an empty folder")
    if path.exists():
        report.replaced += 1
    copy_file(source, path)


def export_field(
    fld: Field,
    target: str | Path,
    *,
    original_paths: bool = False,
    plain: bool = False,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """Write the field's pages and files into the folder ``target`` (see the module doc)."""
    dest = Path(target).expanduser()  # not a folder named "~" in the working directory
    _check_target(fld, dest, force)
    dest.mkdir(parents=True, exist_ok=True)
    report = ExportReport(fld.name, str(dest))
    manifest = Manifest.load(fld.path)
    records = manifest.by_filename()
    names = [f.name for f in scan_field(fld.path).files]
    if (fld.path / INTRO_FILE).is_file():
        names.insert(0, INTRO_FILE)
    if (fld.path / LISTING_FILE).is_file():
        report.skipped.append({"path": LISTING_FILE, "reason": "derived catalogue"})
    texts = {name: (fld.path / name).read_bytes() for name in names}
    files = _attachments(fld.path)
    # An imported attachment named like an index file (``data.sqlite3``) is the user's own.
    files += sorted(name for name in manifest.attachments if name not in files
                    and name.endswith(_INDEX_SUFFIXES) and (fld.path / name).is_file())
    # Where everything goes, first, so links between pages can follow them.
    places: dict[str, str] = {}
    taken: set[str] = set()
    originals = {name: _original_path(texts[name].decode("utf-8", "replace"),
                                      records.get(name, (None, None))[1])
                 for name in names} if original_paths else {}
    # A page going back to its source path first: an imported note ``index.md`` gets that
    # path back, and the field's own introduction (no source path) gives way.
    for name in sorted(names, key=lambda n: originals.get(n) is None):
        places[name] = _free(originals.get(name) or name, taken, report, name)
    for name in files:
        rel = name
        if original_paths and name in manifest.attachments:
            rel = safe_relative(manifest.attachments[name].source_path) or name
        places[name] = _free(rel, taken, report, name)
    _check_places(dest, [places[n] for n in [*names, *files]])
    for name in names:
        data = texts[name]
        if (original_paths or plain) and not is_utf8(data):
            # Rewriting it would put U+FFFD for every byte that is not UTF-8: copy it as it is.
            report.warnings.append(f"{name}: not UTF-8, exported as it is (links and keys "
                                   "unchanged)")
        elif original_paths or plain:
            record = records.get(name, (None, None))[1]
            # Both: the source's own lines, whose links were right where the page goes back.
            restored = _original_lines(data, name, record) if plain and original_paths \
                else None
            text = restored or data.decode("utf-8", "replace")
            if plain:
                text = _plain(text, record)
            if original_paths and restored is None:
                text = _relink(text, places[name], places)
            if plain and original_paths and _unedited(data, name, record):
                text = _source_bytes(text, record)
            data = text.encode("utf-8")
        _put(dest / places[name], data, report)
        if name == INTRO_FILE:  # the introduction travels too, but is not a page
            report.intro = True
        else:
            report.pages += 1
        if progress:
            progress(1)
    for name in files:
        _put_file(dest / places[name], fld.path / name, report)
        report.attachments += 1
    report.files = [places[n] for n in [*names, *files]]
    return report
