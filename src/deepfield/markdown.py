"""Markdown structure without a full parser: sections by heading, blocks, sentences.

Just enough CommonMark to be right about what matters for memory pages: ATX and setext
headings, fenced code (whose ``#`` lines are not headings), paragraphs split at blank lines, and
"record" paragraphs (lists, tables, ``Speaker: text`` transcripts) whose lines stand alone.
Line numbers are 1-based and refer to the page file, so citations can point at them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_RECORD = re.compile(
    r"^\s*(?:[-*+]\s|\d{1,3}[.)]\s|\||>|\[[^\]]{1,40}\]\s|[^\s:|(](?:[^:|(]|\([^)]{0,30}\)){0,60}:\s"
    # "**Ana:** Great." / "__Ana:__ Great.": a Markdown transcript's bold speaker label
    # (sessions._SPEAKER_LINE takes it as one too).
    r"|(\*\*|__)[^\s*_:|][^*_:|]{0,40}:\1\s)"
)


def is_record_line(line: str) -> bool:
    """Whether ``line`` opens a record of its own: a list item, table row, quote, ``[tag]``
    entry or ``Speaker:`` line (``**Speaker:**`` too; never the continuation of a hard-wrapped
    paragraph)."""
    return bool(_RECORD.match(line))


SOURCES_TITLE = re.compile(r"^(sources?|references?|citations?|bibliography|links)$", re.I)
"""Titles of a section that lists where a page's facts come from (split.py copies it into
every part; the researcher weighs its lines down: they name a source, not what it says)."""


def below_title(heading: str, title: str) -> str:
    """A section's heading path ("People > Jonas Berg") without its first heading when the
    page's title says it (a page's H1 usually repeats the title; a part of a split page is
    titled "… (part 1 of 2)"), so what is left is what the title does not already say; ""
    for a line directly under the title."""
    parts = heading.split(" > ") if heading else []
    said = bool(parts) and title.strip().lower().startswith(parts[0].strip().lower())
    return " > ".join(parts[1:] if said else parts)


def is_fence(line: str) -> bool:
    """Whether ``line`` opens or closes a fenced code block."""
    return bool(_FENCE.match(line))


def fence_step(line: str, fence: str | None) -> tuple[bool, str | None]:
    """(whether ``line`` is a fence line, the fence open after it), ``fence`` being the one
    open before it (its marker, e.g. "````") or None. As in CommonMark a fence is closed only
    by a bare run of its own character at least as long as its opening, so a ````` ```` `````
    block quoting Markdown keeps its inner ````` ```python ````` … ````` ``` ````` lines (and
    the "# comment" between them) as code, not as headings."""
    if fence is None:
        opened = _FENCE.match(line)
        return (True, opened.group(1)) if opened else (False, None)
    closed = _FENCE_CLOSE.match(line)
    if closed and closed.group(1)[0] == fence[0] and len(closed.group(1)) >= len(fence):
        return True, None
    return False, fence


_LINK = re.compile(r"!?\[\[[^\]]*\]\]|!?\[[^\]]*\]\([^)]*\)")
_NAVIGATION = frozenset({
    "part", "parts", "of", "page", "pages", "next", "previous", "prev", "back", "to", "the",
    "up", "top", "home", "index", "contents", "table", "see", "also", "related", "more",
    "continued", "go", "return", "and", "or", "read", "here", "this", "links", "link",
})
_FOOTER = re.compile(r"^part \d+ of \d+$", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")
_COMMENT = re.compile(r"^<!--.*-->$")
_COMMENT_OPEN = re.compile(r"^ {0,3}<!--")
_TABLE_RULE = re.compile(r"^\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?$")
_SESSION_CONTEXT = re.compile(
    r"^When: [^\n]*?\. Who: [^\n]*?\.(?: (?:Topic|Project|Related): [^\n]*)?$")
"""The context paragraph the memorizer writes under a session page's title ("When: unknown.
Who: Ana and Ben. Topic: …. Related: [Kitchen planning](….md)."): generated from the
frontmatter, it says nothing the session does, and read as a line it was a turn said by
"When" and matched questions through the titles it links to."""


_PARTS_FOOTER = re.compile(
    r"^Part \d+ of \d+(?: · (?:previous|next): \[[^\]\n]*\]\([^)\n]*\))*$")


def is_parts_footer(text: str) -> bool:
    """Whether ``text`` (a block, its ``---`` rule included) is the "Part 2 of 3 · previous:
    […](…) · next: […](…)" footer split.py writes under each part of a long page."""
    lines = [line.strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line and line.strip("-")]
    return len(lines) == 1 and bool(_PARTS_FOOTER.match(lines[0]))


def is_session_context(text: str) -> bool:
    """Whether ``text`` (a block) is only the "When: …. Who: …." context paragraph the
    memorizer writes under a session page's title (memorize.py)."""
    return bool(_SESSION_CONTEXT.match(" ".join(text.split())))


def without_links(text: str) -> str:
    """``text`` with its Markdown and wiki links (``[Title](x.md)``, ``[[page]]``) taken out:
    what the line itself says. A link's text is the title of another page, which is searched
    in its own right."""
    return _LINK.sub(" ", text) if "[" in text else text


