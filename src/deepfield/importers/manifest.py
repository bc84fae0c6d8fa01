"""The import manifest: what each import wrote into a field, so re-imports are safe.

It lives in ``.deepfield/imports.json`` inside the field (a folder memoryfields never index)
and records, per imported page uuid, the source it came from, a digest of what the importer
produced and the sha256 of every file it wrote. That lets a re-import

- skip pages whose source did not change (idempotent: nothing is duplicated or rewritten),
- update pages whose source changed and that nobody touched in the field since, and
- refuse to replace a page someone edited in the field (unless told to, and then only after
  keeping a copy in ``archive/``),

and lets ``export --plain`` drop exactly the frontmatter keys the import added. The pages
themselves carry ``source_path`` and ``imported_from`` too, so the record survives the loss of
this file; without it, re-import treats every existing page as edited (never clobbers).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write

MANIFEST_DIR = ".deepfield"
MANIFEST_FILE = "imports.json"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class PageRecord:
    kind: str
    root: str
    source_path: str
    digest: str
    """sha256 of the page text the importer produced (before deepfield filled in keys)"""
    added_keys: list[str]
    had_frontmatter: bool
    files: dict[str, str]
    """field filename -> sha256 of the file as written (several when the page was split)"""
    wrapped: str | None = None
    """language of the code fence a non-Markdown source was wrapped in (memory tool)"""
    original_lines: dict[str, str] | None = None
    """body line number (0-based, as text) -> the line as the source had it, for each line
    whose links the import rewrote (``[[Note]]`` made a Markdown link), so ``export --plain
    --original-paths`` gives an unedited page back its own links; None when none changed"""
    crlf: bool = False
    bom: bool = False
    """the source's ``\r\n`` line breaks and byte order mark, which pages do without: ``export
    --plain --original-paths`` gives them back to a page unedited since"""
    bare_end: bool = False
    """the source ended in its closing ``---`` without a line break (given back likewise)"""
    source_dates: dict[str, list[str]] | None = None
    """``created``/``updated`` (and ``uuid``) entries the import rewrote (an unquoted YAML
    date, or a number, made a quoted string): key -> [the source's entry text, the value
    written], for ``export --plain``"""


@dataclass
class AttachmentRecord:
    kind: str
    root: str
    source_path: str
    sha256: str


@dataclass
class Manifest:
    path: Path
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    pages: dict[str, PageRecord] = field(default_factory=dict)
    attachments: dict[str, AttachmentRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, field_dir: Path) -> Manifest:
        path = field_dir / MANIFEST_DIR / MANIFEST_FILE
        manifest = cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # RecursionError: nested too deep
            return manifest  # missing or unreadable: every existing page counts as edited
        if not isinstance(data, dict):
            return manifest
        # A hand-edited or damaged file: keep what has the right shape, drop the rest.
        manifest.sources = {k: v for k, v in _mapping(data.get("sources")).items()
                            if isinstance(v, dict)}
        for uuid, row in _mapping(data.get("pages")).items():
            try:
                record = PageRecord(**row)
            except TypeError:
                continue
            if (isinstance(record.files, dict) and isinstance(record.added_keys, list)
                    and isinstance(record.root, str) and isinstance(record.source_path, str)):
                manifest.pages[uuid] = record
        for name, row in _mapping(data.get("attachments")).items():
            try:
                attachment = AttachmentRecord(**row)
            except TypeError:
                continue
            if isinstance(attachment.root, str) and isinstance(attachment.source_path, str):
                manifest.attachments[name] = attachment
        return manifest

    def save(self) -> None:
        self.path.parent.mkdir(exist_ok=True)
        data = {
            "version": 1,
            "sources": self.sources,
            "pages": {uuid: asdict(rec) for uuid, rec in sorted(self.pages.items())},
            "attachments": {n: asdict(rec) for n, rec in sorted(self.attachments.items())},
        }
        text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n"
        atomic_write(self.path, text.encode("utf-8"))

    def moved(self, root: str) -> tuple[dict[str, str], dict[str, str]]:
        """What was imported from ``root``, or from a folder that is no longer there (the
        folder moved here): source path -> page uuid, and source path -> attachment
        filename, each only where a single page or file had that path."""
        roots = {rec.root for rec in self.pages.values()} | {
            rec.root for rec in self.attachments.values()}
        ours = {r for r in roots if r == root or not Path(r).exists()}
        pages: dict[str, list[str]] = {}
        for uuid, rec in self.pages.items():
            if rec.root in ours:
                pages.setdefault(rec.source_path, []).append(uuid)
        files: dict[str, list[str]] = {}
        for name, att in self.attachments.items():
            if att.root in ours:
                files.setdefault(att.source_path, []).append(name)
        return ({rel: found[0] for rel, found in pages.items() if len(found) == 1},
                {rel: found[0] for rel, found in files.items() if len(found) == 1})

    def gone(self, root: str, present: set[str], folder: Path) -> list[tuple[str, str]]:
        """(source path, field filename) of each page and attachment imported from ``root``
        whose source file is no longer there (deleted or renamed) while its copy still is."""
        found = []
        for rec in self.pages.values():
            if rec.root != root or rec.source_path in present:
                continue
            kept = sorted(name for name in rec.files if (folder / name).is_file())
            if kept:
                found.append((rec.source_path, kept[0]))
        for name, att in self.attachments.items():
            if att.root == root and att.source_path not in present and (folder / name).is_file():
                found.append((att.source_path, name))
        return sorted(found)

    def by_filename(self) -> dict[str, tuple[str, PageRecord]]:
        """field filename -> (uuid, record) for every file an import wrote."""
        return {name: (uuid, rec) for uuid, rec in self.pages.items() for name in rec.files}


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def file_digests(folder: Path, names: list[str]) -> dict[str, str]:
    digests = {}
    for name in names:
        try:
            digests[name] = sha256_hex((folder / name).read_bytes())
        except FileNotFoundError:
            continue
    return digests


def untouched(folder: Path, record: PageRecord | None) -> bool:
    """True if every file the last import wrote for this page is still exactly as written."""
    if record is None or not record.files:
        return False
    return file_digests(folder, list(record.files)) == record.files
