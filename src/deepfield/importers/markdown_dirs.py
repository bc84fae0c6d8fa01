"""Import a folder of Markdown notes (any tree) into a field: the engine all note importers share.

Each source file becomes one page named by flattening its path (see ``sources``), with its own
frontmatter kept byte for byte and two keys added: ``source_path`` (the path inside the source
folder) and ``imported_from`` (the format). A missing ``title`` comes from the first H1, else
the filename; a missing ``uuid`` is derived from the field, the source folder and the path, so
importing again finds and updates the same page instead of adding a copy. Adapters
(obsidian, claude_code, memory_tool, basic_memory) choose the files and adjust each page.

Safety: a field that exists is only written with ``into=True`` (or when it came from this very
source before); no page is ever overwritten unless it is the import's own, untouched page (see
``manifest``); unreadable files are skipped with a reason, or refused up front with ``strict``.
"""

from __future__ import annotations

import contextlib
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from ..errors import FieldExistsError, ImportFormatError, PageError
from ..field import Field
from ..fsutil import field_lock
from ..page import Page, is_valid_name, iso_from_timestamp, slugify
from ..store import Store
from .attach import archive_old_parts, copy_attachments, keep_copy
from .dates import fill_dates
from .links import LinkMap, LinkStats, rewrite_relative_links
from .manifest import (
    MANIFEST_DIR,
    Manifest,
    PageRecord,
    file_digests,
    sha256_hex,
    untouched,
)
from .own_uuid import take_own_uuid
from .part_anchors import repoint_part_anchors
from .sources import (
    Selection,
    SourceDoc,
    changed_lines,
    is_markdown,
    link_names,
    note_title,
    plan_names,
    read_docs,
)
from .sources import walk as walk_tree

IMPORT_KEYS = ("source_path", "imported_from")
"""Frontmatter keys every imported page gets (documented in docs/FORMAT.md)."""
_NAMESPACE = uuidlib.UUID("0f6b3c52-8a4e-4d0b-9c55-2f1d7e9a4b61")


@dataclass
class Adapter:
    """How one source format is imported: which files, and what to do to each page."""

    kind: str
    summary: str
    select: Callable[[Path], Selection]
    prepare: Callable[[SourceDoc], None] | None = None
    """called once per page before names are chosen (add keys, wrap non-Markdown text)"""
    convert: Callable[[SourceDoc, LinkMap, LinkStats], None] | None = None
    """called once per page after names are known (rewrite links)"""
    attachments: bool = False
    """copy non-page files into the field by default"""
    split: bool = True
    """split pages over the spec's 8 KB into parts (the memory tool reads one page per file)"""


@dataclass
class DirImportReport:
    field: str
    kind: str
    source: str
    dry_run: bool = False
    field_created: bool = False
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    attachments: int = 0
    links_rewritten: int = 0
    pages: list[dict[str, Any]] = dc_field(default_factory=list)
    skipped: list[dict[str, str]] = dc_field(default_factory=list)
    renamed: list[dict[str, str]] = dc_field(default_factory=list)
    gone: list[dict[str, str]] = dc_field(default_factory=list)
    """pages an earlier import of this source made whose source file is gone (kept)"""
    warnings: list[str] = dc_field(default_factory=list)

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append({"path": path, "reason": reason})
        self.warnings.append(f"{path}: skipped, {reason}")

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field, "kind": self.kind, "source": self.source,
            "dry_run": self.dry_run, "field_created": self.field_created, "created": self.created,
            "updated": self.updated, "unchanged": self.unchanged,
            "imported": self.created + self.updated, "attachments": self.attachments,
            "links_rewritten": self.links_rewritten, "skipped": self.skipped,
            "renamed": self.renamed, "gone": self.gone, "warnings": self.warnings,
            "pages": self.pages,
        }


def select_markdown(root: Path) -> Selection:
    """Generic adapter: every ``.md``/``.markdown`` file is a page, the rest attachments."""
    files, skipped = walk_tree(root)
    return Selection(
        pages=[f for f in files if is_markdown(f)],
        attachments=[f for f in files if not is_markdown(f)],
        skipped=skipped,
    )


def convert_markdown(doc: SourceDoc, links: LinkMap, stats: LinkStats) -> None:
    doc.page.body = rewrite_relative_links(doc.page.body, doc.rel, links, stats)


MARKDOWN = Adapter("markdown", "any folder of Markdown files", select_markdown,
                   convert=convert_markdown)


