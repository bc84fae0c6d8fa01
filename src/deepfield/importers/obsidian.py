"""Import an Obsidian vault: every note a page, wikilinks made into Markdown links.

Obsidian's own folders (``.obsidian/`` settings, ``.trash/``) are left out. Properties
(``tags``, ``aliases``, ``cssclasses``...) are kept byte for byte. ``[[Note]]``,
``[[Note#Heading]]``, ``[[Note|text]]`` and embeds ``![[image.png]]`` are rewritten into
relative Markdown links to the flattened filenames (see ``links`` for why), and attachments
(images, PDFs...) are copied into the field next to the pages, where memoryfields keep
non-page files; they are never indexed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..store import Store
from .links import LinkMap, LinkStats, rewrite_relative_links, rewrite_wikilinks
from .markdown_dirs import Adapter, DirImportReport, import_dir, select_markdown
from .sources import Selection, SourceDoc


def select(root: Path) -> Selection:
    return select_markdown(root)  # hidden folders (.obsidian, .trash) are never walked


def convert(doc: SourceDoc, links: LinkMap, stats: LinkStats) -> None:
    body = rewrite_wikilinks(doc.page.body, doc.rel, links, stats)
    doc.page.body = rewrite_relative_links(body, doc.rel, links, stats)


OBSIDIAN = Adapter("obsidian", "an Obsidian vault (wikilinks become Markdown links)", select,
                   convert=convert, attachments=True)


def import_obsidian(store: Store, source: str | Path, **options: Any) -> DirImportReport:
    """Import an Obsidian vault into a field (options as for ``import_dir``)."""
    return import_dir(store, source, OBSIDIAN, **options)
