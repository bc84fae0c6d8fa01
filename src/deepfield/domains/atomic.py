"""Atomic knowledge pages of a research domain: their frontmatter keys, checked and read.

An atomic page is one method, benchmark, survey or blog post, filed in a domain field with

    kind: method            # method | benchmark | survey | blog
    category: Memory        # a string or a list (a taxonomy category)
    concepts: [RAG, GraphRAG]
    source: https://arxiv.org/abs/2501.00001   # a URL, a DOI or an arXiv id
    date: '2025-01'         # YYYY, YYYY-MM, YYYY-MM-DD or an ISO 8601 datetime

ResearcherZero's spellings are read too (``type`` for ``kind``, ``categories`` for
``category``, ``concept`` for ``concepts``), so folders it wrote work unchanged. Writing
(:func:`atomic_frontmatter`) is strict and raises; reading (:func:`atomic_meta`) never raises:
whatever is wrong becomes a lint warning. :class:`Filters` is what search uses to keep only
pages with a given kind, category or concept.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidMetadataError
from ..markdown import plain

__all__ = [
    "KINDS", "AtomicMeta", "Filters", "atomic_frontmatter", "atomic_meta", "entry_name",
    "name_key", "name_keys", "part_keys", "unmatchable",
]

KINDS: tuple[str, ...] = ("method", "benchmark", "survey", "blog")
KIND_KEYS: tuple[str, ...] = ("kind", "type")
OWN_KINDS: frozenset[str] = frozenset({"session"})
"""Kinds deepfield itself writes on pages that are not atomic knowledge (`remember` files a
conversation as ``kind: session``): no lint warning, no count, no stub."""
CATEGORY_KEYS: tuple[str, ...] = ("category", "categories")
CONCEPT_KEYS: tuple[str, ...] = ("concepts", "concept")

_DATE = re.compile(r"^\d{4}(?:-(?:0[1-9]|1[0-2])(?:-(?:0[1-9]|[12]\d|3[01])(?:[T ].+)?)?)?$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://[^\s/]+\S*$", re.IGNORECASE)
_DOI = re.compile(r"^(?:doi:\s*)?10\.\d{4,9}/\S+$", re.IGNORECASE)
_ARXIV = re.compile(r"^arxiv:\s*\S+$", re.IGNORECASE)
# A bare arXiv identifier is one too: 2404.16130(v2) since 2007, hep-th/9901001 before.
_ARXIV_ID = re.compile(r"^(?:\d{4}\.\d{4,5}|[a-z-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?$")
_PATH_SEP = re.compile(r"\s*(?:>|/)\s*")
_PUNCT = re.compile(r"[\s\-_–—·.,;:'\"`*()\[\]]+")
_CHECKBOX = re.compile(r"^\[[ xX]\]\s+")
# A full-width colon cuts with or without a space: CJK text puts none after it, so
# "检索增强生成（RAG）：把记忆当作检索" is named 检索增强生成, not the whole line.
_DESCRIPTION = re.compile(r"\s+[—–-]\s+|:\s|:$|\s*：")
_ALIASES = re.compile(r"[(（]([^()（）]*)[)）]")


def name_key(text: str) -> str:
    """How category and concept names are compared: case, width, spaces, hyphens and
    punctuation do not matter (``Retrieval-Augmented generation`` = ``retrieval augmented
    Generation``)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _PUNCT.sub("", folded)


def entry_name(text: str) -> tuple[str, tuple[str, ...]]:
    """(name, aliases) of a taxonomy entry or a page's category or concept value: the text up
    to ``: ``, a full-width ``：``, `` — `` or `` - `` (the rest is a description), names in
    parentheses being
    aliases, so ``Retrieval-Augmented Generation (RAG): memory as retrieval`` is named
    ``Retrieval-Augmented Generation`` and also ``RAG``. The name is "" when there is none."""
    flat = plain(_CHECKBOX.sub("", text.strip())).replace("[[", "").replace("]]", "").strip()
    cut = _DESCRIPTION.search(flat)
    head = flat[: cut.start()] if cut and cut.start() > 0 else flat
    aliases: list[str] = []
    for group in _ALIASES.findall(head):
        split = re.split(r"[,，/、;]", group)
        if any(len(alias.strip()) == 1 for alias in split):
            split = [group]  # "(I/O)" is one alias, not the letters I and O
        for alias in split:
            alias = alias.strip()
            if alias and not alias.isdigit():  # "(12)": a page count copied from our output
                aliases.append(alias)
    name = " ".join(_ALIASES.sub(" ", head).split()).strip(" *_`")
    name = re.sub(r"\s*\[\d+\]$", "", name)  # "Memory [12]": a tree pasted from our output
    return name, tuple(aliases)


def part_keys(part: str) -> set[str]:
    """Keys one name (or one segment of a path) matches: the whole text and, read as the
    taxonomy reads its entries, its name and aliases. Shared by the taxonomy and the search
    filters, so "GraphRAG: the graph one" is GraphRAG to both."""
    name, aliases = entry_name(part)
    return {name_key(n) for n in (part, name, *aliases)} - {""}


