"""A domain's ``taxonomy.md`` read as a category → concept tree, with page counts and a lint.

The page is free Markdown, as ResearcherZero wants, but its tree is taken from two things only:

* headings (ATX ``## Memory`` or setext, ``Memory`` over ``------``) under ``# Taxonomy``; a
  single H1 at the top is the page's title, not a category;
* list items, nested by indentation, under a heading or at the top level.

Roots are categories; a deeper node with children is a sub-category; a deeper node without
children is a concept. Any node may be named as a concept, so ``concepts: [Retrieval]`` is known
even when Retrieval has concepts of its own. An entry's name is its text up to ``: ``, `` — ``
or `` - `` (the rest is a description); names in parentheses are aliases, so
``Retrieval-Augmented Generation (RAG)`` is also ``RAG``. Prose, tables, code and HTML comments
are ignored. Names compare by :func:`deepfield.domains.atomic.name_key`.

A tree that cannot be read raises :class:`~deepfield.errors.TaxonomyError` naming the file and
line: broken frontmatter, an empty heading or item, a list item whose indentation matches none of
the levels above it. Duplicate names under one parent are warnings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import TaxonomyError
from ..markdown import fence_step
from ..page import Page
from .atomic import atomic_meta, entry_name, name_key, part_keys, unmatchable

__all__ = [
    "LintIssue", "PageCounts", "Span", "Taxonomy", "TaxonomyNode", "count_pages",
    "lint_pages", "parse_taxonomy", "render_tree",
]

TAXONOMY_FILE = "taxonomy.md"

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
Span = tuple[int, str, int]
"""Where a split page's part begins in its joined text: (line of the joined text, the part's
filename, that line in the part file)."""

_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,3}[.)])(?:[ \t]+(.*?))?[ \t]*$")


@dataclass
class TaxonomyNode:
    """One category or concept, with the line of ``taxonomy.md`` that names it."""

    name: str
    aliases: tuple[str, ...]
    line: int
    """The line in :attr:`file` (the part file, for a taxonomy split into parts)."""
    path: tuple[str, ...]
    children: list[TaxonomyNode] = field(default_factory=list)
    file: str = ""
    """The file that names it: the taxonomy page, or the part of it that holds the line."""

    @property
    def depth(self) -> int:
        return len(self.path) - 1

    @property
    def is_category(self) -> bool:
        return self.depth == 0 or bool(self.children)

    @property
    def keys(self) -> set[str]:
        return {name_key(n) for n in (self.name, *self.aliases)} - {""}

    def label(self) -> str:
        return self.name + (f" ({', '.join(self.aliases)})" if self.aliases else "")

    def walk(self) -> Iterator[TaxonomyNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def to_json(self, counts: PageCounts | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "aliases": list(self.aliases), "file": self.file,
            "line": self.line,
            "kind": "category" if self.is_category else "concept",
        }
        if counts is not None:
            out["pages"] = len(counts.total(self))
            out["direct_pages"] = len(counts.direct.get(self.path, ()))
        out["children"] = [c.to_json(counts) for c in self.children]
        return out


@dataclass
class Taxonomy:
    filename: str
    roots: list[TaxonomyNode]
    warnings: list[str] = field(default_factory=list)

    def nodes(self) -> Iterator[TaxonomyNode]:
        for root in self.roots:
            yield from root.walk()

    def categories(self) -> list[TaxonomyNode]:
        return [n for n in self.nodes() if n.is_category]

    def concepts(self) -> list[TaxonomyNode]:
        return [n for n in self.nodes() if not n.is_category]

    def find(self, value: str, *, categories: bool) -> list[TaxonomyNode]:
        """Nodes a page value names: categories (roots and sub-categories) or concepts (any
        node below a root). In a path ``A > B``, B names the node and A one of its ancestors
        (not necessarily its parent)."""
        # A name may hold "/" or ">" itself ("Input/Output", "TCP/IP"): read as written
        # first, then as a path split at ">", then at ">" and "/".
        for pattern in (None, r"\s*>\s*", r"\s*(?:>|/)\s*"):
            parts = [value] if pattern is None else re.split(pattern, value)
            found = self._find_path([s for s in parts if s.strip()], categories=categories)
            if found:
                return found
        return []

    def _find_path(self, parts: list[str], *, categories: bool) -> list[TaxonomyNode]:
        if not parts:
            return []
        segments = [name_key(s) for s in parts]
        # The last part as the tree prints it ("Photogrammetry (SfM)"): its name or an alias;
        # the same keys a search filter matches it by.
        last = part_keys(parts[-1])
        found = []
        stack: list[TaxonomyNode] = []
        for node in self.nodes():
            del stack[node.depth:]
            stack.append(node)
            if (not node.is_category) if categories else node.depth == 0:
                continue  # categories: roots and inner nodes; concepts: anything below a root
            if last & node.keys and _in_order(segments[:-1], stack[:-1]):
                found.append(node)
        return found

    def keys_below(self, values: Iterable[str], *, categories: bool) -> set[str]:
        """Name keys (names and aliases) of the nodes ``values`` name and of every node below
        them (for search filters): "GLOF" finds pages tagged "Glacial lake outburst floods"."""
        keys: set[str] = set()
        for value in values:
            for node in self.find(value, categories=categories):
                for below in node.walk():
                    keys |= below.keys
        return keys


def _in_order(wanted: list[str], ancestors: list[TaxonomyNode]) -> bool:
    """True if each of ``wanted`` names an ancestor, in order from the root."""
    position = 0
    for key in wanted:
        while position < len(ancestors) and key not in ancestors[position].keys:
            position += 1
        if position == len(ancestors):
            return False
        position += 1
    return True


def _entry(text: str, where: str) -> tuple[str, tuple[str, ...]]:
    """(name, aliases) of a heading or list item's text."""
    name, aliases = entry_name(text)
    if not name:
        raise TaxonomyError(f"{where}: an entry without a name")
    return name, aliases


