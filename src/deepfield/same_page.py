"""Is a new page already there? Pages named like it (stem.md, stem-2.md …) compared with it
before it is added: the same page written again is ``unchanged`` instead of a second copy,
and other pages of the same title are named in a warning."""

from __future__ import annotations

from pathlib import Path

from .errors import DeepfieldError
from .page import PAGE_LIMIT_BYTES, Page, derive_title, new_uuid, now_iso
from .split import stored_split
from .writer import WrittenPage, _stem_for, normalise_dates

SAME_PAGE_CANDIDATES = 50
"""Pages named like a new page (stem.md, stem-2.md …) compared with it before it is added."""


def _named_like(stem: str) -> list[str]:
    """The names a new page of ``stem`` may have been given, in the order they are taken."""
    return [f"{stem}.md" if n == 1 else f"{stem}-{n}.md"
            for n in range(1, SAME_PAGE_CANDIDATES + 1)]


def identical_page(folder: Path, page: Page) -> list[WrittenPage] | None:
    """An existing page that already holds ``page`` (a new page, without a uuid or name),
    else None: adding the same title and text twice (a retry after an error, a script run
    again) leaves one page, reported ``unchanged``, instead of making ``stem-2.md``; a page
    over 8 KB, when every part holds its text split the same way."""
    title = derive_title(page)
    stem = _stem_for(title, page)
    try:
        whole = _as_written(page, title)
        split = len(whole.render().encode()) > PAGE_LIMIT_BYTES
    except (DeepfieldError, ValueError):  # (UnicodeError too) the writer says what is wrong
        return None
    for name in _named_like(stem):
        path = folder / name
        try:
            current = path.read_text("utf-8")
        except FileNotFoundError:
            return None  # names are taken in order: no later one can hold it
        except (OSError, UnicodeDecodeError):
            continue
        if split:  # the same text written before came as parts: compare each part
            parts = stored_split(folder, name, whole, title)
            if parts and _has_values(Page.parse(current), page, title):
                return [WrittenPage(filename, uuid, title, "unchanged", size)
                        for filename, uuid, size in parts]
            continue
        stored = Page.parse(current)
        if stored.frontmatter_error or stored.body != page.body or not stored.uuid:
            continue
        if _has_values(stored, page, title, whole_title=True):
            return [WrittenPage(name, stored.uuid, title, "unchanged", len(current.encode()))]
    return None


def _has_values(stored: Page, page: Page, title: str, whole_title: bool = False) -> bool:
    """Whether ``stored`` holds every frontmatter value ``page`` gives (each part of a split
    page carries them all; its title is the part's)."""
    wanted = dict(page.frontmatter or {})
    if whole_title:
        wanted.setdefault("title", title)
    elif "title" in wanted:
        del wanted["title"]
    return all(stored.get(key) == value for key, value in wanted.items())


def _as_written(page: Page, title: str) -> Page:
    """A copy of ``page`` with the title, uuid and dates a write gives it (their sizes decide
    where a page over 8 KB is cut into parts)."""
    copy = Page(body=page.body, frontmatter=dict(page.frontmatter or {}))
    if copy.get("title") in (None, ""):
        copy.set("title", title)
    normalise_dates(copy)
    copy.set("uuid", new_uuid())
    now = now_iso()
    for key in ("created", "updated"):
        if not copy.get_str(key):
            copy.set(key, now)
    return copy


def same_titled(folder: Path, title: str, written: str) -> list[str]:
    """Other current pages named like a new page titled ``title`` (stem.md, stem-2.md …)
    whose title is the same, case and spacing aside; superseded pages do not count."""
    key = " ".join(title.split()).casefold()
    stem = _stem_for(title, Page(body="", frontmatter={}))
    found = []
    for attempt, name in enumerate(_named_like(stem), 1):
        if name == written:
            continue
        try:
            stored = Page.parse((folder / name).read_text("utf-8"))
        except FileNotFoundError:
            if attempt > 1:
                break  # names are taken in order (a removed first page leaves stem-2 behind)
            continue
        except (OSError, UnicodeDecodeError):
            continue
        if stored.frontmatter_error or stored.get("superseded_by"):
            continue
        if " ".join(derive_title(stored, name).split()).casefold() == key:
            found.append(name)
    return found