def check_source(source: Path) -> Path:
    source = source.expanduser()  # ("~/Vault" from Python: no shell expands it there)
    if not source.exists():
        raise ImportFormatError(f"no folder at {source}", "check the path to import from")
    if not source.is_dir():
        raise ImportFormatError(f"{source} is a file, not a folder",
                                "give the folder that holds the notes")
    return source.resolve()


def count_sources(source: Path, adapter: Adapter) -> int:
    """How many page sources an import of ``source`` will look at (for progress bars)."""
    return len(adapter.select(check_source(source)).pages)


def import_dir(
    store: Store,
    source: str | Path,
    adapter: Adapter = MARKDOWN,
    *,
    field: str | None = None,
    into: bool = False,
    names: str = "short",
    attachments: bool | None = None,
    overwrite: bool = False,
    strict: bool = False,
    review: bool = False,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
) -> DirImportReport:
    """Import the notes under ``source`` into field ``field`` (default: the folder's name).

    ``review`` compares each new page with similar ones (deepfield's duplicate and
    contradiction queue); it is off because an import copies a person's existing notes,
    and flagging them would also change the pages (``review: pending``). ``dry_run`` reports
    what would happen (same counts, names and warnings) without creating or writing anything.
    """
    root = check_source(Path(source))
    name = field if field is not None else (slugify(root.name) or "imported")
    if not is_valid_name(name):
        raise ImportFormatError(f"field name {name!r} is not a spec filename",
                                f"pass --field {slugify(name) or 'NAME'}")
    target = (store.root / name).resolve()
    if root.resolve() == target or target in root.resolve().parents:
        # Importing a field into itself would rewrite the very files it reads.
        raise ImportFormatError(f"{source} is field {name!r} itself (or inside it)",
                                "import from a folder outside the field")
    if root.resolve() == store.root.resolve():
        # Its deepfield.toml would be copied into the field, and its fields read as notes.
        raise ImportFormatError(f"{source} is the store itself",
                                "import from a folder outside the store, or keep the store "
                                "elsewhere (--store)")
    source_key = str(root)
    report = DirImportReport(name, adapter.kind, str(root), dry_run=dry_run)
    selection = adapter.select(root)
    docs, unreadable = read_docs(root, selection.pages, strict)
    exists = name in store.field_names()
    if exists and not into and source_key not in Manifest.load(store.root / name).sources:
        raise FieldExistsError(
            f"field {name!r} already exists in {store.root}",
            "add --into to import into it, where existing pages are never overwritten (notes "
            "of a folder imported from a place that is gone are found again); or choose "
            "another --field",
        )
    for rel, why in selection.skipped + unreadable:
        report.skip(rel, why)
    for doc in docs:
        report.warnings.extend(doc.warnings)
    report.field_created = not exists
    fld = None if dry_run and not exists else store.create_field(name, exist_ok=True)
    with _import_lock(fld, dry_run):
        manifest = Manifest.load(store.root / name)
        before = manifest.sources.get(source_key, {})
        if attachments is None:
            # Importing again without repeating --attachments keeps the first import's
            # choice; otherwise links to the copied files would revert to source paths.
            remembered = before.get("attachments")
            if not isinstance(remembered, bool):  # recorded before the mode was: copied any?
                remembered = adapter.attachments or any(
                    rec.root == str(root) for rec in manifest.attachments.values())
            attachments = remembered
        manifest.sources[source_key] = {"kind": adapter.kind, "root": str(root),
                                        "imported": iso_from_timestamp(time.time()),
                                        "attachments": attachments}
        # One index sync and one listing.md for the whole import, not one per page.
        batch = fld.batch() if fld is not None and not dry_run else contextlib.nullcontext()
        try:
            with batch:
                _import(fld, name, root, adapter, docs, selection, manifest, report,
                        names=names, copy_files=attachments, overwrite=overwrite, review=review,
                        progress=progress)
        finally:
            if fld is not None and not dry_run:
                manifest.save()
    return report


@contextlib.contextmanager
def _import_lock(fld: Field | None, dry_run: bool) -> Iterator[None]:
    """One import at a time per field, so neither loses the other's manifest records.

    It locks ``.deepfield/``, not the field folder, which ``Field.write`` locks per page.
    """
    if fld is None or dry_run:
        yield
        return
    folder = fld.path / MANIFEST_DIR
    folder.mkdir(exist_ok=True)
    with field_lock(folder):
        yield


def _uuid_for(field_name: str, root: Path, doc: SourceDoc) -> str:
    own = doc.page.uuid
    if own:
        return own
    # Not the format: importing the same folder again with another adapter updates, too.
    return str(uuidlib.uuid5(_NAMESPACE, f"{field_name}\0{root}\0{doc.rel}"))


