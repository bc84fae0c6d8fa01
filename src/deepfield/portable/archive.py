"""Pack a field into a ``.memoryfield.zip`` and unpack one into a store, pinned by sha256.

``pack`` writes the field's pages, ``index.md``, ``listing.md`` and other non-page files and
sub-folders without pages (the review queue, images), in name order with the files' own mtimes,
so packing the same folder twice gives the same bytes and the same sha256. It leaves out
``archive/`` (archived pages are ``.md`` files in a sub-folder, which a memoryfield must not
have), ``activation/`` (the usage log: every read and search appends to it, so it would change
the sha256 of the same pages, and it is the sender's reading history, not the field's
knowledge; the spec's producers leave log files out), ``.deepfield/`` and other hidden files,
and index files, except the current model's
``<model-code>.sqlite3`` with ``with_index`` (copied through SQLite's backup API, so a search
running meanwhile cannot tear it, and cut down to the packed pages: snapshot.py).

``unpack`` verifies the pin and checks the whole zip (see zipsafe.py) before writing anything,
keeps only what pack could have written (entries.py), extracts into a hidden temporary folder
beside the target, builds the index from the pages when the zip ships one (shipped.py) and
renames the folder into place: the target either appears complete or not at all, and an
existing folder is never written into.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..debris import UNPACK_PREFIX, clean, new_temp_dir, new_temp_file
from ..errors import (
    ArchiveError,
    ExportTargetError,
    FieldExistsError,
    NothingToPackError,
    UnsafeArchiveError,
)
from ..fsutil import TEMP_SUFFIX
from ..manage.activation_log import ACTIVATION_DIR
from ..page import LISTING_FILE, is_debris, is_valid_name, slugify
from ..page_text import is_utf8
from ..scan import OWN_SUBDIRS
from .entries import kept_entries
from .snapshot import snapshot_index
from .zipsafe import (
    DEFAULT_LIMITS,
    INDEX_SUFFIXES,
    ZIP_SUFFIX,
    ZipLimits,
    copy_member,
    entry_mtime,
    is_page_member,
    open_checked,
    sha256_file,
    ut_extra,
)

FILE_MODE = 0o100644 << 16
DOS_EPOCH = dt.datetime(1980, 1, 2, tzinfo=dt.UTC).timestamp()


@dataclass
class PackResult:
    path: Path
    sha256: str
    files: int
    pages: int
    bytes: int
    index: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path), "sha256": self.sha256, "files": self.files,
            "pages": self.pages, "bytes": self.bytes, "index": self.index,
            "warnings": self.warnings,
        }


@dataclass
class UnpackResult:
    path: Path
    sha256: str
    files: int
    pages: int
    bytes: int
    index_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            # the new field's name: what later commands take (the default is the zip's name)
            "field": self.path.name,
            "path": str(self.path), "sha256": self.sha256, "files": self.files,
            "pages": self.pages, "bytes": self.bytes, "index_files": self.index_files,
            "warnings": self.warnings,
        }


def default_zip_name(field_name: str) -> str:
    return f"{field_name}{ZIP_SUFFIX}"


def field_name_for(zip_path: Path) -> str:
    """The field name a zip unpacks to: its stem without ``.memoryfield.zip`` (slugified)."""
    name = zip_path.name
    for suffix in (ZIP_SUFFIX, ".zip"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name if is_valid_name(name) else slugify(name) or "field"


# ---------------------------------------------------------------------- pack


def _is_skipped(name: str) -> bool:
    return name.startswith(".") or is_debris(name) or name.endswith(INDEX_SUFFIXES)


def _holds_md(folder: Path) -> bool:
    for _root, _dirs, names in os.walk(folder, followlinks=False):
        if any(n.endswith(".md") for n in names):
            return True
    return False


def pack_members(folder: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(arcname, path) of every file a zip of ``folder`` holds, sorted; plus warnings."""
    members: list[tuple[str, Path]] = []
    warnings: list[str] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        name = entry.name
        if _is_skipped(name) or name in OWN_SUBDIRS or name == ACTIVATION_DIR:
            continue
        if entry.is_symlink():
            warnings.append(f"{name}: symbolic link left out")
            continue
        if entry.is_file():
            # (A page that is not UTF-8 is left out by pack_folder, which reads it anyway:
            # listing stays a scan of names, cheap enough for a server's zip cache key.)
            if is_page_member(name) and not is_valid_name(name[:-3]):
                warnings.append(f"{name}: not a spec page name, left out (rename it to "
                                f"{slugify(name[:-3]) or 'a-name'}.md: lowercase letters, "
                                "digits and hyphens)")
                continue
            members.append((name, Path(entry.path)))
        elif entry.is_dir():
            sub = Path(entry.path)
            if _holds_md(sub):
                warnings.append(f"{name}/: holds .md files, which a memoryfield zip must not "
                                "have in sub-folders; left out")
                continue
            for root, dirs, names in os.walk(sub, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for item in sorted(names):
                    path = Path(root, item)
                    if item.startswith(".") or is_debris(item) or path.is_symlink():
                        continue
                    members.append((path.relative_to(folder).as_posix(), path))
    members.sort(key=lambda m: m[0])
    return members, warnings


def _zip_info(arcname: str, mtime: float) -> zipfile.ZipInfo:
    # DOS times hold local time; the UT extra field carries the exact UTC time for readers.
    moment = dt.datetime.fromtimestamp(max(mtime, DOS_EPOCH), dt.UTC)
    info = zipfile.ZipInfo(arcname, moment.timetuple()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = FILE_MODE
    info.extra = ut_extra(mtime)
    return info


def _utf8_members(
    members: list[tuple[str, Path]], warnings: list[str]
) -> list[tuple[str, Path]]:
    """``members`` less root ``.md`` files that are not UTF-8 (read here, before anything is
    written, so the listing and the index can be cut down to the pages that remain)."""
    kept: list[tuple[str, Path]] = []
    for arcname, path in members:
        if arcname.endswith(".md") and "/" not in arcname and not is_utf8(path.read_bytes()):
            warnings.append(f"{arcname}: not valid UTF-8, left out (memoryfield pages "
                            "are UTF-8 text; re-save it as UTF-8)")
            continue
        kept.append((arcname, path))
    return kept


def _nothing_to_pack(folder: Path, warnings: list[str]) -> NothingToPackError:
    # Without the reasons, "no pages" is a riddle for a folder full of .md files.
    hint = "; ".join(warnings) if warnings else "add a page first"
    return NothingToPackError(f"{folder.name} has no pages to pack", hint)


def pack_folder(
    folder: Path,
    out: Path,
    *,
    index_path: Path | None = None,
    listing: Callable[[list[str]], bytes | None] | None = None,
    force: bool = False,
    level: int = 6,
) -> PackResult:
    """Write ``folder`` as a memoryfield zip at ``out`` (atomically); see the module docstring.

    ``listing(pages)`` gives the bytes of the zip's ``listing.md`` for the pages packed (None:
    the file as it is); ``index_path`` is snapshotted holding those pages only (snapshot.py)."""
    # A zip inside the field would replace a page (--force over team.md) or be packed into
    # the next zip; resolve() follows symbolic links, so a link into the field counts too.
    resolved, field_dir = out.resolve(), folder.resolve()
    if resolved == field_dir or field_dir in resolved.parents:
        raise ExportTargetError(f"{out} is inside the field {folder.name}",
                                "write the zip outside the field's folder (-o PATH)")
    if out.is_dir():  # else os.replace fails naming the temporary file
        raise ArchiveError(f"{out} is a folder", "give a file path for -o, e.g. -o "
                           f"{out / default_zip_name(folder.name)}")
    if out.exists() and not force:
        raise ArchiveError(f"{out} already exists", "choose another -o NAME or pass --force")
    members, warnings = pack_members(folder)
    members = _utf8_members(members, warnings)
    pages = [name for name, _ in members if is_page_member(name)]
    if not pages:
        raise _nothing_to_pack(folder, warnings)
    overrides: dict[str, bytes] = {}
    if listing is not None and (text := listing(pages)) is not None:
        overrides[LISTING_FILE] = text
    out.parent.mkdir(parents=True, exist_ok=True)
    clean(out.parent)  # what a killed pack left beside its output
    # Held until fd is closed (debris.py): work in progress, its index snapshot with it.
    fd, temp = new_temp_file(out.parent, TEMP_SUFFIX)
    snapshot: Path | None = None
    try:
        entries = [(name, path, path.stat().st_mtime) for name, path in members]
        if index_path is not None and index_path.is_file():
            snapshot = temp.with_suffix(".sqlite3")
            snapshot_index(index_path, snapshot, pages)
            # The live file's mtime moves with every sync; the pages' newest time does not.
            packed = set(pages)
            newest = max(mtime for name, _, mtime in entries if name in packed)
            entries.append((index_path.name, snapshot, newest))
            entries.sort(key=lambda e: e[0])  # the spec's order: by name, the index too
        with zipfile.ZipFile(temp, "w", compresslevel=level) as archive:
            for arcname, path, mtime in entries:
                info = _zip_info(arcname, mtime)
                if arcname in overrides:
                    archive.writestr(info, overrides[arcname])
                    continue
                with path.open("rb") as source, archive.open(info, "w") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
        with temp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, out)
    finally:
        for leftover in (temp, snapshot):
            if leftover is not None:
                with contextlib.suppress(OSError):
                    leftover.unlink()
        os.close(fd)
    return PackResult(
        path=out, sha256=sha256_file(out), files=len(entries), pages=len(pages),
        bytes=out.stat().st_size,
        index=index_path.name if snapshot is not None and index_path else None,
        warnings=warnings,
    )


# ---------------------------------------------------------------------- unpack


def _check_pages_left(infos: list[zipfile.ZipInfo], label: str, warnings: list[str],
                      names: list[str] | None = None) -> None:
    """ArchiveError unless a page is left (of ``names`` once extracted): a memoryfield holds
    at least one; the hint says why the zip's other .md files were left out."""
    if names is None:
        names = [i.filename for i in infos if not i.is_dir()]
    if not any(is_page_member(n) for n in names):
        raise ArchiveError(f"{label} holds no pages", "; ".join(warnings) if warnings else
                           "a memoryfield zip holds at least one .md page at its root")


def extract_checked(
    zip_path: Path,
    target: Path,
    *,
    pin: str | None = None,
    limits: ZipLimits = DEFAULT_LIMITS,
    adopt: Callable[[Path, list[str]], list[str]] | None = None,
) -> UnpackResult:
    """Verify and extract ``zip_path`` into a new folder ``target`` (which must not exist).

    ``adopt(folder, index_files)`` runs on the extracted folder before it takes the target's
    name (so no one opens a shipped index meanwhile), when the zip holds index files; it
    returns warnings."""
    if target.exists():
        kind = "folder" if target.is_dir() else "file"
        raise FieldExistsError(
            f"{target} already exists; unpacking never writes over an existing {kind}",
            "unpack under another name with --as NAME",
        )
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    clean(parent, unpack=True)  # folders of unpacks that were killed
    holder, staging = new_temp_dir(parent, UNPACK_PREFIX)  # held until closed (debris.py)
    # The field is made one level down: the held (locked) folder is not the field folder,
    # whose own lock indexing takes (fsutil.field_lock).
    folder = staging / "field"
    names: list[str] = []
    try:
        with open_checked(zip_path, pin=pin, limits=limits) as (archive, checked, digest):
            infos, warnings = kept_entries(checked)
            _check_pages_left(infos, zip_path.name, warnings)
            total = 0
            for info in infos:
                path = folder.joinpath(*info.filename.split("/"))
                if info.is_dir():
                    continue
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    out = path.open("xb")
                except (FileExistsError, NotADirectoryError, IsADirectoryError):
                    # names that differ only in case, on a case-insensitive file system
                    raise UnsafeArchiveError(
                        f"{zip_path.name}: entry {info.filename!r} clashes with another entry"
                    ) from None
                with out:
                    total += copy_member(archive, info, out, zip_path.name)
                if is_page_member(info.filename) and not is_utf8(path.read_bytes()):
                    path.unlink()  # the spec's pages are UTF-8; pack would leave it out too
                    warnings.append(f"{info.filename}: not valid UTF-8, left out")
                    continue
                names.append(info.filename)
                mtime = entry_mtime(info)
                os.utime(path, (mtime, mtime))
            _check_pages_left(infos, zip_path.name, warnings, names)
        index_files = [n for n in names if "/" not in n and n.endswith(".sqlite3")]
        if adopt is not None and index_files:
            warnings += adopt(folder, index_files)
        if target.exists():  # appeared while we were extracting
            raise FieldExistsError(f"{target} already exists", "unpack under another name")
        os.rename(folder, target)
        shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        os.close(holder)  # before anyone takes the new field's own lock (fsutil.field_lock)
    return UnpackResult(
        path=target, sha256=digest, files=len(names),
        pages=sum(1 for n in names if is_page_member(n)), bytes=total,
        index_files=index_files, warnings=warnings,
    )