def name_keys(value: str) -> set[str]:
    """Keys a page value matches: the whole value and, for a path ``A > B``, each segment."""
    keys = part_keys(value)
    if _PATH_SEP.search(value):
        for part in _PATH_SEP.split(value):
            keys |= part_keys(part)
    return keys


def unmatchable(value: str) -> bool:
    """A value no filter or taxonomy entry can name (``*``, ``--``): no letters or digits."""
    return not name_keys(value)


def _strings(value: Any) -> list[str]:
    """A YAML value read as a list of names: a string, or a list of scalars."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value).strip()]


def _first(frontmatter: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if frontmatter.get(key) is not None:
            return frontmatter[key]
    return None


@dataclass(frozen=True)
class AtomicMeta:
    """What a page's frontmatter says about it as atomic knowledge (aliases resolved)."""

    kind: str | None
    categories: tuple[str, ...]
    concepts: tuple[str, ...]
    source: str | None
    date: str | None
    problems: tuple[str, ...]
    """Why the values are not what atomic pages take (lint warnings), empty when fine."""

    @property
    def is_atomic(self) -> bool:
        return bool(self.kind or self.categories or self.concepts)


def atomic_meta(frontmatter: Mapping[str, Any] | None) -> AtomicMeta:
    """Read the atomic keys of a page; never raises (problems are listed instead)."""
    fm = frontmatter or {}
    kinds = _strings(_first(fm, KIND_KEYS))
    kind = kinds[0].lower() if kinds else None
    if kind in OWN_KINDS:
        kind = None
    if kind not in KINDS and fm.get("kind") is None:
        # `type` is read for ResearcherZero, but other tools use it for their own kinds
        # (basic-memory's `type: note`): only one of ours makes such a page atomic.
        kind = None
    problems: list[str] = []
    if kind is not None and kind not in KINDS:
        problems.append(f"kind {kinds[0]!r} is not one of {', '.join(KINDS)}")
    date = _strings(fm.get("date"))
    if date and not _DATE.match(date[0]):
        problems.append(f"date {date[0]!r} is not YYYY, YYYY-MM or YYYY-MM-DD")
    source = _strings(fm.get("source"))
    return AtomicMeta(
        kind=kind,
        categories=tuple(_strings(_first(fm, CATEGORY_KEYS))),
        concepts=tuple(_strings(_first(fm, CONCEPT_KEYS))),
        source=source[0] if source else None,
        date=date[0] if date else None,
        problems=tuple(problems),
    )


def _text(value: object, what: str) -> str:
    """``value`` when it is text; InvalidMetadataError naming ``what`` otherwise (a number or
    None failed deep inside with an AttributeError)."""
    if not isinstance(value, str):
        raise InvalidMetadataError(f"{what} must be text, not {type(value).__name__}")
    return value