def _import(
    fld: Field | None, field_name: str, root: Path, adapter: Adapter, docs: list[SourceDoc],
    selection: Selection, manifest: Manifest, report: DirImportReport, *, names: str,
    copy_files: bool, overwrite: bool, review: bool, progress: Callable[[int], None] | None,
) -> None:
    """Plan names, copy attachments, then write page by page (``fld`` None: a dry run of
    an import into a field that does not exist yet)."""
    by_uuid = {d.uuid: d.filename for d in fld.pages() if d.uuid} if fld else {}
    moved_pages, moved_files = manifest.moved(str(root))
    uuids = {doc.rel: _uuid_for(field_name, root, doc) for doc in docs}
    for doc in docs:
        found = moved_pages.get(doc.rel)
        if doc.page.uuid:
            take_own_uuid(fld, doc, found, root, by_uuid, manifest, report.warnings,
                          dry_run=report.dry_run)
            continue
        if uuids[doc.rel] not in by_uuid and found in by_uuid and found != uuids[doc.rel]:
            # The folder was imported from another place that is gone: the same note.
            uuids[doc.rel], doc.moved = found, manifest.pages[found].root != str(root)
    olds = sorted({manifest.pages[uuids[d.rel]].root for d in docs if d.moved})
    if olds:
        count = sum(d.moved for d in docs)
        report.warnings.append(f"{count} note(s) taken for the pages imported from "
                               f"{', '.join(olds)}, which is gone (moved here?)")
    fixed = {rel: by_uuid[u][:-3] for rel, u in uuids.items() if u in by_uuid}
    present = [p.name for p in fld.path.iterdir()] if fld else []
    taken = {n for n in present if not n.startswith(".")} - {
        f"{stem}.md" for stem in fixed.values()}
    for doc in docs:
        if adapter.prepare:
            adapter.prepare(doc)
    stems, renames = plan_names([d.rel for d in docs], names, fixed, taken)
    for rel, stem, why in renames:
        report.renamed.append({"path": rel, "filename": f"{stem}.md", "reason": why})
        report.warnings.append(f"{rel}: imported as {stem}.md ({why})")
    links = LinkMap()
    for doc in docs:
        doc.stem = stems[doc.rel]
        links.add(doc.rel, f"{doc.stem}.md")
        links.add_names(link_names(doc.page), f"{doc.stem}.md")
    if copy_files:
        copy_attachments(fld, root, adapter.kind, selection.attachments, manifest, links,
                          report, set(present), moved_files)
    else:
        for rel in selection.attachments:
            report.skip(rel, "not a page (attachments are not copied for this import; "
                             "use --attachments)")
    stats = LinkStats()
    seen: dict[str, str] = {}
    for doc in docs:
        uuid = uuids[doc.rel]
        if uuid in seen:
            report.skip(doc.rel, f"its frontmatter uuid {uuid} is also the uuid of {seen[uuid]}")
            report.pages.append({"source_path": doc.rel, "filename": f"{doc.stem}.md",
                                 "action": "skipped"})
        else:
            seen[uuid] = doc.rel
            if adapter.convert:
                before = doc.page.body
                adapter.convert(doc, links, stats)
                linked = changed_lines(before, doc.page.body)
                doc.original_lines = {**(doc.original_lines or {}), **(linked or {})} or None
            try:
                _write_one(fld, doc, uuid, by_uuid.get(uuid), adapter, root, manifest,
                           report, overwrite, review)
            except PageError as exc:
                report.skip(doc.rel, str(exc))
                report.pages.append({"source_path": doc.rel, "filename": f"{doc.stem}.md",
                                     "action": "skipped"})
        if progress:
            progress(1)
    if fld is not None and not report.dry_run:
        repoint_part_anchors(fld.path, uuids.values(), manifest)
    report.links_rewritten = stats.rewritten
    if fld is not None:
        # A note deleted or renamed in the source leaves its page behind (deepfield deletes
        # nothing): say so, or a renamed note silently becomes two pages.
        sources = set(selection.pages) | set(selection.attachments)
        for rel, filename in manifest.gone(str(root), sources, fld.path):
            report.gone.append({"source_path": rel, "filename": filename})
            kept = (f"its page {filename} is kept (`deepfield rm {field_name} "
                    f"{filename[:-3]}` archives it)" if filename.endswith(".md") else
                    f"its copy {filename} is kept")
            report.warnings.append(
                f"{rel}: no longer in the source (or no longer imported from it); {kept}")
    if stats.unresolved:
        unique = sorted(set(stats.unresolved))
        shown = ", ".join(unique[:10]) + (" …" if len(unique) > 10 else "")
        report.warnings.append(
            f"{len(stats.unresolved)} link(s) point at notes not in the import, kept as "
            f"written: {shown}")
    for here, target, chosen, count in sorted(set(stats.ambiguous)):
        # Obsidian itself would pick one silently; say which, so a wrong guess is found.
        report.warnings.append(
            f"{here}: [[{target.strip()}]] matches {count} notes; linked to {chosen} (nearest "
            f"folder first, then shallowest; write [[folder/{target.strip()}]] to choose)")