def says_something(text: str, code: bool = False) -> bool:
    """Whether a page line says something, rather than being scaffolding: a heading, a
    frontmatter delimiter or thematic break (``---``), a table rule, an HTML comment, the
    "Part 2 of 3" footer split.py writes, navigation made of links alone ("← [Back to the
    index](index.md)"), or the "When: …. Who: …." context paragraph the memorizer writes
    (memorize.py; the frontmatter holds the same). ``code``: a line of fenced code, where
    "# keep the valve shut" is a comment, not a heading."""
    line = text.strip()
    if not _WORD.search(line) or (line.startswith("#") and not code) or _COMMENT.match(line):
        return False  # blank, a rule or delimiter, a heading, an HTML comment
    if _FENCE.match(line):
        return False  # "```python" opens code, it says nothing
    if _FOOTER.match(line) or (not code and _SESSION_CONTEXT.match(line)):
        return False
    rest = _LINK.sub(" ", line)
    if rest == line:
        return True
    # Only links, numbers and navigation words ("Part 1 of 2 · next: […](…)"): navigation.
    return any(not w.isdigit() and w.lower() not in _NAVIGATION for w in _WORD.findall(rest))


@dataclass(frozen=True)
class Section:
    """A heading and the text up to the next heading of any level (level 0: text before any)."""

    level: int
    title: str
    path: tuple[str, ...]
    line: int
    """Line of the heading (or of the first body line for the preamble)."""
    text_lines: tuple[tuple[int, str], ...]
    """The section's own lines (not its subsections'), each with its line number."""

    @property
    def text(self) -> str:
        return "\n".join(line for _, line in self.text_lines)

    @property
    def end_line(self) -> int:
        return self.text_lines[-1][0] if self.text_lines else self.line


@dataclass(frozen=True)
class Block:
    """A paragraph, a record line, or a code block, with its first and last line numbers."""

    text: str
    line_start: int
    line_end: int
    kind: str  # "prose" | "record" | "code"


def _heading_text(raw: str | None) -> str:
    return _ATX_CLOSING.sub("", raw or "").strip()


def parse_sections(body: str, first_line: int = 1) -> list[Section]:
    """Split a Markdown body into sections in document order."""
    lines = body.split("\n")
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: tuple[int, str, int] = (0, "", first_line)
    own: list[tuple[int, str]] = []
    fence: str | None = None
    comment = False  # inside an HTML comment block ("<!-- … -->" over several lines)

    def close() -> None:
        level, title, line = current
        path = tuple(t for _, t in stack) if level else ()
        if level or any(text.strip() for _, text in own):
            sections.append(Section(level, title, path, line, tuple(own)))

    def open_heading(level: int, title: str, line: int) -> None:
        nonlocal current, own
        close()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        current = (level, title, line)
        own = []

    for offset, line in enumerate(lines):
        number = first_line + offset
        if comment:
            comment = "-->" not in line
            own.append((number, line))
            continue
        fenced, fence = fence_step(line, fence)
        if fenced or fence is not None:
            own.append((number, line))
            continue
        opened = _COMMENT_OPEN.match(line)
        if opened and "-->" not in line[opened.end():]:
            # As in CommonMark, an HTML comment block runs to its "-->": a template's
            # "## Memory" example inside one is no heading.
            comment = True
            own.append((number, line))
            continue
        atx = _ATX.match(line)
        if atx:
            open_heading(len(atx.group(1)), _heading_text(atx.group(2)), number)
            continue
        setext = _SETEXT.match(line)
        if setext and own and own[-1][1].strip() and not _RECORD.match(own[-1][1]):
            # Setext: the paragraph line above becomes the heading (only a one-line paragraph).
            prev_blank = len(own) < 2 or not own[-2][1].strip()
            if prev_blank and (setext.group(1)[0] == "=" or len(setext.group(1)) >= 2):
                title_number, title = own.pop()
                open_heading(1 if setext.group(1)[0] == "=" else 2, title.strip(), title_number)
                continue
        own.append((number, line))
    close()
    return sections


def split_blocks(lines: tuple[tuple[int, str], ...] | list[tuple[int, str]]) -> list[Block]:
    """Paragraphs at blank lines; code fences whole; record paragraphs one block per line."""
    blocks: list[Block] = []
    paragraph: list[tuple[int, str]] = []
    code: list[tuple[int, str]] = []
    fence: str | None = None

    def flush() -> None:
        if not paragraph:
            return
        texts = [text for _, text in paragraph]
        records = sum(1 for text in texts if _RECORD.match(text))
        if len(texts) > 1 and records >= max(2, int(0.8 * len(texts))):
            for number, text in paragraph:
                blocks.append(Block(text.strip(), number, number, "record"))
        else:
            blocks.append(
                Block("\n".join(texts).strip(), paragraph[0][0], paragraph[-1][0], "prose")
            )
        paragraph.clear()

    for number, line in lines:
        if fence is not None:
            code.append((number, line))
            _, fence = fence_step(line, fence)
            if fence is None:
                blocks.append(Block("\n".join(t for _, t in code), code[0][0], number, "code"))
                code = []
            continue
        opened, fence = fence_step(line, None)
        if opened:
            flush()
            code = [(number, line)]
            continue
        if line.strip():
            paragraph.append((number, line))
        else:
            flush()
    flush()
    if code:  # an unclosed fence runs to the end of the section
        blocks.append(Block("\n".join(t for _, t in code), code[0][0], code[-1][0], "code"))
    return blocks