def _place(spans: list[Span] | None, filename: str, number: int) -> tuple[str, int]:
    """The file and line of line ``number`` of the (joined) text."""
    first, name, line = max((s for s in spans or [] if s[0] <= number), default=(1, filename, 1))
    return name, line + number - first


def parse_taxonomy(text: str, filename: str = TAXONOMY_FILE,
                   spans: list[Span] | None = None) -> Taxonomy:
    """The tree in a taxonomy page's text (frontmatter allowed); see the module docstring.
    ``spans``: where the parts of a split taxonomy begin in ``text`` (whole_text_spans), so
    lines are counted in the part file that holds them, not in the joined text."""

    def at(number: int) -> str:
        name, line = _place(spans, filename, number)
        return f"{name} line {line}"
    if not isinstance(text, str):
        raise TaxonomyError(f"{filename}: the taxonomy must be text, not {type(text).__name__}",
                            "read the file first, e.g. path.read_text('utf-8')")
    page = Page.parse(text)
    if page.frontmatter_error:
        raise TaxonomyError(
            f"{at(1)}: {page.frontmatter_error}",
            "fix the YAML between the '---' lines, or remove the block",
        )
    lines = _setext_as_atx(_content_lines(page.body, page.body_line))
    headings = [(n, m) for n, line in lines if (m := _HEADING.match(line))]
    h1s = [n for n, m in headings if len(m.group(1)) == 1]
    title_line = h1s[0] if len(h1s) == 1 and headings[0][0] == h1s[0] else None
    taxonomy = Taxonomy(filename, [])
    heads: list[tuple[int, TaxonomyNode]] = []  # (heading level, node)
    items: list[tuple[int, TaxonomyNode]] = []  # (indent, node) under the current heading

    def attach(name: str, aliases: tuple[str, ...], number: int,
               parent: TaxonomyNode | None) -> TaxonomyNode:
        siblings = parent.children if parent else taxonomy.roots
        path = (*parent.path, name) if parent else (name,)
        file, line = _place(spans, filename, number)
        node = TaxonomyNode(name, aliases, line, path, file=file)
        twin = next((s for s in siblings if s.keys & node.keys), None)
        if twin is not None:
            where = " > ".join(parent.path) if parent else "the top level"
            taxonomy.warnings.append(
                f"{at(number)}: {name!r} repeats {twin.name!r} "
                f"({'' if twin.file == file else twin.file + ' '}line {twin.line}) "
                f"under {where}"
            )
        siblings.append(node)
        return node

    for number, line in lines:
        heading = _HEADING.match(line)
        if heading:
            items = []
            if number == title_line:
                continue
            raw = _CLOSING.sub("", heading.group(2) or "").strip()
            if not raw:
                raise TaxonomyError(f"{at(number)}: a heading without text")
            level = len(heading.group(1))
            while heads and heads[-1][0] >= level:
                heads.pop()
            name, aliases = _entry(raw, at(number))
            heads.append((level, attach(name, aliases, number, heads[-1][1] if heads else None)))
            continue
        item = _ITEM.match(line)
        if not item:
            if line.strip() and not line[:1].isspace():
                items = []  # unindented prose ends a list
            continue
        if not (item.group(2) or "").strip():
            raise TaxonomyError(f"{at(number)}: an empty list item")
        indent = len(item.group(1).expandtabs(4))
        while items and items[-1][0] > indent:
            popped = items.pop()
            if items and items[-1][0] < indent:
                levels = " and ".join(str(i) for i in (items[-1][0], popped[0]))
                raise TaxonomyError(
                    f"{at(number)}: this item is indented {indent} spaces, "
                    f"between the levels above it ({levels} spaces), so its parent is unclear"
                )
        if items and items[-1][0] == indent:
            items.pop()
        parent = items[-1][1] if items else (heads[-1][1] if heads else None)
        name, aliases = _entry(item.group(2), at(number))
        items.append((indent, attach(name, aliases, number, parent)))
    return taxonomy