def _prepared_page(doc: SourceDoc, uuid: str, kind: str) -> tuple[Page, list[str]]:
    """The page to write and the frontmatter keys the import added to the source's own."""
    page = doc.page
    before = set(page.frontmatter or {})
    if not page.title:
        page.set("title", note_title(doc))
    page.set("uuid", uuid)
    page.set("source_path", doc.rel)
    page.set("imported_from", kind)
    for key, value in doc.extra.items():
        if key not in before:
            page.set(key, value)
    return page, [k for k in (page.frontmatter or {}) if k not in before]


def _write_one(
    fld: Field | None, doc: SourceDoc, uuid: str, current: str | None, adapter: Adapter,
    root: Path, manifest: Manifest, report: DirImportReport, overwrite: bool, review: bool,
) -> None:
    """Create, update or leave one page; ``current`` is its filename if the field has it."""
    kind = adapter.kind
    uuid_entry = doc.page.entry_text("uuid")  # ``uuid: 12345`` is written as text
    page, added = _prepared_page(doc, uuid, kind)
    digest = sha256_hex(page.render().encode("utf-8"))
    dated, source_dates = fill_dates(page, doc.mtime)
    if uuid_entry is not None and page.entry_text("uuid") is None:  # export --plain: back
        source_dates = (source_dates or {}) | {"uuid": [uuid_entry, uuid]}
    added += dated
    record = manifest.pages.get(uuid)
    entry: dict[str, Any] = {"source_path": doc.rel, "filename": f"{doc.stem}.md"}
    if current is None and record is not None and not overwrite:
        report.skip(doc.rel, "its page was removed from the field since the last import; "
                             "use --overwrite to bring it back")
        report.pages.append(entry | {"action": "skipped"})
        return
    if current is not None:
        assert fld is not None  # only a field that exists has pages
        entry["filename"] = current
        clean = untouched(fld.path, record)
        # A page an older deepfield split (memory tool) is written again, unsplit.
        if record is not None and record.digest == digest and (
                adapter.split or len(record.files) <= 1):
            record.root = str(root)  # (the folder may have moved since)
            report.unchanged += 1
            report.pages.append(entry | {"action": "unchanged"})
            return
        if not clean and not overwrite:
            why = (f"{current} was edited in the field since the last import" if record else
                   f"the field's page {current} has its uuid and was not imported from here")
            report.skip(doc.rel, f"{why}; use --overwrite to replace it, keeping a copy in "
                                 "archive/")
            report.pages.append(entry | {"action": "skipped"})
            return
        if not clean and not report.dry_run:
            kept = keep_copy(fld, list(record.files) if record else [current])
            report.warnings.append(f"{current}: replaced an edited page; the edited version "
                                   f"is kept as {', '.join(kept)}")
    if fld is None or report.dry_run:
        action = "created" if current is None else "updated"
        setattr(report, action, getattr(report, action) + 1)
        report.pages.append(entry | {"action": action})
        return
    # keep_previous=False: an edited page is copied above (keep_copy); an unedited one is
    # the previous import of the same source, which the source itself still holds (unless
    # that folder is gone and this is a folder taken for it: ``moved``).
    result = fld.write(page, name=entry["filename"][:-3], review=review, split=adapter.split,
                       keep_previous=doc.moved)
    actions = {w.action for w in result.pages}
    action = "created" if current is None else (
        "updated" if actions - {"unchanged"} or doc.uuid_taken else "unchanged")
    setattr(report, action, getattr(report, action) + 1)
    report.warnings.extend(result.warnings)
    files = result.filenames
    if record is not None and not adapter.split:
        archive_old_parts(fld, list(record.files), files, report)
    manifest.pages[uuid] = PageRecord(
        kind=kind, root=str(root), source_path=doc.rel, digest=digest, added_keys=added,
        had_frontmatter=doc.had_frontmatter, files=file_digests(fld.path, files),
        wrapped=doc.wrapped, original_lines=doc.original_lines, source_dates=source_dates,
        crlf=doc.crlf, bom=doc.bom, bare_end=doc.bare_end,
    )
    report.pages.append(entry | {"filename": files[0], "action": action, "files": files})
