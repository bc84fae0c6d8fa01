"""Import the ``/memories`` directory of Anthropic's memory tool (``memory_20250818``).

The model keeps whatever text files it likes there (``.md``, ``.txt``, ``.xml``, ``.json``...),
in any folders. Each becomes a page: Markdown as it is, plain text as the page body, and other
formats inside a fenced code block tagged with their language, so the text survives exactly
(``export --plain --original-paths`` unwraps it again). ``memory_path`` records the path the
model used (``/memories/...``) alongside ``source_path``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from ..page import Page
from ..store import Store
from .links import LinkMap, LinkStats, rewrite_relative_links
from .markdown_dirs import Adapter, DirImportReport, import_dir
from .sources import Selection, SourceDoc, is_markdown, walk

_LANGUAGES = {
    ".json": "json", ".jsonl": "json", ".xml": "xml", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".csv": "csv", ".tsv": "tsv", ".html": "html", ".htm": "html",
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".sh": "sh", ".sql": "sql",
}
PLAIN_SUFFIXES = frozenset({".txt", ".text", ""})


def select(root: Path) -> Selection:
    files, skipped = walk(root)
    return Selection(pages=files, skipped=skipped)  # any text file; read_doc skips binaries


def wrap(text: str, language: str) -> str:
    """``text`` in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in text.split("\n") if set(run) == {"`"}), default=0)
    run, best = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        best = max(best, run)
    fence = "`" * max(3, best + 1, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}\n"


def unwrap(body: str) -> str | None:
    """The text inside a body that is exactly one fenced block, else None."""
    lines = body.rstrip("\n").split("\n")
    if len(lines) < 2:
        return None
    opening, closing = lines[0], lines[-1]
    fence = opening[: len(opening) - len(opening.lstrip("`"))]
    if len(fence) < 3 or closing != fence:
        return None
    return "\n".join(lines[1:-1]) + "\n"


def prepare(doc: SourceDoc) -> None:
    doc.extra["memory_path"] = "/memories/" + doc.rel
    if is_markdown(doc.rel):
        return
    text = doc.data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
    suffix = PurePosixPath(doc.rel).suffix.lower()
    if suffix in PLAIN_SUFFIXES:
        doc.page = Page(body=text)
    else:
        doc.wrapped = _LANGUAGES.get(suffix, suffix.lstrip("."))
        doc.page = Page(body=wrap(text, doc.wrapped))
    doc.had_frontmatter = False
    doc.warnings = []


def convert(doc: SourceDoc, links: LinkMap, stats: LinkStats) -> None:
    # Only Markdown notes link to each other; other text is kept exactly as the model wrote it.
    if is_markdown(doc.rel):
        doc.page.body = rewrite_relative_links(doc.page.body, doc.rel, links, stats)


MEMORY_TOOL = Adapter("memory-tool", "an Anthropic memory-tool /memories directory", select,
                      prepare=prepare, convert=convert)


def import_memory_tool(store: Store, source: str | Path, **options: Any) -> DirImportReport:
    """Import a memory-tool ``/memories`` folder into a field."""
    return import_dir(store, source, MEMORY_TOOL, **options)
