"""What each progressive context level loads from a domain, and packing it under a budget.

ResearcherZero builds an agent's context from a domain in layers; deepfield names three levels:

* ``light``: human preferences, basic info, the taxonomy's tree (names and page counts);
* ``medium``: + main challenges, the concept network, an outline of every survey (headings and
  their first sentences; of all its parts when it was split) and a one-line stub per other
  atomic page (and per survey whose sections say nothing yet);
* ``deep``: the medium material; ``deepfield context`` adds research on the task to it.

Human preferences always come first and are the only block :func:`pack_blocks` truncates
rather than drops. Template guidance (HTML comments) and sections left empty are not loaded,
nor are superseded pages (``superseded_by`` set), which search hides too.
Blocks are in priority order, so packing keeps the most important ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import DeepfieldError, TaxonomyError
from ..markdown import first_sentences, parse_sections, split_sentences
from ..page import Page, derive_title
from ..read import OutlineEntry, outline, render_outline
from ..read_parts import outline_parts, part_names
from ..tokens import count_tokens
from .atomic import atomic_meta
from .domain import hidden_pages, later_parts, load_taxonomy, role_pages, whole_text
from .taxonomy import count_pages, render_tree

if TYPE_CHECKING:
    from ..field import Field
    from ..index import DocRow

__all__ = ["LEVELS", "LevelBlock", "OmittedBlock", "level_blocks", "pack_blocks"]

LEVELS: tuple[str, ...] = ("light", "medium", "deep")
SURVEY_DEPTH = 2
SURVEY_SENTENCES = 2
TRUNCATED = "[… cut here to fit the token budget]"
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_PART_SUFFIX = re.compile(r" \(part \d+ of \d+\)$")


@dataclass(frozen=True)
class LevelBlock:
    """One piece of level material: a page's text (or an outline, tree or stub of it)."""

    label: str
    filename: str
    text: str
    layer: str
    """basic-context | cognition | alignment | atomic"""
    required: bool
    """Kept even over budget (cut at line or sentence boundaries) instead of dropped."""
    whole: bool = True
    """The block says all its page does (the page's text, the taxonomy's tree), so research
    quoting that page would repeat it; False for outlines, stubs and cut blocks."""

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "filename": self.filename, "text": self.text,
                "layer": self.layer, "required": self.required}


@dataclass(frozen=True)
class OmittedBlock:
    """A block pack_blocks left out or cut, and why."""

    label: str
    filename: str
    reason: str
    tokens: int
    """The block's full size in tokens."""

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "filename": self.filename, "reason": self.reason,
                "tokens": self.tokens}


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise DeepfieldError(f"unknown context level {level!r}", "use light, medium or deep")
    return level


def level_blocks(field: Field, level: str) -> list[LevelBlock]:
    """The material of ``level`` for ``field`` in priority order (see the module docstring).

    A field without the domain's pages yields only what it has (possibly nothing)."""
    check_level(level)
    # Superseded pages stay out of context (as out of search): their successors speak for them.
    every = field.pages()
    hidden = hidden_pages(every)
    docs = [d for d in every if d.filename not in hidden]
    roles = role_pages(field, docs)
    blocks: list[LevelBlock] = []

    def page_block(role: str, label: str, layer: str, required: bool = False) -> None:
        filename = roles.get(role)
        text = clean_page(_read(field, filename)) if filename else None
        if filename and text:
            blocks.append(LevelBlock(label, filename, text, layer, required))

    page_block("human-preference", "Human preferences", "alignment", required=True)
    page_block("basic-info", "Basic info", "basic-context")
    tree = _taxonomy_block(field, docs)
    if tree is not None:
        blocks.append(tree)
    if level == "light":
        return blocks
    page_block("main-challenge", "Main challenges", "cognition")
    page_block("network", "Concept network", "cognition")
    spec = set(roles.values())
    parts = later_parts(docs)
    atomic = [(d, atomic_meta(d.frontmatter)) for d in docs if d.filename not in spec]
    atomic = [(d, m) for d, m in atomic if m.is_atomic and d.filename not in parts]
    atomic.sort(key=lambda pair: (-_date_rank(pair[1].date), pair[0].filename))
    outlined: set[str] = set()
    for doc, _meta in [(d, m) for d, m in atomic if m.kind == "survey"]:
        text = _survey_outline(field, doc)
        if text:
            outlined.add(doc.filename)
            title = _PART_SUFFIX.sub("", doc.title)
            blocks.append(LevelBlock(f"Survey outline: {title}", doc.filename, text,
                                     "cognition", False, whole=False))
    # A survey whose sections say nothing yet is still named, as a stub.
    for doc, meta in [(d, m) for d, m in atomic if d.filename not in outlined]:
        blocks.append(LevelBlock(f"Atomic page: {doc.title}", doc.filename,
                                 _stub(field, doc, meta), "atomic", False, whole=False))
    return blocks


