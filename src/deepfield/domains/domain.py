"""Research domains on top of fields: create one, file atomic pages, read its taxonomy.

A domain is a field whose well-known pages (templates.py) are found by their ``role`` key, or
failing that by their usual filename, so a folder written by hand or by another tool works as
long as it uses one or the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..archive import part_names as split_part_names
from ..errors import (
    FieldExistsError,
    InvalidMetadataError,
    InvalidNameError,
    InvalidPageError,
    PageConflictError,
    PageNotFoundError,
    TaxonomyError,
)
from ..manage.supersede import hidden_pages, is_superseded
from ..markdown import is_parts_footer
from ..page import Page, check_name
from .atomic import KINDS, atomic_frontmatter, atomic_meta
from .taxonomy import (
    LintIssue,
    PageCounts,
    Span,
    Taxonomy,
    count_pages,
    lint_pages,
    parse_taxonomy,
)
from .templates import (
    ALWAYS_LOAD_KEY,
    BY_ROLE,
    KIND_BODIES,
    LAYER_KEY,
    ROLE_KEY,
    ROLES,
    WELL_KNOWN,
    intro_text,
)

if TYPE_CHECKING:
    from ..field import Field, WriteResult
    from ..index import DocRow
    from ..store import Store

__all__ = [
    "DomainCreated", "TaxonomyReport", "add_atomic", "create_domain", "domain_summary",
    "hidden_pages", "is_superseded", "later_parts", "load_taxonomy", "role_pages",
    "taxonomy_report", "whole_text", "whole_text_spans",
]

MAX_NAME = 100
"""Longest domain name: the folder name must stay well under the file system's 255 bytes."""


@dataclass
class DomainCreated:
    field: str
    path: str
    created: list[str]
    kept: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "path": self.path, "created": self.created,
                "kept": self.kept}


def role_pages(field: Field, docs: Sequence[DocRow] | None = None) -> dict[str, str]:
    """role → filename of the domain's well-known pages that exist.

    A page's ``role`` key wins; a page at the usual filename counts unless it names another
    role. A superseded page counts only when no current page has its role."""
    rows = list(field.pages() if docs is None else docs)
    # Every part of a split page carries its role key: the first part stands for the page
    # (whole_text reads the rest), else "taxonomy-part-2.md" sorted first and was taken.
    parts = later_parts(rows)
    rows = [doc for doc in rows if doc.filename not in parts]
    hidden = hidden_pages(rows)
    # Stable: current pages first and, among pages claiming one role, the one at the usual
    # filename (a second "role: taxonomy" page sorting before taxonomy.md took its place).
    usual = {spec.filename for spec in WELL_KNOWN}
    rows.sort(key=lambda doc: (doc.filename in hidden, doc.filename not in usual))
    found: dict[str, str] = {}
    for doc in rows:
        role = (doc.frontmatter or {}).get(ROLE_KEY)
        if isinstance(role, str) and role in BY_ROLE and role not in found:
            found[role] = doc.filename
    names = {doc.filename: doc for doc in rows}
    for spec in WELL_KNOWN:
        row = names.get(spec.filename)
        if spec.role in found or row is None:
            continue
        if (row.frontmatter or {}).get(ROLE_KEY) in (None, spec.role):
            found[spec.role] = spec.filename
    return found


def later_parts(docs: Sequence[DocRow]) -> set[str]:
    """Filenames of the parts after the first of split pages whose first part is listed too:
    a page over 8 KB is stored in parts that each carry its frontmatter, and counted, linted
    or stubbed once per part it read as several pages (a split survey was two surveys)."""
    listed = {doc.filename for doc in docs}
    later: set[str] = set()
    for doc in docs:
        if not (doc.frontmatter or {}).get("split_from"):
            continue
        names = split_part_names(Page(body="", frontmatter=doc.frontmatter), doc.filename)
        if names and len(names) > 1 and names[0] in listed and doc.filename != names[0]:
            later.add(doc.filename)
    return later


