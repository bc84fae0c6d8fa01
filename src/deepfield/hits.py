"""What a search returns: chunk or page hits and the response around them.

Kept apart from the search itself so that the modules that build hits (search, line_rank,
the researcher's tools) share one type without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from .confidence import SEARCH, Confidence, Line, assess
from .page import jsonable_frontmatter
from .relative_dates import event_day, resolved


@dataclass(frozen=True)
class Hit:
    """One search result: a page stub (unit=page) or a single chunk (unit=chunk)."""

    field: str
    filename: str
    uuid: str | None
    title: str
    summary: str | None
    frontmatter: dict[str, Any] | None
    score: float
    snippet: str
    """The best part of the chunk: a window around the first query term, or for a window of
    record lines (transcript turns, list items) the line that matches the query best."""
    snippet_line: int
    """Line of the page file where the snippet starts."""
    heading: str
    line_start: int
    line_end: int
    text: str
    """The whole matching chunk (the snippet is cut from it)."""
    matches: int = 1
    """How many of the page's chunks matched (page results); for chunk results, how many of
    the candidate chunks read hold this hit's line (a transcript line is in three windows)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "frontmatter": jsonable_frontmatter(self.frontmatter),
            "score": round(self.score, 6),
            "field": self.field,
            "uuid": self.uuid,
            "title": self.title,
            "summary": self.summary,
            "snippet": self.snippet,
            "snippet_line": self.snippet_line,
            "heading": self.heading,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "matches": self.matches,
            "relative_dates": self.relative_dates(),
        }

    def relative_dates(self) -> list[dict[str, str]]:
        """The snippet's relative dates resolved against the page's day (relative_dates.py)."""
        return resolved(self.snippet, event_day(self.frontmatter))


@dataclass
class SearchResponse:
    query: str
    mode: str
    unit: str
    k: int
    results: list[Hit]
    took_ms: float
    warnings: list[str] = dc_field(default_factory=list)
    pending_vectors: int = 0
    filters: dict[str, list[str]] | None = None
    """The search's filters (``Filters.to_json()``), None when it had none: results that
    were filtered must say so, or "no results" reads as "nothing about it"."""

    @property
    def confidence(self) -> Confidence:
        """How far the best results' lines support an answer (deepfield.confidence)."""
        return assess(self.query, [Line(hit.snippet, hit.score, hit.title, hit.heading)
                                   for hit in self.results], SEARCH)

    def to_json(self, with_text: bool = False) -> dict[str, Any]:
        results = []
        for hit in self.results:
            item = hit.to_json()
            if with_text:
                item["text"] = hit.text
            results.append(item)
        return {
            "results": results,
            "count": len(results),
            "query": self.query,
            "mode": self.mode,
            "unit": self.unit,
            "k": self.k,
            "took_ms": round(self.took_ms, 2),
            "pending_vectors": self.pending_vectors,
            "filters": self.filters,
            "warnings": self.warnings,
            "confidence": self.confidence.to_json(),
        }
