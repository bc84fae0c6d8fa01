"""Progressive reading: a page's outline, one of its sections, or the whole page.

The outline lists headings down to ``depth`` with the first ``sentences`` sentences of each
section's own text, so an agent can decide what to open before paying for the whole page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from .errors import DeepfieldError, SectionNotFoundError
from .markdown import Section, first_sentences, is_parts_footer, parse_sections, plain
from .page import Page, jsonable_frontmatter, slugify


@dataclass(frozen=True)
class OutlineEntry:
    level: int
    title: str
    path: tuple[str, ...]
    line: int
    sentences: list[str]
    filename: str | None = None
    """The part the heading is in, for the outline of a page split into parts (``line`` is
    a line of that file); None otherwise."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "level": self.level, "title": self.title, "path": list(self.path),
            "line": self.line, "sentences": self.sentences,
        }
        if self.filename is not None:
            out["filename"] = self.filename
        return out


@dataclass
class PageView:
    """What ``read`` returns; ``text`` is always ready to print or hand to an agent."""

    field: str
    filename: str
    title: str
    uuid: str | None
    summary: str | None
    frontmatter: dict[str, Any] | None
    view: str  # "full" | "outline" | "section"
    text: str
    bytes: int
    outline: list[OutlineEntry] | None = None
    section: list[str] | None = None
    line_start: int | None = None
    line_end: int | None = None
    warnings: list[str] = dc_field(default_factory=list)
    parts: list[str] | None = None
    """Every filename of the page, in order, when it was split into parts; else None."""

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "filename": self.filename,
            "uuid": self.uuid,
            "title": self.title,
            "summary": self.summary,
            "frontmatter": jsonable_frontmatter(self.frontmatter),
            "view": self.view,
            "text": self.text,
            "bytes": self.bytes,
            "outline": None if self.outline is None else [e.to_json() for e in self.outline],
            "section": self.section,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "warnings": self.warnings,
            "parts": self.parts,
        }


