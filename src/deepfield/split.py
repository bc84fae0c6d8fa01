"""Split a page over the spec's 8,192-byte limit into linked parts (pure: names are given).

Cuts prefer section boundaries, then paragraphs, lines, sentences, and only as a last resort a
character boundary. A part that starts inside a section repeats that section's heading marked
"(continued)". A small sources section (Sources, References, Citations, Bibliography) is copied
into every part, and all frontmatter keys travel with every part, so no part loses its
citations. Each part gets a fresh uuid, ``split_from`` (the original uuid), ``part`` and
``parts`` (all part filenames in order, or their number for a page of more than PARTS_LISTED
parts), and a footer linking its neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .markdown import SOURCES_TITLE, parse_sections, split_blocks, split_sentences
from .page import PAGE_LIMIT_BYTES, Page, new_uuid

PARTS_LISTED = 24
"""Up to this many parts, each lists every part's filename in ``parts``; beyond, ``parts`` is
the number of parts, named ``<first>-part-<i>.md`` after the first."""


@dataclass(frozen=True)
class _Atom:
    text: str
    line_start: int
    line_end: int
    heading: tuple[int, str] | None  # the innermost heading this atom sits under
    opens_section: int  # level of the heading this atom starts with, 0 if none


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


class _Sentences:
    """A line's sentences, handed out from the front in pieces that fit a byte budget.

    The line is split once: re-splitting what is left after every piece made a long page
    quadratic (a 1 MB paragraph took seconds, 10 MB never finished)."""

    def __init__(self, unit: str) -> None:
        self.sentences = [s for s in split_sentences(unit) if s] or [unit]
        self.next = 0

    def __bool__(self) -> bool:
        return self.next < len(self.sentences)

    def take(self, room: int) -> str:
        """The longest run of whole sentences within ``room`` bytes (joined by one space,
        which Markdown renders the same way); else the first sentence cut at a character
        boundary."""
        total, end = 0, self.next
        while end < len(self.sentences):
            grow = _size(self.sentences[end]) + (1 if end > self.next else 0)
            if total + grow > room:
                break
            total, end = total + grow, end + 1
        if end > self.next:
            head = " ".join(self.sentences[self.next : end])
            self.next = end
            return head
        sentence = self.sentences[self.next]
        cut = sentence.encode("utf-8")[: max(room, 4)].decode("utf-8", "ignore") or sentence[:1]
        self.sentences[self.next] = sentence[len(cut) :]
        if not self.sentences[self.next]:
            self.next += 1
        return cut


def _fit(text: str, budget: int) -> list[str]:
    """Pieces of ``text`` no larger than ``budget`` bytes: lines, sentences, characters.

    An oversized line fills the rest of the current piece before spilling over, so a heading
    stays with the start of its text.
    """
    if _size(text) <= budget:
        return [text]
    multiline = "\n" in text.strip("\n")
    units = text.split("\n") if multiline else [text]
    sep = "\n" if multiline else " "
    pieces: list[str] = []
    current = ""
    for unit in units:
        candidate = f"{current}{sep}{unit}" if current else unit
        if _size(candidate) <= budget:
            current = candidate
            continue
        rest = _Sentences(unit)
        while rest:
            room = budget - _size(current) - _size(sep) if current else budget
            if current and room < min(200, budget // 4):
                pieces.append(current)
                current = ""
                continue
            head = rest.take(room)
            current = f"{current}{sep}{head}" if current else head
            if rest:
                pieces.append(current)
                current = ""
    if current:
        pieces.append(current)
    return [p for p in pieces if p.strip()]


def _atoms(body: str, budget: int) -> tuple[list[_Atom], str]:
    """Body atoms in order (heading glued to its first block) and the copied sources text."""
    lines = body.split("\n")
    atoms: list[_Atom] = []
    sources = ""
    for section in parse_sections(body):
        heading = (section.level, section.title) if section.level else None
        heading_line = lines[section.line - 1] if section.level else ""
        blocks = split_blocks(section.text_lines)
        section_text = "\n".join([heading_line, section.text]).strip("\n")
        if heading and SOURCES_TITLE.match(section.title) and _size(section_text) <= budget // 4:
            sources += ("\n\n" if sources else "") + section_text
            continue
        pending_heading = heading_line if section.level else ""
        for block in blocks:
            raw = "\n".join(lines[block.line_start - 1 : block.line_end])
            start = block.line_start
            if pending_heading:
                raw = f"{pending_heading}\n\n{raw}" if start > section.line + 1 else \
                    f"{pending_heading}\n{raw}"
                start = section.line
            for index, piece in enumerate(_fit(raw, budget)):
                opens = section.level if pending_heading and index == 0 else 0
                atoms.append(_Atom(piece, start, block.line_end, heading, opens))
            pending_heading = ""
        if pending_heading:  # a heading with no text of its own
            atoms.append(_Atom(pending_heading, section.line, section.line, heading, section.level))
    return atoms, sources


def split_body(body: str, budget: int) -> list[str]:
    """Cut a Markdown body into pieces of at most ``budget`` bytes each."""
    atoms, sources = _atoms(body, budget - 1)
    tail = f"\n\n{sources}" if sources else ""
    room = budget - _size(tail) - 1  # each part ends with a newline
    if room < 256:
        raise ValueError("page budget too small to split into parts")
    if tail:
        atoms = [piece for atom in atoms for piece in _refit(atom, room)]
    parts: list[str] = []
    current = ""
    previous: _Atom | None = None
    for atom in atoms:
        sep = "\n" if previous and previous.line_end + 1 == atom.line_start else "\n\n"
        candidate = f"{current}{sep}{atom.text}" if current else atom.text
        heading_break = atom.opens_section in (1, 2) and _size(current) >= 0.6 * room
        if current and (_size(candidate) > room or heading_break):
            parts.append(current)
            current = atom.text
            if not atom.opens_section and atom.heading:
                level, title = atom.heading
                continued = f"{'#' * level} {title} (continued)\n\n"
                if _size(continued + current) <= room:
                    current = continued + current
        else:
            current = candidate
        previous = atom
    if current:
        parts.append(current)
    return [part.rstrip("\n") + tail + "\n" for part in parts]


def _refit(atom: _Atom, room: int) -> list[_Atom]:
    if _size(atom.text) <= room:
        return [atom]
    return [
        _Atom(piece, atom.line_start, atom.line_end, atom.heading, atom.opens_section if i == 0
              else 0)
        for i, piece in enumerate(_fit(atom.text, room))
    ]


def part_title(title: str, index: int, count: int) -> str:
    return f"{title} (part {index} of {count})"


def _footer(index: int, filenames: list[str], titles: list[str]) -> str:
    links = [f"Part {index} of {len(filenames)}"]
    if index > 1:
        links.append(f"previous: [{titles[index - 2]}]({filenames[index - 2]})")
    if index < len(filenames):
        links.append(f"next: [{titles[index]}]({filenames[index]})")
    return "\n---\n" + " · ".join(links) + "\n"


def split_page(
    page: Page,
    title: str,
    names_for: Callable[[int], list[str]],
    uuid_for: Callable[[int, str], str],
    *,
    limit: int = PAGE_LIMIT_BYTES,
) -> list[tuple[str, Page]]:
    """Split ``page`` into parts that each render to at most ``limit`` bytes.

    ``names_for(n)`` returns n free filenames (the first is the original page's);
    ``uuid_for(i, filename)`` the uuid of part i (1-based). Returns (filename, part) pairs.
    """
    original_uuid = page.uuid or new_uuid()
    # Room for each part's frontmatter (title, uuid, part keys, filenames) and footer links.
    overhead = _size(page.render_frontmatter()) + 2 * _size(title) + 700
    for _attempt in range(6):
        bodies = split_body(page.body, limit - overhead)
        count = len(bodies)
        filenames = names_for(count)
        titles = [part_title(title, i, count) for i in range(1, count + 1)]
        parts: list[tuple[str, Page]] = []
        for index, (filename, body) in enumerate(zip(filenames, bodies, strict=True), start=1):
            part = Page(body=body, frontmatter=dict(page.frontmatter or {}))
            part.set("title", titles[index - 1])
            part.set("uuid", uuid_for(index, filename))
            fm = part.frontmatter or {}
            fm["split_from"] = original_uuid
            fm["part"] = index
            # Every filename would not fit a part of a long page (a 1 MB page has ~150):
            # then the count, the names being first.md, first-part-2.md, … (writer.py).
            fm["parts"] = list(filenames) if count <= PARTS_LISTED else count
            part.frontmatter = fm
            part.body = body.rstrip("\n") + "\n" + _footer(index, filenames, titles)
            parts.append((filename, part))
        worst = max(_size(p.render()) for _, p in parts)
        if worst <= limit:
            return parts
        overhead += worst - limit + 128
    raise ValueError("could not split the page under the size limit")


def stored_split(folder: Path, first: str, page: Page, title: str) -> list[tuple[str, str, int]]:
    """The parts of the split page whose part 1 is ``first`` in ``folder``, as (filename,
    uuid, bytes), when they hold ``page`` split the same way (each part's title and text, and
    no part more or fewer); else []. ``page`` has the title, uuid and dates a write gives it,
    as their sizes decide where the text is cut."""
    base = first.removesuffix(".md")
    try:  # only part 1 of a split page can be one (splitting a large page again takes time)
        if Page.parse((folder / first).read_text("utf-8")).get("part") != 1:
            return []
    except (OSError, UnicodeDecodeError):
        return []
    try:
        parts = split_page(page, title,
                           lambda n: [first] + [f"{base}-part-{i}.md" for i in range(2, n + 1)],
                           lambda index, filename: page.uuid or "")
    except ValueError:
        return []
    found = []
    for filename, part in parts:
        try:
            text = (folder / filename).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            return []
        stored = Page.parse(text)
        if stored.frontmatter_error or not stored.uuid or stored.body != part.body or any(
                stored.get(key) != part.get(key) for key in ("title", "part", "parts")):
            return []
        found.append((filename, stored.uuid, len(text.encode())))
    return found
