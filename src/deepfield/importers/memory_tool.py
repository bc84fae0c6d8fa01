"""Import the ``/memories`` directory of Anthropic's memory tool (``memory_20250818``).

The model keeps whatever text files it likes there (``.md``, ``.txt``, ``.xml``, ``.json``...),
in any folders. Each becomes exactly one page whose body is the file's text, as
``DeepfieldMemoryTool`` keeps the files it writes: the tool shows a page's body to the model as
the file, so a body wrapped in a code fence, or a long file split into parts, would come back to
the model changed or cut short. ``memory_path`` records the path the model used
(``/memories/...``) alongside ``source_path``. Fields imported before wrapped non-Markdown files
in a code fence; ``unwrap`` still takes that off on ``export --plain``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..page import Page
from ..store import Store
from .links import LinkMap, LinkStats, rewrite_relative_links
from .markdown_dirs import Adapter, DirImportReport, import_dir
from .sources import Selection, SourceDoc, is_markdown, walk


def select(root: Path) -> Selection:
    files, skipped = walk(root)
    return Selection(pages=files, skipped=skipped)  # any text file; read_doc skips binaries


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
    # The text is the body as it is: a YAML or JSON file has no frontmatter, and a "---"
    # block the model wrote atop a note is part of the file it reads back.
    doc.page = Page(body=doc.data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n"))
    doc.had_frontmatter = False
    doc.warnings = []
    doc.original_lines = None


def convert(doc: SourceDoc, links: LinkMap, stats: LinkStats) -> None:
    # Only Markdown notes link to each other; other text is kept exactly as the model wrote it.
    if is_markdown(doc.rel):
        doc.page.body = rewrite_relative_links(doc.page.body, doc.rel, links, stats)


MEMORY_TOOL = Adapter("memory-tool", "an Anthropic memory-tool /memories directory", select,
                      prepare=prepare, convert=convert, split=False)


def import_memory_tool(store: Store, source: str | Path, **options: Any) -> DirImportReport:
    """Import a memory-tool ``/memories`` folder into a field."""
    return import_dir(store, source, MEMORY_TOOL, **options)
