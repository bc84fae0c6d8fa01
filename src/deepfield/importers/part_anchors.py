"""Point links at the part of a split page that holds the heading they name.

Links between imported notes are rewritten before pages are written (``links``), so
``[[Huge#Section 300]]`` becomes ``huge.md#section-300``. A note over 8 KB is then split into
parts as it is written, and the section may land in a later part (``huge-part-4.md``): the link
would open the first part, where the heading is not (and the note's own ``[[#Section 300]]``,
``#section-300``, names a heading of another part). Once every page is written, this
re-points such links at the part holding the heading, in this import's pages that are as it
wrote them (so a link follows its heading when the note is split anew on a later import).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from urllib.parse import quote, unquote

from ..fsutil import atomic_write, field_lock
from ..page import Page
from .links import heading_anchor, outside_code
from .manifest import Manifest, sha256_hex, untouched

_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def _headings(body: str) -> list[str]:
    """The anchors of the ATX headings of ``body`` (fenced code skipped)."""
    found, fence = [], None
    for line in body.splitlines():
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0]
        elif fence is not None:
            if match and match.group(1)[0] == fence:
                fence = None
        else:
            heading = _HEADING.match(line)
            if heading:
                found.append(heading_anchor(heading.group(1)))
    return found


def _read(path: Path) -> str:
    try:
        return Page.parse(path.read_text("utf-8")).body
    except (OSError, UnicodeDecodeError):
        return ""


def repoint_part_anchors(folder: Path, uuids: Iterable[str], manifest: Manifest) -> int:
    """Re-point links to headings in later parts, in the files of the pages ``uuids`` (this
    import's) that are as the import wrote them; the manifest's file digests follow. Returns
    how many links were re-pointed."""
    records = [manifest.pages[u] for u in uuids if u in manifest.pages]
    written = [list(rec.files) for rec in records if untouched(folder, rec)]
    splits = [files for files in written if len(files) > 1]
    if not splits:
        return 0
    headings = {name: _headings(_read(folder / name)) for files in splits for name in files}
    # part filename (as linked) -> its note's first part; (first part, anchor) -> the
    # earliest part with that heading. A link to a part without the heading is re-pointed:
    # ``huge.md#section-300`` as the import wrote it, or ``huge-part-4.md#section-300`` from
    # an earlier import, the note since re-split.
    group: dict[str, str] = {}
    holder: dict[tuple[str, str], str] = {}
    for files in splits:
        for name in files:
            group[quote(name)] = files[0]
            for anchor in headings[name]:
                holder.setdefault((files[0], anchor), name)
    pattern = re.compile(r"(?<=\]\()([^\s)#]*)#([^\s)]+)(?=[\s)])")

    def target(here: str, href: str, anchor: str) -> str | None:
        """Where ``href#anchor`` in file ``here`` should point, if not where it does."""
        linked = href or quote(here)  # ``#anchor``: a heading of this very file
        first = group.get(linked)
        if first is None or anchor in headings.get(unquote(linked), ()):
            return None
        found = holder.get((first, anchor))
        if found is None:
            return None
        return f"{quote(found)}#{anchor}"

    by_name = manifest.by_filename()
    count = 0
    for name in (n for files in written for n in files):
        path = folder / name
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        page = Page.parse(text)
        if page.frontmatter_error or not text.endswith(page.body):
            continue
        body, hits = _swap(page.body, pattern, partial(target, name))
        if not hits:
            continue
        data = (text[:len(text) - len(page.body)] + body).encode("utf-8")  # (its block as is)
        with field_lock(folder):
            atomic_write(path, data)
        if name in by_name:
            by_name[name][1].files[name] = sha256_hex(data)
        count += hits
    return count


def _swap(body: str, pattern: re.Pattern[str],
          target: Callable[[str, str], str | None]) -> tuple[str, int]:
    """``body`` with each link ``target`` re-points re-pointed, and how many were."""
    hits = 0

    def one(match: re.Match[str]) -> str:
        nonlocal hits
        new = target(match.group(1), match.group(2))
        if new is None:
            return match.group(0)
        hits += 1
        return new

    return outside_code(body, lambda prose: pattern.sub(one, prose)), hits
