"""Reading a page that was split into parts (split.py) as the one page it was written as.

A page over 8 KB is stored as ``name.md``, ``name-part-2.md`` … each with ``part`` and
``parts`` in its frontmatter. Reading one part alone hid the rest: its outline listed only
that part's headings and ``--section`` could not find a heading in another part. Here the
outline covers every part (each entry says which file it is in) and a section is looked up
in the part asked for first, then in the others in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .archive import part_names as split_part_names
from .errors import PageNotFoundError, SectionNotFoundError
from .markdown import SOURCES_TITLE, Section, parse_sections
from .page import Page
from .read import OutlineEntry, count_matching, find_section, outline

Loader = Callable[[str], tuple[str, Page]]
"""``Field.load``: a filename to (filename, parsed page); PageNotFoundError if it is gone."""


def part_names(filename: str, page: Page) -> list[str]:
    """Every filename of the split page ``filename`` is a part of, in order; [] for a page
    that is not a part (or whose ``parts`` key makes no sense): archive.part_names, the
    reading rm and restore use, with a single "part" read as no split."""
    names = split_part_names(page, filename) or []
    return names if len(names) > 1 else []


def _load_parts(filename: str, page: Page, names: list[str],
                load: Loader) -> tuple[list[tuple[str, Page]], list[str]]:
    """(filename, page) of each part that can be read, in order, and a warning per missing
    part."""
    loaded: list[tuple[str, Page]] = []
    warnings: list[str] = []
    for name in names:
        if name == filename:
            loaded.append((filename, page))
            continue
        try:
            loaded.append(load(name))
        except PageNotFoundError:
            warnings.append(f"{filename}: part {name} of this page is missing")
    return loaded, warnings


def outline_parts(filename: str, page: Page, names: list[str], load: Loader, *,
                  depth: int, sentences: int) -> tuple[list[OutlineEntry], list[str]]:
    """The outline of every part in order, each entry naming its file, and warnings.

    A small sources section is copied into every part (split.py); it is listed once."""
    loaded, warnings = _load_parts(filename, page, names, load)
    continued = continued_sections(loaded)
    entries: list[OutlineEntry] = []
    seen_sources: set[tuple[int, str, tuple[str, ...]]] = set()
    for name, part in loaded:
        for entry in outline(part, depth=depth, sentences=sentences,
                             sections=continued[name]):
            if entry.level and SOURCES_TITLE.match(entry.title):
                key = (entry.level, entry.title, tuple(entry.sentences))
                if key in seen_sources:
                    continue
                seen_sources.add(key)
            entries.append(OutlineEntry(entry.level, entry.title, entry.path, entry.line,
                                        entry.sentences, name))
    return entries, warnings


def continued_sections(loaded: list[tuple[str, Page]]) -> dict[str, list[Section]]:
    """Each part's sections with heading paths that go on from the parts before it: part 2
    starts under part 1's "# Big page", so its "## Section 5" is "Big page > Section 5", as in
    the page that was written (and as an outline of the whole page must say)."""
    carried: list[tuple[int, str]] = []
    out: dict[str, list[Section]] = {}
    for name, part in loaded:
        stack = list(carried)
        sections: list[Section] = []
        for section in parse_sections(part.body, part.body_line):
            if section.level:
                while stack and stack[-1][0] >= section.level:
                    stack.pop()
                stack.append((section.level, section.title))
                section = replace(section, path=tuple(title for _, title in stack))
            sections.append(section)
        carried = stack
        out[name] = sections
    return out


@dataclass(frozen=True)
class FoundSection:
    filename: str
    page: Page
    section: Section
    text: str
    last_line: int
    warnings: list[str]


def section_in_parts(filename: str, page: Page, names: list[str], load: Loader,
                     heading: str) -> FoundSection:
    """The section ``heading`` of a split page: from the part asked for when it is there
    (copied sources are in every part), else from the first other part that has it."""
    if not names:
        found, text, last = find_section(page, heading)
        return FoundSection(filename, page, found, text, last, [])
    loaded, warnings = _load_parts(filename, page, names, load)
    continued = continued_sections(loaded)
    if filename in continued and count_matching(page, heading, continued[filename]):
        found, text, last = find_section(page, heading, continued[filename])
        return FoundSection(filename, page, found, text, last, warnings)
    having = [(name, part) for name, part in loaded if name != filename
              and count_matching(part, heading, continued[name])]
    if not having:
        headings = [" > ".join(s.path) for name, _part in loaded
                    for s in continued[name] if s.level]
        known = "; ".join(headings[:20]) or "the page has no headings"
        raise SectionNotFoundError(
            f"no section {heading!r} in any of the page's {len(names)} parts "
            f"(headings: {known})")
    name, part = having[0]
    found, text, last = find_section(part, heading, continued[name])
    if len(having) > 1:
        others = ", ".join(n for n, _ in having[1:])
        warnings.append(f"{heading!r} is also a heading in {others} (read that part by its "
                        "filename for its section)")
    return FoundSection(name, part, found, text, last, warnings)
