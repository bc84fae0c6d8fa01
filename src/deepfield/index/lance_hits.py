"""Reading what a LanceDB search found: the chunks of its hits and their pages' facts.

Hits are read by LanceDB row id where the query that found them gave one (~4x faster than a
filter on the key), checked against their key since a compaction renumbers rows, and by key
otherwise. A chunk's own columns come from the dataset; its page's (title, summary,
frontmatter…) from the field's SQLite catalogue, which holds every page the dataset serves,
so a hit reads half the columns. What was read is remembered until the dataset's version
changes (a page superseded meanwhile, rows compacted).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..page import load_frontmatter_json

if TYPE_CHECKING:
    from . import ChunkRow, DocRow, FieldIndex

CHUNK_COLUMNS = ["key", "doc", "filename", "ord", "kind", "heading", "line_start", "line_end",
                 "body", "superseded"]
PAGE_COLUMNS = ["doc", "filename", "title", "uuid", "summary", "frontmatter", "last_modified",
                "size"]
MAX_REMEMBERED = 50_000

Facts = tuple[str, "str | None", bool]
"""(filename, uuid, superseded?) of a chunk's page."""


class HitReader:
    """The rows of one dataset's hits, with what recent queries told about them."""

    def __init__(self, catalogue: Callable[[], FieldIndex],
                 errors: tuple[type[BaseException], ...]) -> None:
        self.catalogue = catalogue
        self.errors = errors
        self.facts: dict[int, Facts] = {}
        """key -> facts of its page, of recent hits."""
        self.row_ids: dict[int, int] = {}
        """key -> LanceDB row id, of recent candidates."""
        self.version = -1
        """Version of the chunks table what is remembered was read from."""

    def follow(self, table: Any) -> None:
        """Forget what was read from an older version of the table."""
        version = table.version
        if version != self.version:
            self.version = version
            self.facts.clear()
            self.row_ids.clear()

    def remember(self, rows: Any) -> None:
        """Row ids of a query's candidates (an Arrow table with ``key`` and ``_rowid``)."""
        if len(self.row_ids) > MAX_REMEMBERED:
            self.row_ids.clear()
            self.facts.clear()
        if "_rowid" in rows.column_names:
            self.row_ids.update(zip(rows["key"].to_pylist(), rows["_rowid"].to_pylist(),
                                    strict=True))

    def read(self, table: Any, keys: list[int], columns: list[str]) -> list[dict[str, Any]]:
        """Rows of ``keys``, in that order (those the table holds)."""
        found: dict[int, dict[str, Any]] = {}
        by_row = [self.row_ids[key] for key in keys if key in self.row_ids]
        if by_row:
            with contextlib.suppress(*self.errors):
                for row in table.take_row_ids(by_row).select(columns).to_arrow().to_pylist():
                    found[row["key"]] = row
        rest = [key for key in keys if key not in found]
        for start in range(0, len(rest), 500):
            part = rest[start:start + 500]
            for row in table.search().where(f"key IN ({', '.join(map(str, part))})") \
                    .select(columns).limit(len(part)).to_arrow().to_pylist():
                found[row["key"]] = row
        return [found[key] for key in keys if key in found]

    def page_facts(self, table: Any, keys: list[int]) -> dict[int, Facts]:
        missing = [key for key in keys if key not in self.facts]
        if missing:
            for row in self.read(table, missing, ["key", "filename", "uuid", "superseded"]):
                self.facts[row["key"]] = (row["filename"], row["uuid"], bool(row["superseded"]))
        return {key: self.facts[key] for key in keys if key in self.facts}

    def chunks(self, table: Any, keys: list[int]) -> dict[int, ChunkRow]:
        from . import ChunkRow, DocRow

        rows = self.read(table, keys, CHUNK_COLUMNS)
        catalogue = self.catalogue()
        docs: dict[str, DocRow | None] = {}
        for row in rows:
            name = row["filename"]
            if name not in docs:
                known = catalogue.doc_by_filename(name)
                docs[name] = None if known is None else replace(known, id=row["doc"])
        missing = [row["key"] for row in rows if docs[row["filename"]] is None]
        for row in self.read(table, missing, ["key", *PAGE_COLUMNS]) if missing else []:
            docs[row["filename"]] = DocRow(
                row["doc"], row["filename"], row["uuid"], row["title"], row["summary"],
                load_frontmatter_json(row["frontmatter"]), row["last_modified"], row["size"], [])
        found: dict[int, ChunkRow] = {}
        for row in rows:
            doc = docs[row["filename"]]
            if doc is None:
                continue
            found[row["key"]] = ChunkRow(row["key"], doc, row["ord"], row["kind"],
                                         row["heading"], row["line_start"], row["line_end"],
                                         row["body"])
            self.facts[row["key"]] = (row["filename"], doc.uuid, bool(row["superseded"]))
        return found
