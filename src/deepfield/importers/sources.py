"""Reading a folder of notes for import: walking it, decoding files, choosing flat names.

A memoryfield is one flat folder with spec filenames, so ``a/b/Note Name.md`` has to become
``note-name.md`` (or ``a-b-note-name.md`` when two notes share that name, or with
``names="path"``). Names are chosen in sorted order, so the same tree always gets the same
names; a clash that is left gets ``-2``, ``-3``... and is reported. Files that cannot be pages
(not UTF-8, binary, empty) are skipped with a reason instead of stopping the import.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import CONFIG_FILE
from ..errors import ImportFormatError
from ..listing import LISTING_MARKER
from ..markdown import parse_sections
from ..page import LISTING_FILE, SPECIAL_FILES, Page, is_debris, slugify
from ..writer import MAX_WRITE_BYTES

SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__"})
"""Folders never walked (besides hidden ones, which only an adapter may allow)."""
RESERVED_STEMS = frozenset(name[:-3] for name in SPECIAL_FILES)
"""``index`` and ``listing`` are the field's introduction and catalogue, never imported notes."""
FIELD_OWN_DIRS = frozenset({"archive", "review", "activation"})
"""What a deepfield field keeps beside its pages (old versions, the review queue, read logs):
not notes when a field's folder is imported."""
INDEX_SUFFIXES = (".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".sqlite3-journal")


def is_field_folder(folder: Path) -> bool:
    """Whether ``folder`` is a deepfield field (import records, or a generated catalogue)."""
    if (folder / ".deepfield").is_dir():
        return True
    try:
        with (folder / LISTING_FILE).open(encoding="utf-8", errors="replace") as listing:
            return listing.readline().startswith(LISTING_MARKER)
    except OSError:
        return False


def _field_own(name: str, is_dir: bool) -> str | None:
    """Why ``name`` in a field's folder is the field's own, not a note (None: it is a note)."""
    if is_dir and name in FIELD_OWN_DIRS:
        return "a deepfield field's own folder, not notes"
    if not is_dir and name == LISTING_FILE:
        return "a deepfield field's generated catalogue"
    if not is_dir and name.endswith(INDEX_SUFFIXES):
        return "a deepfield index, rebuilt from the pages"
    return None


@dataclass
class Selection:
    """What an adapter takes from a source folder (posix paths relative to it)."""

    pages: list[str] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class SourceDoc:
    """One source file on its way to becoming a page."""

    rel: str
    data: bytes
    page: Page
    mtime: float
    had_frontmatter: bool
    extra: dict[str, Any] = field(default_factory=dict)
    """format-specific frontmatter keys the adapter adds"""
    wrapped: str | None = None
    stem: str = ""
    warnings: list[str] = field(default_factory=list)
    original_lines: dict[str, str] | None = None
    """the body lines the adapter's link rewriting changed, as they were (manifest.py)"""
    crlf: bool = False
    """every line break of the file was ``\r\n`` (the page gets ``\n``; manifest.py)"""
    bom: bool = False
    """the file began with a UTF-8 byte order mark (the page does not)"""
    moved: bool = False
    """its page was imported from a folder that is gone: the source no longer holds the
    page's text, so replacing it keeps a copy in archive/"""
    root: Path | None = None
    """the source folder ``rel`` is relative to"""
    uuid_taken: bool = False
    """its page took the uuid the note was given since the last import (an update)"""
    bare_end: bool = False
    """the file ended in its closing ``---`` with no line break (a page's block has one)"""

    @property
    def name(self) -> str:
        return PurePosixPath(self.rel).name

    @property
    def folder(self) -> str:
        parent = str(PurePosixPath(self.rel).parent)
        return "" if parent == "." else parent


def walk(
    root: Path, allow_hidden: frozenset[str] = frozenset()
) -> tuple[list[str], list[tuple[str, str]]]:
    """Every regular file under ``root`` (sorted posix paths) and what was passed over, why."""
    files: list[str] = []
    skipped: list[tuple[str, str]] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        rel_folder = here.relative_to(root).as_posix()
        prefix = "" if rel_folder == "." else rel_folder + "/"
        field = is_field_folder(here)  # a field's folder copied as notes: its pages only
        kept = []
        for name in sorted(dirs):
            if name in SKIPPED_DIRS or (name.startswith(".") and name not in allow_hidden):
                continue
            why = _field_own(name, True) if field else None
            if why:
                skipped.append((prefix + name + "/", why))
                continue
            if (here / name).is_symlink():
                skipped.append((prefix + name + "/", "symbolic link to a folder, not followed"))
                continue
            if (here / name / CONFIG_FILE).exists():  # e.g. ./memory when importing "."
                skipped.append((prefix + name + "/", "a deepfield store, not notes"))
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(names):
            if is_debris(name) or (name.startswith(".") and name not in allow_hidden):
                continue
            path = here / name
            why = _field_own(name, False) if field else None
            if why:
                skipped.append((prefix + name, why))
            elif path.is_symlink():
                skipped.append((prefix + name, "symbolic link, not followed"))
            elif name == CONFIG_FILE:  # copied into a field, it would make it look like a store
                skipped.append((prefix + name, "a deepfield store's settings, not a note"))
            elif path.is_file():
                files.append(prefix + name)
    files.sort()
    return files, skipped


def is_markdown(rel: str) -> bool:
    return rel.lower().endswith((".md", ".markdown"))


def fence_broken_frontmatter(text: str) -> tuple[str, dict[str, str] | None]:
    """``text`` with a frontmatter block YAML cannot read put in a ```yaml code block: kept
    word for word, but no longer a "---" rule and a setext heading under the page's new
    frontmatter (or a second frontmatter block to readers that take it for one). Also the
    lines changed, by body line number, as the source had them (``export --plain`` puts
    them back)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return text, None
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            original = {"0": lines[0], str(end): lines[end]}
            lines[0], lines[end] = "```yaml", "```"
            return "\n".join(lines), original
    return text, None


def read_doc(root: Path, rel: str) -> tuple[SourceDoc | None, str | None]:
    """Decode one source file as a page; (None, reason) when it cannot become one."""
    path = root / rel
    try:
        size = path.stat().st_size
        if size > MAX_WRITE_BYTES:
            return None, f"{size:,} bytes is over the {MAX_WRITE_BYTES:,}-byte limit for one page"
        data = path.read_bytes()
        mtime = path.stat().st_mtime
    except OSError as exc:  # no permission, or removed while the import runs
        return None, f"cannot be read ({exc.strerror or exc})"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # Windows "Unicode": no NUL-free text
        return None, "UTF-16 text; re-save it as UTF-8"
    if b"\x00" in data:
        return None, "binary file (contains NUL bytes), not text"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (bad byte at offset {exc.start}); re-save it as UTF-8"
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return None, "empty file"
    page = Page.parse(text)
    warnings = []
    if page.frontmatter_error:
        warnings.append(f"{rel}: {page.frontmatter_error}; the block is kept as text, in a "
                        "```yaml code block")
        fenced, original = fence_broken_frontmatter(text)
        page = Page(body=fenced)
    else:
        original = None
    doc = SourceDoc(rel, data, page, mtime, page.frontmatter is not None)
    doc.warnings, doc.root = warnings, root
    doc.original_lines = original
    breaks = data.count(b"\n")
    doc.crlf = breaks > 0 and data.count(b"\r\n") == breaks == data.count(b"\r")
    doc.bom = data.startswith(b"\xef\xbb\xbf")
    doc.bare_end = (page.frontmatter is not None and not page.body
                    and not data.endswith((b"\n", b"\r")))
    return doc, None


def read_docs(
    root: Path, rels: list[str], strict: bool
) -> tuple[list[SourceDoc], list[tuple[str, str]]]:
    """Read every page source; with ``strict``, any unreadable file stops the import first."""
    docs, skipped = [], []
    for rel in rels:
        doc, reason = read_doc(root, rel)
        if doc is None:
            skipped.append((rel, reason or "unreadable"))
        else:
            docs.append(doc)
    if strict and skipped:
        listed = "; ".join(f"{rel}: {why}" for rel, why in skipped[:5])
        more = f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""
        raise ImportFormatError(
            f"{len(skipped)} file(s) in {root} cannot be imported: {listed}{more}",
            "fix or remove them, or import without --strict to skip them with a warning",
        )
    return docs, skipped


def changed_lines(before: str, after: str) -> dict[str, str] | None:
    """The lines of ``before`` that differ in ``after``, by line number; None when none do.

    Link rewriting never adds or removes a line break (a link is on one line), so lines
    correspond one to one; were they ever not to, nothing is recorded rather than a wrong
    mapping."""
    old, new = before.split("\n"), after.split("\n")
    if len(old) != len(new):
        return None
    changed = {str(i): line for i, (line, now) in enumerate(zip(old, new, strict=True))
               if line != now}
    return changed or None


def link_names(page: Page) -> list[str]:
    """Other names a note is linked by: title, Obsidian aliases, basic-memory permalink."""
    names = [page.get_str("title"), page.get_str("permalink")]
    aliases = page.get("aliases")
    if isinstance(aliases, str):
        aliases = [aliases]
    if isinstance(aliases, list):
        names += [str(a) for a in aliases if a]
    return [n for n in names if n]


def note_title(doc: SourceDoc) -> str:
    """The first H1 (outside code) of a Markdown file, else the filename as the user wrote it
    (in a YAML or Python file a ``# comment`` is no heading)."""
    for section in parse_sections(doc.page.body) if is_markdown(doc.rel) else []:
        if section.level == 1 and section.title:
            return section.title
    name = doc.name
    for ext in (".md", ".markdown"):
        if name.lower().endswith(ext):
            return name[: -len(ext)]
    return name


# --------------------------------------------------------------------------- names


def _fallback(rel: str) -> str:
    return "note-" + hashlib.sha1(rel.encode("utf-8")).hexdigest()[:8]


def short_stem(rel: str) -> str:
    """``a/b/Note Name.md`` -> ``note-name``; other extensions stay in the name (``x-json``)."""
    name = PurePosixPath(rel).name
    base = name[:-3] if name.lower().endswith(".md") else name
    base = base[:-9] if base.lower().endswith(".markdown") else base
    return slugify(base) or _fallback(rel)


def path_stem(rel: str) -> str:
    """``a/b/Note Name.md`` -> ``a-b-note-name`` (the folders become part of the name)."""
    path = rel[:-3] if rel.lower().endswith(".md") else rel
    path = path[:-9] if path.lower().endswith(".markdown") else path
    return slugify(path, max_len=90) or _fallback(rel)


def plan_names(
    rels: list[str],
    mode: str,
    fixed: dict[str, str],
    taken: set[str],
    stem_of: Callable[[str], str] = short_stem,
) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """A free stem for every source path, and (path, stem, why) for each forced rename.

    ``fixed`` holds stems pages already have from an earlier import (they keep them);
    ``taken`` holds filenames (``x.md``) in use in the field by anything else.
    """
    if mode not in ("short", "path"):
        raise ImportFormatError(f"unknown naming mode {mode!r}", "use 'short' or 'path'")
    shorts = {rel: stem_of(rel) for rel in rels}
    counts = Counter(shorts.values())
    used = {f"{stem}.md" for stem in fixed.values()} | set(taken)
    chosen: dict[str, str] = {}
    renames: list[tuple[str, str, str]] = []
    for rel in sorted(rels):
        if rel in fixed:
            chosen[rel] = fixed[rel]
            continue
        wanted = shorts[rel]
        if mode == "path" or counts[wanted] > 1:
            wanted = path_stem(rel)
        if wanted in RESERVED_STEMS:
            wanted = f"{wanted}-page"
        stem, n = wanted, 1
        while f"{stem}.md" in used:
            n += 1
            stem = f"{wanted}-{n}"
        if stem != wanted:
            why = "the name is already used in the field" if f"{wanted}.md" in taken else (
                "another note flattens to the same name")
            renames.append((rel, stem, why))
        used.add(f"{stem}.md")
        chosen[rel] = stem
    return chosen, renames


def attachment_name(rel: str) -> str:
    """A flat, safe filename for a non-page file: slugged stem, lower-case extension."""
    path = PurePosixPath(rel)
    suffix = path.suffix.lower() if path.suffix[1:].isalnum() else ""
    stem = slugify(path.stem if suffix else path.name) or _fallback(rel)
    return stem + suffix