def create_domain(
    store: Store, name: str, *, description: str | None = None, exist_ok: bool = False
) -> DomainCreated:
    """Create field ``name`` with the domain's index.md and well-known pages.

    With ``exist_ok`` an existing field is adopted: missing pages are added, pages already
    there (by role or filename) are kept as they are.
    """
    check_name(name, "domain")
    _require_words(description, "the description", "--description")
    if len(name) > MAX_NAME:
        raise InvalidNameError(
            f"domain name {name[:40]!r}… is {len(name)} characters long",
            f"use at most {MAX_NAME} characters",
        )
    try:
        field = store.create_field(name, intro=intro_text(name, description), exist_ok=exist_ok)
    except FieldExistsError as exc:
        raise FieldExistsError(
            exc.message, "choose another name, or add the domain's pages to it with --adopt"
        ) from None
    present = role_pages(field)
    created: list[str] = []
    kept: list[str] = []
    for spec in WELL_KNOWN:
        if spec.role in present:
            kept.append(present[spec.role])
            continue
        keys: dict[str, Any] = {LAYER_KEY: spec.layer, ROLE_KEY: spec.role}
        if spec.always_load:
            keys[ALWAYS_LOAD_KEY] = True
        # The usual filename may hold a page of another role (or a name that is no page):
        # the missing page then takes a free name and is found by its role key. Reporting
        # that file as "kept" left the domain without the page, and --adopt could not help.
        taken = (field.path / spec.filename).exists()
        result = field.add(
            spec.title, spec.render_body(name, description), summary=spec.summary,
            name=None if taken else spec.filename[:-3], frontmatter=keys,
        )
        created += result.filenames
    return DomainCreated(field.name, str(field.path), created, kept)


def load_taxonomy(field: Field, docs: Sequence[DocRow] | None = None) -> Taxonomy | None:
    """The domain's parsed taxonomy, or None when it has no taxonomy page (TaxonomyError when
    the page cannot be read as a tree)."""
    filename = role_pages(field, docs).get("taxonomy")
    if filename is None:
        return None
    text, spans = whole_text_spans(field.path, filename)
    return parse_taxonomy(text, filename, spans)


def whole_text(folder: Path, filename: str) -> str:
    """A page's text; for the first part of a page split into parts, followed by the bodies
    of its other parts in order, without the "Part 1 of 2 · next" footers: a taxonomy (or a
    main-challenge page) over 8 KB is one page to read, not its first 8 KB."""
    return whole_text_spans(folder, filename)[0]


def whole_text_spans(folder: Path, filename: str) -> tuple[str, list[Span]]:
    """:func:`whole_text` and where its lines come from: a :data:`Span` per part, so a line
    of the joined text can be named by its part file and that file's line."""
    text = (folder / filename).read_text("utf-8", "replace")
    page = Page.parse(text)
    names = split_part_names(page, filename) or []
    spans: list[Span] = [(1, filename, 1)]
    if len(names) < 2 or names[0] != filename:
        return text, spans
    pieces = [_without_footer(text).rstrip("\n")]
    joined_line = pieces[0].count("\n") + 3  # the next piece's first line, after a blank one
    for name in names[1:]:
        try:
            other = Page.parse((folder / name).read_text("utf-8", "replace"))
        except OSError:
            continue  # a part deleted by hand: the rest still reads
        pieces.append(_without_footer(other.body).rstrip("\n"))
        spans.append((joined_line, name, other.body_line))
        joined_line += pieces[-1].count("\n") + 2
    return "\n\n".join(pieces) + "\n", spans


def _without_footer(text: str) -> str:
    head, rule, tail = text.rstrip().rpartition("\n---\n")
    return head if rule and is_parts_footer(tail) else text


@dataclass
class TaxonomyReport:
    field: str
    taxonomy: Taxonomy
    counts: PageCounts
    issues: list[LintIssue] = dc_field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "taxonomy": self.taxonomy.filename,
            "tree": [root.to_json(self.counts) for root in self.taxonomy.roots],
            "atomic_pages": self.counts.atomic,
            "unplaced": self.counts.unplaced,
            "issues": [issue.to_json() for issue in self.issues],
        }


def taxonomy_report(field: Field) -> TaxonomyReport:
    """The tree with counts of the current (not superseded) atomic pages, and the lint of
    all of them."""
    docs = field.pages()
    taxonomy = load_taxonomy(field, docs)
    if taxonomy is None:
        raise PageNotFoundError(
            f"field {field.name!r} has no taxonomy page (taxonomy.md or a page with "
            "`role: taxonomy`)",
            f"add the domain's pages with `deepfield domain new {field.name} --adopt`",
        )
    parts = later_parts(docs)
    pages = [d for d in docs if d.filename != taxonomy.filename and d.filename not in parts]
    hidden = hidden_pages(docs)
    rivals = [LintIssue(d.filename, f"also has `role: taxonomy`; {taxonomy.filename} is the "
                        "domain's taxonomy (give this page another role, or merge the two)")
              for d in pages if (d.frontmatter or {}).get(ROLE_KEY) == "taxonomy"
              and d.filename not in hidden]
    current = [d for d in pages if d.filename not in hidden]  # as search counts them
    return TaxonomyReport(
        field.name, taxonomy, count_pages(taxonomy, current),
        rivals + lint_pages(taxonomy, pages),
    )