# Abbreviations after which a period does not end a sentence.
_ABBREV = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|cf|al|Dr|Mr|Mrs|Ms|Prof|Sr|Jr|St|No|Fig|Eq|approx|incl)\.|"
    r"\b[A-Z]\.)$"
)
# A number and a period alone open a numbered item ("1. Mix the flour"); after anything
# else a number can end a sentence ("We shipped in 2024. Then we rested.").
_ITEM_NUMBER = re.compile(r"\(?\d{1,3}[.)]")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|(?<=[。！？])")


def split_sentences(text: str) -> list[str]:
    """Sentences of a block of prose (Latin and CJK punctuation); never returns empty strings."""
    flat = " ".join(text.split())
    if not flat:
        return []
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(flat):
        end = match.end()
        stop = match.start()
        while stop > start and flat[stop - 1].isspace():
            stop -= 1
        # Only the end of the sentence so far can hold an abbreviation (the longest is 7
        # characters): searching all of it, as it grows past stops that do not end it, made a
        # long paragraph quadratic.
        if (stop <= start or _ABBREV.search(flat[max(start, stop - 16):stop])
                or _ITEM_NUMBER.fullmatch(flat[start:stop])):
            continue
        if end < len(flat) and flat[end].islower():
            continue  # "… e.g. foo" or a mid-sentence stop: the next word keeps going
        sentences.append(flat[start:end].strip())
        start = end
    tail = flat[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


_INLINE_NOISE = re.compile(r"!\[([^\]]*)\]\([^)]*\)|\[([^\]]+)\]\([^)]*\)|\*{1,3}"
                           r"|(?<![A-Za-z0-9])_{1,3}|_{1,3}(?![A-Za-z0-9])")
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def plain(text: str, *, backticks: bool = False) -> str:
    """Markdown inline markup removed (links keep their text), for snippets and sentences.
    A code span keeps its text as written (``__init__`` in code is a name, not emphasis),
    with its backticks if ``backticks``; an underscore inside a word (``snake_case``) stays."""

    def keep(match: re.Match[str]) -> str:
        return match.group(1) or match.group(2) or ""

    pieces: list[str] = []
    done = 0
    for code in _CODE_SPAN.finditer(text):
        pieces += [_INLINE_NOISE.sub(keep, text[done:code.start()]),
                   code.group(0) if backticks else code.group(2)]
        done = code.end()
    pieces.append(_INLINE_NOISE.sub(keep, text[done:]).replace("`", ""))
    return "".join(pieces)


def _uncommented(lines: tuple[tuple[int, str], ...]) -> list[tuple[int, str]]:
    """The lines with HTML comments blanked out (line numbers kept): a template's guidance
    is not the first sentence of its section. Fenced code is kept as it is."""
    text = "\n".join(line for _, line in lines)
    if "<!--" not in text:
        return list(lines)
    kept: list[tuple[int, str]] = []
    fence: str | None = None
    comment = False
    for number, line in lines:
        if not comment:  # a fence inside a comment is part of the comment
            fenced, fence = fence_step(line, fence)
            if fenced or fence is not None:
                kept.append((number, line))
                continue
        out = ""
        rest = line
        while rest:
            if comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                    break
                comment, rest = False, rest[end + 3:]
                continue
            start = rest.find("<!--")
            if start < 0:
                out += rest
                break
            out, rest, comment = out + rest[:start], rest[start + 4:], True
        kept.append((number, out))
    return kept


SENTENCE_CHARS = 300
"""An outline sentence is cut (at a word, with "…") past this many characters: a paragraph
without stops (a pasted log, a transcript on one line) was one "sentence" as long as the
page, and the outline that should save reading it cost as much."""


def _capped(sentence: str) -> str:
    if len(sentence) <= SENTENCE_CHARS:
        return sentence
    cut = sentence[:SENTENCE_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > SENTENCE_CHARS // 2 else cut).rstrip() + " …"


def first_sentences(section: Section, count: int) -> list[str]:
    """The first ``count`` sentences of a section's own text, skipping code blocks, each
    cut to SENTENCE_CHARS."""
    if count <= 0:
        return []
    found: list[str] = []
    for block in split_blocks(_uncommented(section.text_lines)):
        if block.kind == "code" or is_parts_footer(block.text):  # code; a split's navigation
            continue
        if _TABLE_RULE.match(block.text):  # "|---|---|" under a table's header says nothing
            continue
        for sentence in split_sentences(plain(block.text, backticks=True)):
            found.append(_capped(sentence))
            if len(found) >= count:
                return found
    return found


def iter_text_blocks(sections: list[Section]) -> Iterator[tuple[Section, Block]]:
    for section in sections:
        for block in split_blocks(section.text_lines):
            yield section, block
