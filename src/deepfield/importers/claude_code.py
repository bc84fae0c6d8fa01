"""Import Claude Code memory: ``CLAUDE.md`` files, ``.claude/rules``, and auto memory.

Given a project folder, the pages are its ``CLAUDE.md`` and ``CLAUDE.local.md`` files (at any
depth), ``.claude/CLAUDE.md`` and ``.claude/rules/**/*.md``; given an auto-memory folder (one
holding ``MEMORY.md``), every Markdown file in it: the ``MEMORY.md`` index and its topic files.
Files pulled in with ``@path`` imports (relative or ``~/``, inside the folder, up to 5 hops as
Claude Code follows them) are imported too. Imports are recorded in an ``imports`` key and
left in the text, never inlined, so each page stays what its author wrote. ``claude_memory``
says what role a file plays; ``MEMORY.md`` is marked as the index Claude Code loads (its
first 200 lines) at the start of every session.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ImportFormatError
from ..store import Store
from .links import LinkMap, LinkStats, join_relative, outside_code, rewrite_relative_links
from .markdown_dirs import Adapter, DirImportReport, import_dir
from .sources import Selection, SourceDoc, is_markdown, walk

MAX_HOPS = 5
MEMORY_FILES = ("CLAUDE.md", "CLAUDE.local.md")
_AT_IMPORT = re.compile(r"(?:(?<=\s)|^)@((?:~/|\.{1,2}/|/)?[\w.\-/~]+)", re.M)
_MEMORY_INDEX_SUMMARY = (
    "Index of Claude Code's auto memory: its first 200 lines are loaded at the start of "
    "every session; details live in the topic files it points to."
)


def at_imports(text: str) -> list[str]:
    """The ``@path`` imports in a memory file, outside code, in order, without duplicates."""
    found: list[str] = []

    def collect(prose: str) -> str:
        for match in _AT_IMPORT.finditer(prose):
            path = match.group(1).rstrip(".,;:)")
            if path and ("/" in path or "." in path or path.isupper()) and path not in found:
                found.append(path)
        return prose

    outside_code(text, collect)
    return found


def _resolve(rel: str, path: str, root: Path | None = None) -> str | None:
    """The source-relative path an ``@path`` in file ``rel`` points to, if inside the folder
    (``root``: an ``@~/.claude/x.md`` in a CLAUDE.md of an imported ``~/.claude``)."""
    if path.startswith("~/") and root is not None:
        target = os.path.normpath(os.path.expanduser(path))
        for base in {os.path.abspath(root), str(root.resolve())}:
            if target.startswith(base + os.sep):
                return PurePosixPath(Path(target).relative_to(base)).as_posix()
        return None
    if path.startswith(("~", "/")):
        return None
    return join_relative(rel, path)


def user_folder() -> Path:
    """Where Claude Code keeps the user's own memory (``~/.claude``, or $CLAUDE_CONFIG_DIR)."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser()


def role(rel: str, root: Path | None = None) -> str:
    """What a file is to Claude Code; ``root``: the imported folder, to tell the user's own
    ``~/.claude/CLAUDE.md`` (loaded in every project) from a project's."""
    path = PurePosixPath(rel)
    if path.name == "MEMORY.md":
        return "index"
    if path.name == "CLAUDE.local.md":
        return "local-instructions"
    if path.name == "CLAUDE.md":
        if root is not None and (root / rel).parent.resolve() == user_folder().resolve():
            return "user-instructions"
        return "project-instructions" if str(path.parent) in (".", ".claude") else (
            "folder-instructions")
    if rel.startswith(".claude/rules/"):
        return "rule"
    return "topic"


def _linked_files(root: Path, skipped: list[tuple[str, str]]) -> list[str]:
    """Symbolic links to a file inside ``root`` (``CLAUDE.md -> AGENTS.md`` is common, and
    Claude Code reads through it); taken out of ``skipped``."""
    inside = root.resolve()
    found = []
    for rel, why in list(skipped):
        path = root / rel
        if rel.endswith("/") or not path.is_symlink():
            continue
        target = path.resolve()
        if target.is_file() and inside in target.parents:
            found.append(rel)
            skipped.remove((rel, why))
    return found


def select(root: Path) -> Selection:
    files, skipped = walk(root, allow_hidden=frozenset({".claude"}))
    files = sorted(files + _linked_files(root, skipped))
    existing = set(files)
    memory_dirs = {str(PurePosixPath(f).parent) for f in files if PurePosixPath(f).name
                   == "MEMORY.md"}
    chosen = [
        f for f in files if is_markdown(f) and (
            PurePosixPath(f).name in MEMORY_FILES
            or f.startswith(".claude/rules/")
            or str(PurePosixPath(f).parent) in memory_dirs)
    ]
    frontier = list(chosen)
    for _hop in range(MAX_HOPS):
        nxt = []
        for rel in frontier:
            try:
                text = (root / rel).read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for path in at_imports(text):
                target = _resolve(rel, path, root)
                if target in existing and target not in chosen:
                    chosen.append(target)
                    nxt.append(target)
        frontier = nxt
    if not chosen:
        outside = [rel for rel, _ in skipped if PurePosixPath(rel).name in MEMORY_FILES]
        raise ImportFormatError(
            f"no Claude Code memory in {root}"
            + (f" ({', '.join(outside)}: a link to a file outside it)" if outside else ""),
            "expected CLAUDE.md, CLAUDE.local.md, .claude/rules/ or an auto-memory folder "
            "with MEMORY.md",
        )
    return Selection(pages=sorted(chosen), skipped=skipped)


def prepare(doc: SourceDoc) -> None:
    doc.extra["claude_memory"] = role(doc.rel, doc.root)
    if doc.name == "MEMORY.md" and not doc.page.summary:
        doc.extra["summary"] = _MEMORY_INDEX_SUMMARY


def convert(doc: SourceDoc, links: LinkMap, stats: LinkStats) -> None:
    imports: list[dict[str, Any]] = []
    for path in at_imports(doc.page.body):
        target = _resolve(doc.rel, path, doc.root)
        if "/" not in path and "." not in path and target not in links.files:
            continue  # a bare word (@TODO, @README) is an import only where that file is
        entry: dict[str, Any] = {"path": path}
        if target is not None and target in links.files:
            entry["page"] = links.files[target]
        imports.append(entry)
    if imports:
        doc.extra["imports"] = imports
    # Relative links between imported files are re-pointed as for any Markdown folder.
    doc.page.body = rewrite_relative_links(doc.page.body, doc.rel, links, stats)


CLAUDE_CODE = Adapter("claude-code", "Claude Code memory (CLAUDE.md, rules, MEMORY.md + topics)",
                      select, prepare=prepare, convert=convert)


def import_claude_code(store: Store, source: str | Path, **options: Any) -> DirImportReport:
    """Import a project's or an auto-memory folder's Claude Code memory into a field."""
    return import_dir(store, source, CLAUDE_CODE, **options)