def _setext_as_atx(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Setext headings ("Memory" over "------") written as ATX ones ("## Memory"), as
    read --outline reads them (markdown.parse_sections): else the category was lost and its
    concepts became categories. Only a one-line paragraph is a heading so."""
    out: list[tuple[int, str]] = []
    for number, line in lines:
        under = _SETEXT.match(line)
        if under and out:
            above_number, above = out[-1]
            alone = len(out) < 2 or not out[-2][1].strip()
            if (alone and above.strip() and not above[:1].isspace()
                    and not _ITEM.match(above) and not _HEADING.match(above)):
                marks = "#" if under.group(1)[0] == "=" else "##"
                out[-1] = (above_number, f"{marks} {above.strip()}")
                continue
        out.append((number, line))
    return out


def _content_lines(body: str, first_line: int) -> list[tuple[int, str]]:
    """Body lines with their numbers, without fenced code and HTML comments."""
    kept: list[tuple[int, str]] = []
    fence: str | None = None
    in_comment = False
    for offset, line in enumerate(body.split("\n")):
        number = first_line + offset
        if in_comment:
            in_comment = "-->" not in line
            continue
        fenced, fence = fence_step(line, fence)
        if fenced or fence is not None:
            continue
        stripped = re.sub(r"<!--.*?-->", "", line)
        if "<!--" in stripped:
            in_comment = True
            stripped = stripped.split("<!--")[0]
        kept.append((number, stripped.rstrip()))
    return kept


# --------------------------------------------------------------------------- pages


class PageLike(Protocol):
    @property
    def filename(self) -> str: ...

    @property
    def frontmatter(self) -> dict[str, Any] | None: ...


@dataclass
class PageCounts:
    """Which pages name each node (by path), and the atomic pages the tree cannot place."""

    direct: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    unplaced: list[str] = field(default_factory=list)
    atomic: int = 0

    def total(self, node: TaxonomyNode) -> set[str]:
        """Pages of ``node`` and of everything below it."""
        pages: set[str] = set()
        for below in node.walk():
            pages |= self.direct.get(below.path, set())
        return pages


def count_pages(taxonomy: Taxonomy, pages: Iterable[PageLike]) -> PageCounts:
    """Count the atomic pages (those with kind, category or concepts) under each node."""
    counts = PageCounts()
    for page in pages:
        meta = atomic_meta(page.frontmatter)
        if not meta.is_atomic:
            continue
        counts.atomic += 1
        nodes = [n for c in meta.categories for n in taxonomy.find(c, categories=True)]
        nodes += [n for c in meta.concepts for n in taxonomy.find(c, categories=False)]
        for node in nodes:
            counts.direct.setdefault(node.path, set()).add(page.filename)
        if not nodes:
            counts.unplaced.append(page.filename)
    return counts


@dataclass(frozen=True)
class LintIssue:
    filename: str
    message: str

    def __str__(self) -> str:
        return f"{self.filename}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return {"filename": self.filename, "message": self.message}


def lint_pages(taxonomy: Taxonomy, pages: Iterable[PageLike]) -> list[LintIssue]:
    """Warnings for atomic pages: unknown categories and concepts, bad kind or date, no
    category; plus the taxonomy's own warnings (repeated names)."""
    issues = [LintIssue(taxonomy.filename, w.split(": ", 1)[1]) for w in taxonomy.warnings]
    for page in pages:
        meta = atomic_meta(page.frontmatter)
        if not meta.is_atomic:
            continue
        issues += [LintIssue(page.filename, problem) for problem in meta.problems]
        if meta.kind and not meta.categories:
            issues.append(LintIssue(page.filename, "has no category"))
        for value in (*meta.categories, *meta.concepts):
            if unmatchable(value):  # written by hand: `domain add` refuses these
                what = "category" if value in meta.categories else "concept"
                issues.append(LintIssue(page.filename, f"{what} {value!r} has no letters or "
                                        "digits: no search or taxonomy entry can match it"))
        for value in meta.categories:
            if unmatchable(value):
                continue
            if not taxonomy.find(value, categories=True):
                note = " (it is a concept there)" if taxonomy.find(value, categories=False) \
                    else ""
                issues.append(LintIssue(
                    page.filename, f"category {value!r} is not in {taxonomy.filename}{note}"
                ))
        for value in meta.concepts:
            if not unmatchable(value) and not taxonomy.find(value, categories=False):
                # As for categories: say when the name is there, as a top category.
                note = " (it is a category there)" if taxonomy.find(value, categories=True) \
                    else ""
                issues.append(LintIssue(
                    page.filename, f"concept {value!r} is not in {taxonomy.filename}{note}"
                ))
    return issues


def render_tree(
    taxonomy: Taxonomy, counts: PageCounts | None = None, *, depth: int | None = None
) -> str:
    """The tree as a nested Markdown list (with page counts when given), down to ``depth``."""
    lines: list[str] = []

    def visit(node: TaxonomyNode) -> None:
        if depth is not None and node.depth >= depth:
            return
        count = f" [{len(counts.total(node))}]" if counts is not None else ""
        lines.append(f"{'  ' * node.depth}- {node.label()}{count}")
        for child in node.children:
            visit(child)

    for root in taxonomy.roots:
        visit(root)
    return "\n".join(lines) + ("\n" if lines else "")