def _read(field: Field, filename: str) -> str:
    """The page's text, all its parts when it was split (a long main-challenge page)."""
    return whole_text(field.path, filename)


def clean_page(text: str) -> str:
    """A page's body without frontmatter, HTML comments and headings that head nothing."""
    body = _COMMENT.sub("", Page.parse(text).body)
    sections = parse_sections(body)
    has_text = [any(line.strip() for _, line in s.text_lines) for s in sections]
    lines: list[str] = []
    for i, section in enumerate(sections):
        if section.level:
            subtree = [has_text[i]]
            for j in range(i + 1, len(sections)):
                if sections[j].level <= section.level:
                    break
                subtree.append(has_text[j])
            if not any(subtree):
                continue
            lines.append(f"{'#' * section.level} {section.title}")
        lines += [line for _, line in section.text_lines]
    cleaned = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    # A title heading alone says nothing.
    return "" if all(not ln.strip() or ln.lstrip().startswith("#")
                     for ln in cleaned.split("\n")) else cleaned + "\n"


def _taxonomy_block(field: Field, docs: Sequence[DocRow]) -> LevelBlock | None:
    try:
        taxonomy = load_taxonomy(field, docs)
    except TaxonomyError as exc:
        filename = role_pages(field, docs)["taxonomy"]
        page = Page.parse(_read(field, filename))
        # The empty heading that broke the tree would print as a bare "-".
        entries = [e for e in outline(page, depth=6, sentences=0) if e.level and e.title.strip()]
        text = "\n".join(f"{'  ' * (e.level - 1)}- {e.title}" for e in entries)
        note = f"(taxonomy headings only: {exc.message})"
        return LevelBlock("Taxonomy", filename, f"{note}\n{text}\n", "basic-context", False,
                          whole=False)
    if taxonomy is None or not taxonomy.roots:
        return None
    parts = later_parts(docs)
    counts = count_pages(taxonomy, [d for d in docs
                                    if d.filename != taxonomy.filename and d.filename not in parts])
    text = "Categories and their concepts; [n] = atomic pages filed under each.\n\n"
    return LevelBlock("Taxonomy", taxonomy.filename, text + render_tree(taxonomy, counts),
                      "basic-context", False)


def _survey_outline(field: Field, doc: DocRow) -> str:
    """Headings and first sentences of a survey (of all its parts when it was split); "" when
    no section says anything (an unfilled skeleton: its bare headings are no material)."""
    page = Page.parse((field.path / doc.filename).read_text("utf-8", "replace"))  # one part
    names = part_names(doc.filename, page)
    if names:
        entries, _missing = outline_parts(doc.filename, page, names, field.load,
                                          depth=SURVEY_DEPTH, sentences=SURVEY_SENTENCES)
    else:
        entries = outline(page, depth=SURVEY_DEPTH, sentences=SURVEY_SENTENCES)
    entries = _said(entries)
    if not entries:
        return ""
    title = _PART_SUFFIX.sub("", doc.title)
    return render_outline(title or derive_title(page), doc.summary, entries, names or None)