def _names_of(value: object, what: str) -> list[str]:
    """One name (a string) or several (a list or tuple of strings), as text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple):
        raise InvalidMetadataError(
            f"{what} must be a name or a list of names, not {type(value).__name__}")
    return [_text(item, f"a {what} name") for item in value]


def check_kind(kind: str) -> str:
    value = _text(kind, "the kind").strip().lower()
    if value not in KINDS:
        raise InvalidMetadataError(
            f"kind {kind!r} is not one of {', '.join(KINDS)}",
            f"use --kind {' | '.join(KINDS)}",
        )
    return value


def check_date(date: str | int) -> str:
    # A year as a number (date=2024) is that year; other non-text values are refused.
    value = (str(date) if isinstance(date, int) and not isinstance(date, bool)
             else _text(date, "the date")).strip()
    if not _DATE.match(value) or not _real_day(value):
        raise InvalidMetadataError(
            f"date {date!r} is not a date",
            "write it as YYYY, YYYY-MM or YYYY-MM-DD, e.g. 2025-03 or 2025-03-14",
        )
    return value


def _real_day(value: str) -> bool:
    """2020-02-30 has the shape of a date but is none."""
    if len(value) < 10:
        return True
    try:
        dt.date.fromisoformat(value[:10])
    except ValueError:
        return False
    return True


def check_source(source: str) -> str:
    value = _text(source, "the source").strip()
    if not (_URL.match(value) or _DOI.match(value) or _ARXIV.match(value)
            or _ARXIV_ID.match(value)):
        raise InvalidMetadataError(
            f"source {source!r} is not a URL, DOI or arXiv id",
            "give e.g. https://arxiv.org/abs/2501.00001, 10.1145/3295500 or arXiv:2501.00001",
        )
    return value


def _names(values: Iterable[str], what: str) -> list[str]:
    names: list[str] = []
    for value in values:
        text = " ".join(str(value).split())
        if not text:
            raise InvalidMetadataError(f"an empty {what} name was given")
        if len(text) > 200 or "\n" in str(value):
            raise InvalidMetadataError(f"{what} {text[:40]!r}… is not a short name")
        if unmatchable(text):
            raise InvalidMetadataError(
                f"{what} {text!r} has no letters or digits, so no search or taxonomy can match "
                "it", f"give the {what}'s name"
            )
        # "Memory" and "memory" are one name to every filter and taxonomy: written once.
        if all(name_key(text) != name_key(kept) for kept in names):
            names.append(text)
    return names


def atomic_frontmatter(
    kind: str,
    *,
    category: str | Sequence[str] | None = None,
    concepts: Sequence[str] = (),
    source: str | None = None,
    date: str | None = None,
) -> dict[str, Any]:
    """The frontmatter keys of a new atomic page, checked (InvalidMetadataError otherwise).

    ``category`` is written as a string when there is one and as a list when there are several;
    ``concepts`` is always a list.
    """
    fm: dict[str, Any] = {"kind": check_kind(kind)}
    categories = _names(_names_of(category, "category"), "category")
    if categories:
        fm["category"] = categories[0] if len(categories) == 1 else categories
    # One concept as a string is that concept, not its letters (as category= takes it).
    names = _names(_names_of(concepts, "concept"), "concept")
    if names:
        fm["concepts"] = names
    if source is not None:
        fm["source"] = check_source(source)
    if date is not None:
        fm["date"] = check_date(date)
    return fm


@dataclass(frozen=True)
class Filters:
    """Search filters on page frontmatter: values of one option are OR-ed, options AND-ed.

    ``kind`` matches ``kind`` (or ``type``); ``category`` matches ``category``/``categories``
    and ``concept`` matches ``concepts``/``concept``, by :func:`name_key` (so case, hyphens and
    spaces do not matter) and by any segment of a path value such as ``Memory > Retrieval``.
    In a field with a taxonomy, a category also finds pages filed under its sub-categories or
    tagged with its concepts, and a concept finds pages tagged with narrower concepts.
    """

    kind: tuple[str, ...] = ()
    category: tuple[str, ...] = ()
    concept: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for option in ("kind", "category", "concept"):
            # Filters(category="Memory"): one name, not its letters; a number is refused.
            object.__setattr__(self, option, tuple(_names_of(getattr(self, option), option)))
        for kind in self.kind:
            check_kind(kind)
        for option, values in (("category", self.category), ("concept", self.concept)):
            for value in values:
                if unmatchable(value):
                    # Said, not an empty result: no page can be filed under such a name.
                    raise InvalidMetadataError(
                        f"{option} {value!r} has no letters or digits, so it matches no page",
                        f"give the {option}'s name")

    @classmethod
    def of(
        cls,
        kind: str | Iterable[str] | None = None,
        category: str | Iterable[str] | None = None,
        concept: str | Iterable[str] | None = None,
    ) -> Filters | None:
        """Filters from option values (None when nothing is asked for)."""

        def values(value: str | Iterable[str] | None) -> tuple[str, ...]:
            if value is None:
                return ()
            if isinstance(value, bytes | dict) or not isinstance(value, str | Iterable):
                raise InvalidMetadataError(
                    f"a filter is a name or a list of names, not {type(value).__name__}")
            items = [value] if isinstance(value, str) else list(value)
            return tuple(v.strip() for v in (_text(i, "a filter name") for i in items)
                         if v.strip())

        made = cls(values(kind), values(category), values(concept))
        return made if made else None

    def __bool__(self) -> bool:
        return bool(self.kind or self.category or self.concept)

    def matches(
        self,
        frontmatter: Mapping[str, Any] | None,
        below: tuple[set[str], set[str]] | None = None,
    ) -> bool:
        """Whether a page passes. ``below`` (from the field's taxonomy) holds the names under
        the wanted categories and under the wanted concepts: a page filed under a sub-category
        or tagged with a concept of a wanted category passes the category filter, and a page
        tagged with a narrower concept passes the concept filter."""
        meta = atomic_meta(frontmatter)
        if self.kind and meta.kind not in {k.strip().lower() for k in self.kind}:
            return False
        under_categories, under_concepts = below or (set(), set())
        if self.category and not (
            _overlap(self.category, meta.categories)
            or _has(under_categories, (*meta.categories, *meta.concepts))
        ):
            return False
        return not (self.concept and not (
            _overlap(self.concept, meta.concepts) or _has(under_concepts, meta.concepts)
        ))

    def to_json(self) -> dict[str, list[str]]:
        return {"kind": list(self.kind), "category": list(self.category),
                "concept": list(self.concept)}


def _has(keys: set[str], values: Sequence[str]) -> bool:
    return bool(keys) and any(name_keys(value) & keys for value in values)


def _overlap(wanted: Sequence[str], values: Sequence[str]) -> bool:
    have: set[str] = set()
    for value in values:
        have |= name_keys(value)
    return any(name_key(w) in have for w in wanted)
