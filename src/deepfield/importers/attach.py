"""Files an import writes besides pages: attachments, and copies of pages it replaces.

Attachments (images, PDFs... of an Obsidian vault) go to the field root under flat, safe names;
memoryfields allow non-page files there and never index them. A re-import replaces an
attachment only if nobody changed it in the field since. Before an import replaces a page that
was edited in the field (``--overwrite``), the edited version is copied into ``archive/``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..archive import ARCHIVE_DIR
from ..field import Field
from ..fsutil import copy_file, create_new, file_sha256
from ..scan import OWN_SUBDIRS
from .links import LinkMap
from .manifest import AttachmentRecord, Manifest
from .sources import attachment_name

if TYPE_CHECKING:
    from .markdown_dirs import DirImportReport


def keep_copy(fld: Field, names: list[str]) -> list[str]:
    """Copy pages into ``archive/`` under fresh names before they are replaced."""
    folder = fld.path / ARCHIVE_DIR
    folder.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    kept = []
    for name in names:
        path = fld.path / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        counter = 1
        target = folder / f"{name[:-3]}--edited-{stamp}.md"
        while not create_new(target, data):
            counter += 1
            target = folder / f"{name[:-3]}--edited-{stamp}-{counter}.md"
        kept.append(f"{ARCHIVE_DIR}/{target.name}")
    return kept


def archive_old_parts(fld: Field, old: list[str], files: list[str],
                      report: DirImportReport) -> None:
    """Archive the parts an older deepfield split a page into (``old``), now that it is
    written whole as ``files``: left behind, they still claimed its path (the memory tool
    read one of them)."""
    left = [n for n in old if n not in files and (fld.path / n).is_file()]
    if left:
        gone = [fld.archive(name) for name in left]
        report.warnings.append(f"{files[0]} is one page now, no longer split: its old parts "
                               f"went to {', '.join(gone)}")


def copy_attachments(
    fld: Field | None, root: Path, kind: str, rels: list[str], manifest: Manifest,
    links: LinkMap, report: DirImportReport, present: set[str],
    moved: dict[str, str] | None = None,
) -> None:
    """Copy non-page files into the field root (never indexed), with flat, safe names.
    ``moved``: source path -> the file copied from there when the folder was elsewhere."""
    mine = {(rec.root, rec.source_path): name for name, rec in manifest.attachments.items()}
    for rel, known in (moved or {}).items():
        mine.setdefault((str(root), rel), known)
    folder = None if fld is None or report.dry_run else fld.path  # None: write nothing
    for rel in rels:
        # Hashed and copied a chunk at a time: an attachment may be a multi-GB video.
        try:
            digest = file_sha256(root / rel)
        except OSError as exc:  # no permission, or removed while the import runs
            report.skip(rel, f"cannot be read ({exc.strerror or exc})")
            continue
        try:  # the copies read the file again: it may go while the import runs
            name = mine.get((str(root), rel))
            if name is not None and name in present:
                assert fld is not None
                record = manifest.attachments[name]
                current = file_sha256(fld.path / name)
                if current != record.sha256 and current != digest:
                    report.skip(rel, f"{name} was changed in the field since the last import")
                    links.add(rel, name)
                    continue
                if current != digest:
                    if folder is not None:
                        copy_file(root / rel, folder / name)
                    report.attachments += 1
            else:
                base = attachment_name(rel)
                stem, dot, ext = base.rpartition(".") if "." in base else (base, "", "")
                name, n = base, 1
                while (name.endswith(".md") or name in OWN_SUBDIRS or name in present
                       or (folder is not None and (os.path.lexists(folder / name) or not
                                                   copy_file(root / rel, folder / name,
                                                             create_only=True)))):
                    n += 1
                    name = f"{stem}-{n}{dot}{ext}"
                present.add(name)
                report.attachments += 1
        except OSError as exc:
            report.skip(rel, f"cannot be read ({exc.strerror or exc})")
            continue
        manifest.attachments[name] = AttachmentRecord(kind, str(root), rel, digest)
        links.add(rel, name)
