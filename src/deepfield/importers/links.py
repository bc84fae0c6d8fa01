"""Rewrite links between imported notes so they point at the flattened page filenames.

Obsidian's ``[[Note]]``, ``[[Note#Heading]]``, ``[[Note|text]]`` and ``![[file.png]]`` become
ordinary Markdown links (``[text](note.md#heading)``): a memoryfield is plain Markdown read by
agents, editors and web viewers, none of which resolve wikilinks, while a relative Markdown
link works everywhere and keeps working in the flat folder. Relative Markdown links to other
imported files (``[x](sub/Other%20Note.md)``) are re-pointed the same way. Links whose target
is not part of the import are left exactly as written, so nothing is lost. Code spans and
fenced code blocks are never touched.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import quote, unquote

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1", re.S)
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# The third form is not CommonMark but common in notes: a path with spaces, ending in .md.
_MD_LINK = re.compile(
    r"(!?\[[^\]\n]*\]\()(<[^>\n]+>|[^)\s]+|[^)\n]+?\.(?:md|markdown)(?:#[^)\n]*)?)"
    r"(\s+\"[^\"\n]*\")?\)"
)
# A reference-style link definition, ``[label]: target "title"`` (not a ``[^note]:`` footnote).
_REF_DEF = re.compile(
    r"^( {0,3}\[(?!\^)[^\]\n]+\]:[ \t]*)(<[^>\n]+>|\S+)"
    r"([ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$", re.M
)


# ``<img src="attachments/x.png" width="300">``: notes size images with HTML.
_HTML_LINK = re.compile(
    r"(<(?:img|a|source|video|audio|embed|iframe)\b[^<>]*?\s(?:src|href)=)([\"'])([^\"'<>\n]+)\2",
    re.I,
)


@dataclass
class LinkMap:
    """Where each imported source file ended up: relative source path -> field filename."""

    files: dict[str, str] = field(default_factory=dict)
    """posix relative source path (with extension) -> filename in the field"""
    by_name: dict[str, list[str]] = field(default_factory=dict)
    """lower-cased name (with and without ``.md``) -> source paths having it, shortest first"""
    lowered: dict[str, str] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    """lower-cased title, alias or permalink -> field filename (tried after names)"""

    def add(self, rel: str, filename: str) -> None:
        self.files[rel] = filename
        self.files.setdefault(_nfc(rel), filename)
        self.lowered[_fold(rel)] = filename
        name = _fold(PurePosixPath(rel).name)
        keys = {name, name[:-3]} if name.endswith(".md") else {name}
        for key in keys:
            self.by_name.setdefault(key, []).append(rel)
            self.by_name[key].sort(key=lambda r: (r.count("/"), r))

    def add_names(self, names: list[str], filename: str) -> None:
        for name in names:
            self.titles.setdefault(_fold(name.strip()), filename)

    def resolve_wikilink(self, target: str, here: str,
                         stats: LinkStats | None = None) -> str | None:
        """The field filename for an Obsidian link target (note name or vault path).

        A bare name several notes share is resolved as Obsidian does, and recorded in
        ``stats.ambiguous`` so the import can say which note it chose."""
        target = target.strip().lstrip("/")
        key = _fold(target)  # (macOS writes "é" in file names as e + accent: NFD)
        for candidate in (key, f"{key}.md"):
            if candidate in self.lowered:
                return self.lowered[candidate]
        if "/" in target:  # a partial path: match it as a suffix, like Obsidian does
            for rel, filename in sorted(self.lowered.items(), key=lambda kv: kv[0].count("/")):
                stem = rel[:-3] if rel.endswith(".md") else rel
                if stem.endswith("/" + key) or rel.endswith("/" + key):
                    return filename
            # basic-memory permalinks hold their folder (``coffee/coffee-brewing``).
            return self.titles.get(key)
        rels = self.by_name.get(key)
        if not rels:
            return self.titles.get(key)
        chosen = min(rels, key=lambda rel: _nearness(rel, here))
        if len(rels) > 1 and stats is not None:
            stats.ambiguous.append((here, target, self.files[chosen], len(rels)))
        return self.files[chosen]

    def resolve_relative(self, href: str, here: str) -> str | None:
        """The field filename for a relative link ``href`` written in source file ``here``."""
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith(("/", "#")):
            return None
        joined = join_relative(here, unquote(href))
        return None if joined is None else self.files.get(joined, self.files.get(_nfc(joined)))


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _fold(text: str) -> str:
    """How names are compared: case and Unicode composition set aside."""
    return _nfc(text).lower()


def _nearness(rel: str, here: str) -> tuple[int, int, int, str]:
    """Sort key among notes sharing a name, nearest to the linking note ``here`` first.

    Obsidian takes the note in the linking note's own folder, then the one whose folder
    shares the longest path with it (the nearest ancestor), then the shallowest; the path
    itself breaks ties so the choice never depends on walk order."""
    folder = PurePosixPath(rel).parent.parts
    mine = PurePosixPath(here).parent.parts
    shared = 0
    for a, b in zip(folder, mine, strict=False):
        if a != b:
            break
        shared += 1
    same = 0 if folder == mine else 1
    return same, -shared, len(folder), rel


def join_relative(here: str, path: str) -> str | None:
    """The source-relative path that ``path``, written in file ``here``, points to; None when
    it climbs out of the source folder."""
    parts: list[str] = []
    for piece in (*PurePosixPath(here).parent.parts, *PurePosixPath(path).parts):
        if piece == "..":
            if not parts:
                return None
            parts.pop()
        elif piece not in (".", ""):
            parts.append(piece)
    return "/".join(parts)


def heading_anchor(heading: str) -> str:
    """GitHub-style anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFC", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """Apply ``rewrite`` to every stretch of ``text`` that is not code (fences or spans)."""
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if prose:
            out.append(_outside_spans("".join(prose), rewrite))
            prose.clear()

    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line)
        if fence is None and match:
            flush()
            fence = match.group(1)[0] * len(match.group(1))
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        else:
            prose.append(line)
    flush()
    return "".join(out)


def _outside_spans(text: str, rewrite: Callable[[str], str]) -> str:
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(rewrite(text[last : span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(rewrite(text[last:]))
    return "".join(out)


def _href(filename: str, anchor: str = "") -> str:
    return quote(filename) + (f"#{anchor}" if anchor else "")


@dataclass
class LinkStats:
    rewritten: int = 0
    unresolved: list[str] = field(default_factory=list)
    ambiguous: list[tuple[str, str, str, int]] = field(default_factory=list)
    """(linking source path, link target, field filename chosen, how many notes matched)"""


def rewrite_wikilinks(body: str, here: str, links: LinkMap, stats: LinkStats) -> str:
    """Turn resolvable Obsidian wikilinks and embeds into Markdown links."""

    def one(match: re.Match[str]) -> str:
        embed, inner = match.group(1), match.group(2)
        target, bar, label = inner.partition("|")
        if bar and target.endswith("\\"):  # [[Note\|text]]: Obsidian's pipe inside a table
            target = target[:-1]
        target, _, heading = target.partition("#")
        heading = "" if heading.startswith("^") else heading  # block ids have no anchor
        if not target.strip():  # [[#Heading]]: a heading of this very note
            if not heading:
                return match.group(0)
            stats.rewritten += 1
            return f"[{label or heading}](#{heading_anchor(heading)})"
        filename = links.resolve_wikilink(target, here, stats)
        if filename is None:
            stats.unresolved.append(target.strip())
            return match.group(0)
        stats.rewritten += 1
        if embed and re.fullmatch(r"\d+(?:x\d+)?", label.strip()):
            label = ""  # ![[image.png|300]]: a display size, not a caption
        is_page = filename.endswith(".md")
        # A file's own fragment (``paper.pdf#page=3``) is no heading: kept as written.
        anchor = (heading_anchor(heading) if is_page else quote(heading, safe="=&")) \
            if heading else ""
        text = label or (f"{target.strip()} > {heading}" if heading and is_page
                         else target.strip())
        href = _href(filename, anchor)
        return f"![{text}]({href})" if embed and not is_page else f"[{text}]({href})"

    return outside_code(body, lambda prose: _WIKILINK.sub(one, prose))


def _swap_hrefs(body: str, swap: Callable[[str], str | None]) -> str:
    """Replace the target of every inline link, reference definition and HTML ``src``/``href``
    outside code with ``swap(target)`` (the target without ``<>``); None leaves that link
    exactly as written."""

    def inline(match: re.Match[str]) -> str:
        head, href, title = match.group(1), match.group(2), match.group(3) or ""
        new = swap(href[1:-1] if href.startswith("<") else href)
        return match.group(0) if new is None else f"{head}{new}{title})"

    def definition(match: re.Match[str]) -> str:
        href = match.group(2)
        new = swap(href[1:-1] if href.startswith("<") else href)
        if new is None:
            return match.group(0)
        return match.group(1) + new + match.group(0)[match.end(2) - match.start(0):]

    def html(match: re.Match[str]) -> str:
        new = swap(match.group(3))
        quote_ = match.group(2)
        return match.group(0) if new is None else f"{match.group(1)}{quote_}{new}{quote_}"

    def prose(text: str) -> str:
        return _HTML_LINK.sub(html, _REF_DEF.sub(definition, _MD_LINK.sub(inline, text)))

    return outside_code(body, prose)


def rewrite_relative_links(body: str, here: str, links: LinkMap, stats: LinkStats) -> str:
    """Re-point relative Markdown links (inline and reference definitions) at imported
    files to their field filenames."""

    def swap(raw: str) -> str | None:
        path, _, anchor = raw.partition("#")
        filename = links.resolve_relative(path, here) if path else None
        if filename is None:
            return None
        stats.rewritten += 1
        return _href(filename, anchor)

    return _swap_hrefs(body, swap)


def relink(body: str, here: str, places: dict[str, str]) -> str:
    """The reverse of flattening: point links at field files to where ``places`` puts them.

    ``places`` maps field filenames to paths in an exported tree and ``here`` is this page's
    path in it; links become relative paths between the two.
    """

    def swap(raw: str) -> str | None:
        path, hash_, anchor = raw.partition("#")
        target = places.get(unquote(path)) if path and "/" not in path else None
        if target is None:
            return None
        start = PurePosixPath(here).parent
        rel = posixpath.relpath(target, start=str(start) if str(start) != "." else ".")
        return f"{quote(rel)}{hash_}{anchor}"

    return _swap_hrefs(body, swap)