def add_atomic(
    field: Field,
    title: str,
    kind: str,
    *,
    category: str | Sequence[str] | None = None,
    concepts: Sequence[str] = (),
    source: str | None = None,
    date: str | None = None,
    text: str | None = None,
    summary: str | None = None,
    name: str | None = None,
) -> WriteResult:
    """File an atomic knowledge page with checked frontmatter (InvalidMetadataError).

    Without ``text`` the page gets the section skeleton of its kind. Categories and concepts
    the taxonomy does not know are written anyway and reported in ``warnings``.
    """
    _require_words(title, "the title", "--title")
    _require_words(summary, "the summary", "--summary")
    _require_words(name, "the filename", "--name")
    filename = f"{name.removesuffix('.md')}.md" if name is not None else None
    if filename is not None and (field.path / filename).exists():
        # A new atomic page: replacing a page by name (a well-known page, another paper)
        # is `deepfield write`'s job, which keeps the page's uuid and history.
        well_known = any(spec.filename == filename for spec in WELL_KNOWN)
        what = "a well-known page of the domain" if well_known else "a page"
        raise PageConflictError(f"{filename} is already {what} in {field.name}",
                                "choose another --name, or edit that page")
    keys = atomic_frontmatter(kind, category=category, concepts=concepts, source=source,
                              date=date)
    if text is not None and not isinstance(text, str):
        raise InvalidPageError(f"the text must be a str, not {type(text).__name__}",
                               "decode bytes first, e.g. data.decode('utf-8')")
    if text and text.lstrip("\ufeff").startswith("---"):
        parsed = Page.parse(text)
        closed = any(line.strip() in ("---", "...") for line in text.split("\n")[1:])
        if parsed.frontmatter is not None or (parsed.frontmatter_error and closed):
            # It would be stored as body text under the page's own frontmatter: a second
            # "---" block whose keys (a ResearcherZero page's type, source…) nothing reads.
            raise InvalidPageError(
                "the text starts with a frontmatter block; `domain add` writes the "
                "frontmatter from its options",
                "give the body alone (with --kind, --category, --concept, --source, --date), "
                "or store the whole page as it is with `deepfield write FIELD -`")
    body = text if text and text.strip() else f"# {title}\n\n{KIND_BODIES[keys['kind']]}"
    result = field.add(title, body, summary=summary, name=name, frontmatter=keys)
    written = result.filenames[0]
    if result.pages[0].action == "unchanged":
        # The stored page was kept as it is: check its keys, not the ones asked for (a
        # re-add without --category is no page without a category).
        stored = Page.parse((field.path / written).read_text("utf-8", "replace")).frontmatter
        keys = stored or {}
    try:
        taxonomy = load_taxonomy(field)
    except TaxonomyError as exc:
        result.warnings.append(f"categories not checked: {exc.message}")
        return result
    if taxonomy is None:
        if keys.get("category") or keys.get("concepts"):
            # Said, as an unknown name would be: nothing checked them.
            result.warnings.append(
                f"categories and concepts not checked: {field.name} has no taxonomy page "
                f"(make it a domain with `deepfield domain new {field.name} --adopt`)")
    else:
        # Only this page's problems: the taxonomy's own warnings belong to `taxonomy --lint`.
        quiet = Taxonomy(taxonomy.filename, taxonomy.roots)
        page = _PageRef(written, keys)
        result.warnings += [str(issue) for issue in lint_pages(quiet, [page])]
    return result


def _require_words(value: str | None, what: str, option: str) -> None:
    """Refuse an empty text option: left to ``field.add``, an empty title becomes the
    heading ``# `` of a page named after its first line, and an empty summary or filename
    is silently dropped."""
    if value is not None and not isinstance(value, str):
        raise InvalidMetadataError(f"{what} must be text, not {type(value).__name__}")
    if value is not None and not value.strip():
        optional = "" if option == "--title" else ", or leave it out"
        raise InvalidMetadataError(f"{what} is empty", f"give {option} a few words{optional}")


@dataclass(frozen=True)
class _PageRef:
    filename: str
    frontmatter: dict[str, Any] | None


def domain_summary(field: Field) -> dict[str, Any]:
    """What ``domain ls`` shows: the spec pages present and missing, atomic pages by kind."""
    docs = field.pages()
    present = role_pages(field, docs)
    kinds = dict.fromkeys(KINDS, 0)
    other = 0
    # Counted as the taxonomy counts them: once per split page, superseded pages left out.
    skip = later_parts(docs) | hidden_pages(docs)
    for doc in docs:
        if doc.filename in skip:
            continue
        kind = atomic_meta(doc.frontmatter).kind
        if kind in kinds:
            kinds[kind] += 1
        elif kind is not None:
            other += 1
    return {
        "field": field.name,
        "pages": present,
        "missing": [role for role in ROLES if role not in present],
        "atomic": kinds,
        "atomic_other_kind": other,
        "is_domain": bool(present),
    }
