"""Import a basic-memory project: notes with observations and relations.

basic-memory notes carry ``title``, ``type``, ``tags`` and ``permalink`` in frontmatter, and a
body of observations (``- [category] text #tag (context)``) and relations
(``- relation_type [[Target]] (context)``). Frontmatter and body are kept exactly as written,
because basic-memory's own tools read them back; the relations are also listed in a
``relations`` key (``{type, target}``, plus ``page`` when the target note was imported), so
an agent sees a note's links from its frontmatter alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..store import Store
from .links import LinkMap, LinkStats, outside_code
from .markdown_dirs import Adapter, DirImportReport, import_dir, select_markdown
from .sources import Selection, SourceDoc

_RELATION = re.compile(r"^\s*[-*]\s+(?!\[)([^\[\]\n]+?)\s+\[\[([^\[\]\n]+?)\]\]", re.M)


def relations(body: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []

    def collect(prose: str) -> str:
        for match in _RELATION.finditer(prose):
            # [[Target|label]] and [[Target#heading]] link to Target, as in Obsidian.
            # (``[[Target\|label]]``: the pipe escaped inside a table)
            target = match.group(2).partition("|")[0].removesuffix("\\").partition("#")[0]
            target = target.strip()
            target = target or match.group(2).strip()
            found.append({"type": match.group(1).strip(), "target": target})
        return prose

    outside_code(body, collect)
    return found


def select(root: Path) -> Selection:
    return select_markdown(root)  # .basic-memory/ and other hidden folders are never walked


def prepare(doc: SourceDoc) -> None:
    found = relations(doc.page.body)
    if found:
        doc.extra["relations"] = found


def convert(doc: SourceDoc, links: LinkMap, stats: LinkStats) -> None:
    found = doc.extra.get("relations")
    if not isinstance(found, list):
        return
    for relation in found:
        # basic-memory links by title or permalink; resolve_wikilink knows both.
        filename = links.resolve_wikilink(relation["target"], doc.rel, stats)
        if filename is not None:
            relation["page"] = filename


BASIC_MEMORY = Adapter("basic-memory", "a basic-memory project (observations and relations)",
                       select, prepare=prepare, convert=convert)


def import_basic_memory(store: Store, source: str | Path, **options: Any) -> DirImportReport:
    """Import a basic-memory project folder into a field."""
    return import_dir(store, source, BASIC_MEMORY, **options)