def check_view(outline_only: bool, depth: object, sentences: object,
               section: object) -> None:
    """DeepfieldError for arguments of ``Field.read`` that would fail deep inside it (a
    section given as a number, a depth given as text) or be ignored (an outline and a
    section at once: the CLI and HTTP refuse that too)."""
    if section is not None and not isinstance(section, str):
        raise DeepfieldError(f"section must be a heading's text, not {type(section).__name__}",
                             "pass the heading, a path `A > B`, or NAME@LINE")
    for name, value in (("depth", depth), ("sentences", sentences)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DeepfieldError(f"{name} must be a whole number of 0 or more, not {value!r}")
    if outline_only and section is not None:
        raise DeepfieldError("outline_only and section ask for different views: give one",
                             "section= reads that section, outline_only=True lists headings")


def outline(page: Page, depth: int = 2, sentences: int = 1,
            sections: list[Section] | None = None) -> list[OutlineEntry]:
    """Headings down to ``depth`` (the text before the first heading counts as level 0);
    ``sections`` as for :func:`find_section`."""
    entries = []
    for section in parse_sections(page.body, page.body_line) if sections is None else sections:
        if section.level > depth:
            continue
        entries.append(
            OutlineEntry(
                section.level, section.title, section.path, section.line,
                first_sentences(section, sentences),  # each cut to SENTENCE_CHARS
            )
        )
    return entries


def render_outline(title: str, summary: str | None, entries: list[OutlineEntry],
                   parts: list[str] | None = None) -> str:
    """The outline as Markdown. For a page split into ``parts`` (its entries naming their
    files) a line ``[part 2 of 3: name-part-2.md]`` says where each part starts, so a reader
    knows which file a section is in."""
    lines: list[str] = []
    has_h1 = any(e.level == 1 for e in entries)
    if not has_h1:
        lines += [f"# {title}", ""]
    if summary:
        lines += [f"> {' '.join(summary.split())}", ""]  # one quoted line, whatever it holds
    files = parts or []
    marked: set[str] = set()
    shown = [e for e in entries if e.level or e.sentences]  # a comment before any heading
    for index, entry in enumerate(shown):
        # The page's own title heading stays first; part 1's line follows it.
        leading_title = index == 0 and entry.level == 1
        if len(files) > 1 and entry.filename in files and entry.filename not in marked \
                and not leading_title:
            marked.add(entry.filename)
            lines += [f"[part {files.index(entry.filename) + 1} of {len(files)}: "
                      f"{entry.filename}]", ""]
        if entry.level:
            lines.append(f"{'#' * entry.level} {entry.title}")
        if entry.sentences:
            lines.append(_join_sentences(entry.sentences))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _join_sentences(sentences: list[str]) -> str:
    """Sentences as one line: no space after a full-width stop (CJK text has none)."""
    out = ""
    for sentence in sentences:
        out += ("" if not out or out[-1] in "。！？；…" else " ") + sentence
    return out


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _same_heading(title: str, wanted: str) -> bool:
    """A heading's own text (any case, spacing) or its slug. A slug is compared only when
    there is one: Chinese, Japanese or Korean text has none, and "" == "" matched every
    heading."""
    if _normal(title) == wanted:
        return True
    # As the heading reads: "[Linked](x.md) part" is "Linked part", "**Bold** x" "Bold x".
    if _normal(plain(title, backticks=True)) == _normal(plain(wanted, backticks=True)):
        return True
    slug = slugify(wanted)
    return bool(slug) and slugify(title) == slug


def _joined(text: str) -> str:
    """A heading or heading path compared as written: case, spacing and which of ``>`` and
    ``/`` separates (either may be part of a heading's text) do not matter."""
    return re.sub(r"\s*(?:>|/)\s*", ">", _normal(text))


def _matching(sections: list[Section], heading: str) -> list[Section]:
    """The sections whose heading (or heading path ``A > B``) is ``heading``."""
    wanted = [_normal(part) for part in re.split(r"\s*(?:>|/)\s*", heading) if part.strip()]
    if not wanted:
        raise SectionNotFoundError("no heading given")

    written = _joined(heading)

    def matches(section: Section) -> bool:
        # A heading whose own text holds "/" or ">" ("## Input/Output", "Setup > Usage >
        # TCP/IP"): its text, or a path ending in it, read as written.
        if any(_joined(" > ".join(section.path[-n:])) == written
               for n in range(1, len(section.path) + 1)):
            return True
        tail = section.path[-len(wanted) :]
        if len(tail) != len(wanted):
            return False
        return all(_same_heading(t, w) for t, w in zip(tail, wanted, strict=True))

    return [s for s in sections if matches(s)]


def count_matching(page: Page, heading: str, sections: list[Section] | None = None) -> int:
    """How many of the page's headings ``heading`` names (as :func:`find_section` reads it,
    ``NAME@LINE`` included); 0 when it names none."""
    sections = _headed(page, sections)
    found = _matching(sections, heading)
    at = re.fullmatch(r"(.*\S)\s*@(\d+)", heading.strip())
    if at and not found:
        found = [s for s in _matching(sections, at.group(1)) if s.line == int(at.group(2))]
    return len(found)


def _headed(page: Page, sections: list[Section] | None) -> list[Section]:
    if sections is None:
        sections = parse_sections(page.body, page.body_line)
    return [s for s in sections if s.level]


def find_section(page: Page, heading: str,
                 sections: list[Section] | None = None) -> tuple[Section, str, int]:
    """The section named ``heading`` with its subsections: (section, text, last line).

    ``heading`` matches a heading's text (any case), its slug, or a path written
    ``Parent > Child`` or ``Parent/Child``. Where several headings match, ``@LINE`` after
    it (``Notes@11``: the heading on line 11 of the file) says which. ``sections``: the
    page's sections when their paths are not the page's own (a part of a split page, whose
    headings sit under the headings of the parts before it).
    """
    sections = _headed(page, sections)
    at = re.fullmatch(r"(.*\S)\s*@(\d+)", heading.strip())
    if at and not _matching(sections, heading):  # a heading ending in "@2" is its own text
        named, line = _matching(sections, at.group(1)), int(at.group(2))
        there = [s for s in named if s.line == line]
        if not there:
            lines = ", ".join(str(s.line) for s in named)
            raise SectionNotFoundError(
                f"no heading {at.group(1)!r} on line {line}"
                + (f" (it is on line{'s' if len(named) > 1 else ''} {lines})" if named else ""),
                "give the line the heading is on" if named else "check the heading's text")
        return _section_text(page, sections, there[0])
    found = _matching(sections, heading)
    if not found:
        known = "; ".join(" > ".join(s.path) for s in sections[:20]) or "the page has no headings"
        raise SectionNotFoundError(f"no section {heading!r} (headings: {known})")
    if len(found) > 1:
        paths = "; ".join(f"{' > '.join(s.path)} (line {s.line})" for s in found)
        raise SectionNotFoundError(
            f"{heading!r} matches {len(found)} sections: {paths}",
            f"give the full path, e.g. `Parent > Child`, or the heading's line after @, "
            f"e.g. `{heading.strip()}@{found[0].line}`",
        )
    return _section_text(page, sections, found[0])


def _section_text(page: Page, sections: list[Section],
                  target: Section) -> tuple[Section, str, int]:
    """(target, its text with its subsections, its last line)."""
    index = sections.index(target)
    last = target.end_line
    for later in sections[index + 1 :]:
        if later.level <= target.level:
            break
        last = later.end_line
    lines = (page.body_line, page.body.split("\n"))
    # The last line that is part of the file's text: a section ending the page would
    # otherwise end on the empty string after the final line break (one past the file).
    while last > target.line and not lines[1][last - lines[0]].strip():
        last -= 1
    # The last section of a part of a split page ends on the "---" rule and "Part 1 of 2 ·
    # next: […](…)" footer split.py wrote: navigation, not the section's text.
    if (last - 1 > target.line and is_parts_footer(lines[1][last - lines[0]])
            and lines[1][last - 1 - lines[0]].strip() == "---"):
        last -= 2
        while last > target.line and not lines[1][last - lines[0]].strip():
            last -= 1
    start = target.line - lines[0]
    text = "\n".join(lines[1][start : last - lines[0] + 1]).rstrip("\n") + "\n"
    return target, text, last
