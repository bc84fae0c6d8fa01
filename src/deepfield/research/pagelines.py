"""Page lines as research reads them: each page file read once per research, its body's
evidence spans (research/reading.py), and how much a line of it counts (SOURCES_WEIGHT)."""

from __future__ import annotations

from collections.abc import Sequence

from ..field import Field
from ..page import Page
from .reading import Span, evidence_spans

SOURCES_WEIGHT = 0.25
"""Votes and line-ranked ranks of a line in a Sources section (reading.py: ``in_sources``) or
on a domain's taxonomy page (``role: taxonomy``): "- Heat test report, February 2026." shares
the words of "what did the heat test show?" but only names where the answer is, and "-
Glacial lake outburst floods (GLOF)" shares those of "what triggers glacial lake outburst
floods?" but only names the topic; each stays evidence, below the lines that say something
of it."""


class PageLines:
    """Lines of page files, read once per research (the index gives line numbers)."""

    def __init__(self, fields: Sequence[Field]) -> None:
        self._fields = {f.name: f for f in fields}
        self._cache: dict[tuple[str, str], list[str]] = {}
        self._starts: dict[tuple[str, str], int] = {}
        self._names_only: dict[tuple[str, str], bool] = {}
        self._spans: dict[tuple[str, str], dict[int, list[Span]]] = {}

    def lines(self, field_name: str, filename: str) -> list[str]:
        key = (field_name, filename)
        if key not in self._cache:
            path = self._fields[field_name].path / filename
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self._cache[key] = text.splitlines()
            # Frontmatter lines are bookkeeping, not evidence; the page parser decides where
            # the body starts, as it did for the index's line numbers.
            page = Page.parse(text)
            self._starts[key] = page.body_line
            self._names_only[key] = page.get("role") == "taxonomy" or (
                filename == "taxonomy.md" and page.get("role") is None)
        return self._cache[key]

    def body_start(self, field_name: str, filename: str) -> int:
        """First line of the page body (1-based)."""
        self.lines(field_name, filename)
        return self._starts[(field_name, filename)]

    def spans(self, field_name: str, filename: str, first: int, last: int) -> list[Span]:
        """The evidence spans (research/reading.py) of the page body that overlap lines
        ``first``..``last``, in page order: a sentence wrapped onto a line of the range
        counts, so a chunk cut mid-paragraph still quotes whole sentences."""
        key = (field_name, filename)
        by_line = self._spans.get(key)
        if by_line is None:
            by_line = self._spans[key] = {}
            for span in evidence_spans(self.lines(field_name, filename),
                                       self.body_start(field_name, filename)):
                for number in range(span.line, span.last + 1):
                    by_line.setdefault(number, []).append(span)
        found: dict[Span, None] = {}
        for number in range(first, last + 1):
            found.update(dict.fromkeys(by_line.get(number, ())))
        return list(found)

    def weight(self, field_name: str, filename: str, line: int) -> float:
        """SOURCES_WEIGHT for evidence at ``line`` in a sources section or on a domain's
        taxonomy page, else 1."""
        self.lines(field_name, filename)
        if self._names_only[(field_name, filename)]:
            return SOURCES_WEIGHT
        spans = self.spans(field_name, filename, line, line)
        return SOURCES_WEIGHT if any(s.in_sources and s.line == line for s in spans) else 1.0
