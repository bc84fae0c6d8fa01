"""Adding a new page from its parts (``Field.add``, the CLI's ``deepfield add``): a title, the
text, and optionally a summary and frontmatter keys.

A note handed over whole (``---`` frontmatter, then its body) is common: its block is not
kept as body text under the page's own frontmatter, but read, its keys joining the page's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from .errors import InvalidPageError
from .page import Page
from .page_text import check_text, require_text
from .same_page import same_titled
from .writer import MAX_WRITE_BYTES, WriteResult

if TYPE_CHECKING:
    from .field import Field


def add_page(
    field: Field,
    title: str,
    text: str,
    *,
    summary: str | None,
    name: str | None,
    frontmatter: dict[str, Any] | None,
    review: bool | None,
) -> WriteResult:
    """What :meth:`deepfield.Field.add` does (its docstring says what it takes)."""
    # A title and a summary are one line each (listing.md, `ls`, search stubs): a line break
    # in one made a page whose title showed as two lines everywhere.
    title = " ".join(require_text(title, "the title").split())
    if not title:
        raise InvalidPageError("the title is empty", "give the page a few words as its title")
    require_text(text, "the page text")
    if summary is not None:
        summary = " ".join(require_text(summary, "the summary").split())
    if frontmatter is not None and not isinstance(frontmatter, dict):
        raise InvalidPageError(f"frontmatter must be a mapping, not "
                               f"{type(frontmatter).__name__}")
    if frontmatter and "uuid" in frontmatter:
        _refuse_uuid("frontmatter= has a uuid")
    check_text(text.encode("utf-8"), "page text", MAX_WRITE_BYTES)
    body, own = text_frontmatter(text, summary)
    page = Page(body=body if body.endswith("\n") else body + "\n", frontmatter={})
    page.set("title", title)
    if summary:
        page.set("summary", summary)
    for key, value in {**own, **(frontmatter or {})}.items():
        page.set(key, value)
    result = field.write(page, name=name, review=review)
    written = result.pages[0]
    others = same_titled(field.path, title, written.filename) if name is None else []
    if others and written.action == "created":
        # A second page of one title is filed as title-2.md: allowed (two meetings may
        # share a title), but more often a slip than a wish, so say where the first is.
        result.warnings.append(
            f"{written.filename}: a page titled {title!r} is already in {field.name}: "
            f"{', '.join(others)} (edit that page, or give --name to keep both on purpose)"
        )
    return result


def text_frontmatter(text: str, summary: str | None) -> tuple[str, dict[str, Any]]:
    """(body, keys): a frontmatter block ``text`` begins with split off its body, without
    the title (the one given wins) and, when ``summary`` is given, without the block's.
    InvalidPageError for a block that is not valid YAML, one with no body below it, and a
    ``uuid`` in it (add makes a new page; a uuid names one that may exist)."""
    page = Page.parse(text)
    if (page.frontmatter_error or "").startswith("malformed YAML"):
        # Stored as body it became a second, broken block under the page's own. (A block of
        # plain prose, "---\nIntro\n---", is Markdown: a rule and a heading; kept as text.)
        raise InvalidPageError(
            f"the text begins with a frontmatter block that cannot be read: "
            f"{page.frontmatter_error}",
            "fix the block, or start the text with an empty line to keep it as text")
    if page.frontmatter is None:
        return text, {}
    if not page.body.strip():
        raise InvalidPageError("the text is only a frontmatter block, with no body",
                               "give the page some text below the closing ---")
    keys = {k: v for k, v in page.frontmatter.items() if k != "title"}
    if summary is not None:
        keys.pop("summary", None)
    if "uuid" in keys:
        _refuse_uuid("the text's frontmatter has a uuid")
    return page.body, keys


def _refuse_uuid(where: str) -> NoReturn:
    """Refuse a uuid given to add: it names a page that may exist, which the write would then
    replace (its title, text and all), where add always makes a new page."""
    raise InvalidPageError(
        f"{where}, and add always makes a new page",
        "use `deepfield write FIELD -` (Field.write in Python) to store a page under its "
        "own uuid, or remove the uuid")
