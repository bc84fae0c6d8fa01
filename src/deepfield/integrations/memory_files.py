"""Anthropic's ``/memories`` directory kept as a deepfield field (no SDK needed here).

Claude's memory tool sees a tree of text files under ``/memories``; a field is a flat folder of
pages. Each memory file is one page whose frontmatter ``memory_path`` records the path Claude
used (the same key ``deepfield import memory-tool`` writes), and whose body is the file's text,
byte for byte. Folders are implied by the paths. A page of the field written some other way (by
a person, ``deepfield write``, an import) appears as ``/memories/<filename>``.

Paths are checked before anything else: only ``/memories`` and paths below it, no ``.`` or
``..`` parts, backslashes or control characters. No path is ever joined to a folder on disk, so
none can reach outside the field; pages that are symbolic links are not pages (the index skips
them and reading refuses them). Deleting archives the pages (deepfield never deletes a page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import DeepfieldError
from ..field import Field
from ..fsutil import read_no_follow
from ..page import Page, slugify

ROOT = "/memories"
MEMORY_PATH_KEY = "memory_path"
MAX_PATH_CHARS = 512
MAX_FILE_BYTES = 1 << 20
"""Largest memory file accepted (1 MiB): memory files are notes, not documents."""


def _later_part(frontmatter: dict[str, Any] | None) -> bool:
    """Whether a page is part 2 or later of a split page."""
    part = (frontmatter or {}).get("part")
    return isinstance(part, int) and not isinstance(part, bool) and part > 1


class MemoryOpError(Exception):
                    """A memory command that cannot be carried out; the message is for the model."""


def relative(path: object) -> str:
    """``/memories/a/b.md`` → ``a/b.md`` (``""`` for the root); refuses anything else."""
    if not isinstance(path, str):
        raise MemoryOpError(f"Path must be a string, got: {type(path).__name__}")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise MemoryOpError(f"Path must start with {ROOT}, got: {path}")
    rel = path[len(ROOT):].strip("/")
    if len(rel) > MAX_PATH_CHARS:
        raise MemoryOpError(f"Path {path[:80]}... is longer than {MAX_PATH_CHARS} characters")
    if not rel:
        return ""
    if "\\" in rel or any(ord(c) < 32 or c == "\x7f" for c in rel):
        raise MemoryOpError(f"Path {path!r} holds a backslash or a control character")
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise MemoryOpError(f"Path {path} would escape {ROOT} directory (or has an empty "
                            "'.' or '..' part)")
    return rel


def absolute(rel: str) -> str:
    return f"{ROOT}/{rel}" if rel else ROOT


@dataclass(frozen=True)
class MemoryFile:
    rel: str
    filename: str


class MemoryFiles:
    """The memory files of a field: read, create, edit, move and archive them."""

    def __init__(self, field: Field, *, review: bool = False) -> None:
        self.field = field
        self.review = review

    # ------------------------------------------------------------------ reading

    def files(self) -> dict[str, MemoryFile]:
        """Every memory file by relative path (a path claimed twice goes to the first page
        by filename, a later part of a split page last: ``notes-part-2.md`` sorts before
        ``notes.md``, yet the file begins in part 1)."""
        out: dict[str, MemoryFile] = {}
        pages = self.field.pages()
        for doc in sorted(pages, key=lambda d: _later_part(d.frontmatter)):  # stable
            claimed = (doc.frontmatter or {}).get(MEMORY_PATH_KEY)
            rel = doc.filename
            if isinstance(claimed, str):
                try:
                    rel = relative(claimed) or doc.filename
                except MemoryOpError:
                    rel = doc.filename
            out.setdefault(rel, MemoryFile(rel, doc.filename))
        return out

    def is_dir(self, rel: str, files: dict[str, MemoryFile] | None = None) -> bool:
        if not rel:
            return True
        prefix = rel + "/"
        return any(name.startswith(prefix) for name in (files or self.files()))

    def load(self, rel: str) -> tuple[MemoryFile, Page]:
        found = self.files().get(rel)
        if found is None:
            raise MemoryOpError(f"The path {absolute(rel)} does not exist. Please provide a "
                                "valid path.")
        try:  # the bytes as stored: Field.load would normalise line endings
            data, _mtime = read_no_follow(self.field.path / found.filename)
            return found, Page.parse(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise MemoryOpError(f"Cannot read {absolute(rel)}: {exc}") from None

    def text(self, rel: str) -> str:
        return self.load(rel)[1].body

    def listing(self, rel: str, depth: int = 2) -> list[tuple[int, str]]:
        """(size in bytes, path below ``rel``; folders end in ``/`` and count the files in
        them) up to ``depth`` levels."""
        prefix = rel + "/" if rel else ""
        sizes: dict[str, int] = {}
        for name in self.files():
            parts = name[len(prefix):].split("/")
            if not name.startswith(prefix) or any(p.startswith(".") for p in parts):
                continue  # (hidden items are left out of listings, as the SDK does)
            size = len(self.text(name).encode("utf-8"))
            for level in range(1, min(len(parts), depth) + 1):
                key = "/".join(parts[:level]) + ("/" if level < len(parts) else "")
                sizes[key] = sizes.get(key, 0) + size
        return sorted(((size, key) for key, size in sizes.items()), key=lambda item: item[1])

    # ------------------------------------------------------------------ writing

    def _page(self, rel: str, body: str, old: Page | None = None,
              old_rel: str | None = None) -> Page:
        """The page for memory file ``rel``: the old page's frontmatter (uuid, dates, any keys
        a person added) with the new body."""
        if "\x00" in body:
            raise MemoryOpError("The text holds NUL characters; memory files are text")
        if len(body.encode("utf-8")) > MAX_FILE_BYTES:
            raise MemoryOpError(f"The text is over {MAX_FILE_BYTES:,} bytes; keep memory files "
                                "short and split long notes into several files")
        page = old.copy() if old is not None else Page(body="", frontmatter={})
        page.body = body  # (copy keeps the frontmatter's own layout and comments)
        if page.frontmatter is None:
            page.frontmatter = {}
        if page.get("title") in (None, "", old_rel):  # a title a person gave stays
            page.set("title", rel)
        if old is None or old.get(MEMORY_PATH_KEY) is not None or rel != old_rel:
            page.set(MEMORY_PATH_KEY, absolute(rel))
        return page

    def _write(self, page: Page, stem: str | None) -> None:
        # The memory tool edits files in place, many times a session, as PUT does: like PUT it
        # keeps no archive copy of each edit (a deleted file is still archived, never lost).
        try:
            self.field.write(page, name=stem, split=False, review=self.review,
                             keep_previous=False)
        except DeepfieldError as exc:
            raise MemoryOpError(f"The memory could not be written: {exc.message}") from None

    def _free_stem(self, rel: str) -> str:
        base = slugify(rel.replace("/", " ").replace(".", " ")) or "memory"
        stem, count = base, 2
        while (self.field.path / f"{stem}.md").exists():
            stem = f"{base}-{count}"
            count += 1
        return stem

    def create(self, rel: str, text: str) -> None:
        files = self.files()
        if not rel:
            raise MemoryOpError(f"Cannot create a file at {ROOT} itself")
        if rel in files:
            raise MemoryOpError(f"File {absolute(rel)} already exists")
        if self.is_dir(rel, files):
            raise MemoryOpError(f"{absolute(rel)} is a directory")
        _check_parents(rel, files)
        self._write(self._page(rel, text), self._free_stem(rel))

    def replace_text(self, rel: str, text: str) -> None:
        found, page = self.load(rel)
        self._write(self._page(rel, text, page, rel), found.filename[:-3])

    def move(self, old: str, new: str) -> list[str]:
        """Move a file or every file of a folder; returns the new paths."""
        files = self.files()
        if not old:
            raise MemoryOpError(f"Cannot rename the {ROOT} directory itself")
        if not new:
            raise MemoryOpError(f"The destination {ROOT} already exists")
        if new in files or self.is_dir(new, files):
            raise MemoryOpError(f"The destination {absolute(new)} already exists")
        if (new + "/").startswith(old + "/") and (old in files or self.is_dir(old, files)):
            raise MemoryOpError(f"Cannot move {absolute(old)} into itself")
        # A file's path cannot also be a folder: the tree could not be exported to disk again.
        _check_parents(new, files)
        if old in files:
            moves = {old: new}
        elif self.is_dir(old, files):
            moves = {name: new + name[len(old):] for name in files
                     if name.startswith(old + "/")}
        else:
            raise MemoryOpError(f"The path {absolute(old)} does not exist")
        for source, target in moves.items():
            found, page = self.load(source)
            self._write(self._page(target, page.body, page, source), found.filename[:-3])
        return list(moves.values())

    def archive(self, rel: str) -> list[str]:
        """Archive a file or every file of a folder (moved into the field's ``archive/``)."""
        files = self.files()
        if not rel:
            raise MemoryOpError(f"Cannot delete the {ROOT} directory itself")
        if rel in files:
            targets = [files[rel]]
        elif self.is_dir(rel, files):
            targets = [f for name, f in files.items() if name.startswith(rel + "/")]
        else:
            raise MemoryOpError(f"The path {absolute(rel)} does not exist")
        for found in targets:
            if (self.field.path / found.filename).is_file():  # a split page goes whole
                self.field.archive_page(found.filename)
        return [f.filename for f in targets]

    def archive_all(self) -> int:
        """Archive every page written through the memory tool (others are left alone)."""
        count = 0
        for doc in self.field.pages():
            if (doc.frontmatter or {}).get(MEMORY_PATH_KEY) \
                    and (self.field.path / doc.filename).is_file():
                self.field.archive_page(doc.filename)
                count += 1
        return count

    # ------------------------------------------------------------------ search

    def search(self, query: str, k: int = 5) -> list[dict[str, Any]]:
        """The field's search, each hit named by its memory path."""
        by_filename = {f.filename: rel for rel, f in self.files().items()}
        hits = []
        for hit in self.field.search(query, k=k).results:
            rel = by_filename.get(hit.filename, hit.filename)
            hits.append({"path": absolute(rel), "score": round(hit.score, 3),
                         "heading": hit.heading, "snippet": hit.snippet,
                         "lines": _body_lines(hit.line_start, hit.line_end, self, rel)})
        return hits


def _check_parents(rel: str, files: dict[str, MemoryFile]) -> None:
    """Refuse ``rel`` when a folder above it is a file. The SDK's backend fails there with a
    bare ``NotADirectoryError`` naming its disk path; this is the text ``create`` gives."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        if "/".join(parts[:depth]) in files:
            raise MemoryOpError(f"{absolute('/'.join(parts[:depth]))} is a file, not a "
                                "directory")


def _body_lines(start: int | None, end: int | None, files: MemoryFiles,
                rel: str) -> list[int] | None:
    """Search reports lines of the page file; the model sees lines of the memory file."""
    if start is None or end is None:
        return None
    try:
        _found, page = files.load(rel)
    except MemoryOpError:
        return None
    offset = page.body_line - 1
    first, last = start - offset, end - offset
    return [first, last] if first >= 1 else None

