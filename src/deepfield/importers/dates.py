"""The ``created`` and ``updated`` keys of an imported page, and how ``export --plain`` gives
the source's own entries back.

The spec wants both keys, as quoted ISO 8601 strings. A note that has neither, or only one
(Obsidian notes often carry just ``created: 2024-01-05``), gets the missing ones from the
file's mtime (a missing ``created`` next to an ``updated``: its value), and the import records
them as added so ``export --plain`` drops them again. A
source date YAML reads as a date (unquoted ``2024-01-05``) is rewritten as a quoted string;
the source's entry text is recorded, so an unedited page exports with it, byte for byte.
"""

from __future__ import annotations

from ..page import Page, iso_from_timestamp
from ..writer import normalise_dates

DATE_KEYS = ("created", "updated")


def fill_dates(page: Page, mtime: float) -> tuple[list[str], dict[str, list[str]] | None]:
    """Normalise and fill in ``page``'s dates; returns the keys added, and per date key
    whose text changed ``[the source's entry text, the value now]`` (None when none did)."""
    before = {key: page.entry_text(key) for key in DATE_KEYS}
    normalise_dates(page)
    rewritten: dict[str, list[str]] = {}
    for key, text in before.items():
        now = page.get_str(key)
        if text is not None and now is not None and page.entry_text(key) is None:
            rewritten[key] = [text, now]
    added = [key for key in DATE_KEYS if not page.get_str(key)]
    stamp = iso_from_timestamp(mtime)  # when the note was last changed
    if added == ["created"]:
        # Written by then at the latest (the mtime, later, would date it after its update).
        page.set("created", page.get_str("updated") or stamp)
    else:
        for key in added:  # ``updated`` then changes only on edits
            page.set(key, stamp)
    return added, rewritten or None


def restore_dates(page: Page, entries: dict[str, list[str]] | None) -> None:
    """Put back the source's date entries that still hold the value the import gave them."""
    for key, pair in (entries or {}).items():
        if (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
                and page.get_str(key) == pair[1]):
            page.restore_entry(key, pair[0])
