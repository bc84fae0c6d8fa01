"""The spec's naming rules: which stems are page and field names, which files are debris or
a sync tool's conflict copy, and how a title becomes a filename. No I/O; page.py re-exports
all of it.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import InvalidNameError
from .page_text import require_text

MAX_NAME_LENGTH = 120
"""Longest page or field stem accepted (file systems stop at 255 bytes; parts add suffixes)."""
INTRO_FILE = "index.md"
LISTING_FILE = "listing.md"
SPECIAL_FILES = frozenset({INTRO_FILE, LISTING_FILE})

_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_DEBRIS_NAMES = frozenset({".ds_store", "desktop.ini", "thumbs.db"})


def is_valid_name(stem: str) -> bool:
    """True if ``stem`` (no ``.md``) follows the spec: ``[a-z0-9-]``, letter/digit at both ends."""
    return bool(_NAME_RE.match(stem))


_CONFLICT_COPY = re.compile(
    # Dropbox and Nextcloud: "x (conflicted copy 2024-05-01).md", "x (Ana's conflicted copy
    # …).md", "x (Case Conflict).md"; git mergetool: "x.BACKUP.1234.md", "x_LOCAL_1234.md" …
    r"\((?:[^()]*\bconflicted copy\b[^()]*|case conflict(?: \d+)?)\)"
    r"|[._](?:BACKUP|BASE|LOCAL|REMOTE)[._]\d+\.md$",
    re.IGNORECASE,
)


def is_conflict_copy(name: str) -> bool:
    """A sync or merge tool's copy of a page it could not reconcile: someone's edit that is
    in no page until a person merges it (scan says so; it is never indexed)."""
    return ".sync-conflict-" in name or _CONFLICT_COPY.search(name) is not None


def is_debris(name: str) -> bool:
    """Files that sync tools, editors, merge tools and operating systems leave behind (never
    pages: a conflict copy indexed beside its page doubles every hit and shares its uuid)."""
    return name.lower() in _DEBRIS_NAMES or name.endswith("~") or is_conflict_copy(name)


def can_be_a_file_name(name: str) -> bool:
    """False for a name no file system gives a file (over 255 bytes, or a NUL in it): asking
    the OS about one raises instead of answering "no such file"."""
    return len(name.encode("utf-8")) <= 255 and "\x00" not in name


def require_field_name(name: object) -> str:
    """A field name to look up: text, not empty (``""`` joined to the store's folder is
    the store itself, not a field)."""
    require_text(name, "a field name", InvalidNameError)
    assert isinstance(name, str)
    if not name.strip():
        raise InvalidNameError("the field name is empty",
                               "name a field; list them with `deepfield ls`")
    return name


def check_name(name: str, what: str = "page") -> str:
    """Return the stem of a valid page or field name (``.md`` optional), else raise."""
    require_text(name, f"the {what} name", InvalidNameError)
    stem = name[:-3] if name.endswith(".md") else name
    if len(stem) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{what} name {name[:40]!r}… is {len(stem)} characters long",
            f"use at most {MAX_NAME_LENGTH} (file systems refuse long names)",
        )
    if not is_valid_name(stem):
        suggestion = slugify(stem)
        hint = InvalidNameError.default_hint + (f"; try `{suggestion}`" if suggestion else "")
        raise InvalidNameError(f"{what} name {name!r} is not a spec filename", hint)
    return stem


_FOLD = str.maketrans({"ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE",
                       "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th",
                       "Þ": "Th", "ð": "d", "Ð": "D", "ı": "i"})
"""Latin letters that no Unicode decomposition takes to ASCII ("Straße" is not "strae")."""


def slugify(text: str, max_len: int = 60) -> str:
    """Fold ``text`` to a spec filename stem; ``''`` when nothing ASCII is left (e.g. pure CJK)."""
    folded = unicodedata.normalize("NFKD", text.translate(_FOLD)).encode(
        "ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    if len(slug) > max_len:
        cut = slug[:max_len]
        # Cut at a word boundary when one is near, so names stay readable.
        slug = cut.rsplit("-", 1)[0] if "-" in cut[max_len // 2 :] else cut
        slug = slug.strip("-")
    return slug