def _said(entries: list[OutlineEntry]) -> list[OutlineEntry]:
    """The entries that have sentences or head deeper entries that do (clean_page's rule)."""
    kept: list[OutlineEntry] = []
    for i, entry in enumerate(entries):
        below = [entry]
        for later in entries[i + 1:]:
            if entry.level and later.level <= entry.level:
                break
            below.append(later)
        if any(e.sentences for e in below) if entry.level else entry.sentences:
            kept.append(entry)
    return kept


def _stub(field: Field, doc: DocRow, meta: Any) -> str:
    """``- [title](file) — kind · category · concepts · date: one-line summary``."""
    facts = [meta.kind or "", ", ".join(meta.categories), ", ".join(meta.concepts),
             meta.date or ""]
    line = f"- [{_PART_SUFFIX.sub('', doc.title)}]({doc.filename})"  # a split page: once
    described = " · ".join(f for f in facts if f)
    summary = doc.summary or _first_sentence(field, doc.filename)
    if described:
        line += f" — {described}"
    if summary:
        line += f": {summary}"
    return line + "\n"


def _first_sentence(field: Field, filename: str) -> str:
    page = Page.parse(_read(field, filename))
    for section in parse_sections(_COMMENT.sub("", page.body)):
        found = first_sentences(section, 1)
        if found:
            return found[0]
    return ""


def _date_rank(date: str | None) -> int:
    """Newest first; undated pages last."""
    digits = re.sub(r"\D", "", date or "")[:8]
    return int(digits.ljust(8, "0")) if digits else 0


# --------------------------------------------------------------------------- packing


def pack_blocks(
    blocks: Sequence[LevelBlock],
    budget_tokens: int | None,
    count_tokens: Callable[[str], int] = count_tokens,
    *,
    per_block: int = 0,
) -> tuple[list[LevelBlock], list[OmittedBlock]]:
    """Keep whole blocks, in order, while they fit ``budget_tokens`` (None: no limit).

    A block that does not fit is left out and later, smaller ones may still fit; a required
    block is instead cut at a line (or, within a line, a sentence) boundary and marked. Each
    kept block also costs ``per_block`` tokens (the caller's heading for it). Returns (kept,
    omitted), omitted naming every block left out or cut and why.
    """
    if budget_tokens is None:
        return list(blocks), []
    left = budget_tokens
    kept: list[LevelBlock] = []
    omitted: list[OmittedBlock] = []
    for block in blocks:
        size = count_tokens(block.text)
        if size + per_block <= left:
            kept.append(block)
            left -= size + per_block
            continue
        room = left - per_block - count_tokens(TRUNCATED)
        cut = _truncate(block.text, room, count_tokens) if block.required and room > 0 else ""
        if cut:
            text = f"{cut}\n{TRUNCATED}\n"
            kept.append(replace(block, text=text, whole=False))
            left -= count_tokens(text) + per_block
            omitted.append(OmittedBlock(
                block.label, block.filename,
                f"cut to fit the budget: {count_tokens(cut)} of {size} tokens kept", size,
            ))
        else:
            omitted.append(OmittedBlock(
                block.label, block.filename,
                f"over the budget: needs {size} tokens, {max(left - per_block, 0)} left", size,
            ))
    return kept, omitted


def _truncate(text: str, limit: int, count: Callable[[str], int]) -> str:
    """The longest prefix of whole lines, then whole sentences, within ``limit`` tokens."""
    kept: list[str] = []
    for line in text.rstrip("\n").split("\n"):
        if count("\n".join([*kept, line])) <= limit:
            kept.append(line)
            continue
        partial: list[str] = []
        for sentence in split_sentences(line):
            if count("\n".join([*kept, " ".join([*partial, sentence])])) > limit:
                break
            partial.append(sentence)
        if partial:
            kept.append(" ".join(partial))
        break
    return "\n".join(kept).strip()
