"""Point links at the part of a split page that holds the heading they name.

Links between imported notes are rewritten before pages are written (``links``), so
``[[Huge#Section 300]]`` becomes ``huge.md#section-300``. A note over 8 KB is then split into
parts as it is written, and the section may land in a later part (``huge-2.md``): the link
would open the first part, where the heading is not (and the note's own ``[[#Section 300]]``,
``#section-300``, names a heading of another part). Once every page is written, this
re-points such links at the part holding the heading, in the files this import wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

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


def _part_anchors(folder: Path, splits: Iterable[list[str]]) -> dict[tuple[str, str], str]:
    """(first part's filename, anchor) -> the later part's filename holding that heading."""
    where: dict[tuple[str, str], str] = {}
    for files in splits:
        first_anchors = set(_headings(_read(folder / files[0])))
        for name in files[1:]:
            for anchor in _headings(_read(folder / name)):
                if anchor not in first_anchors:
                    where.setdefault((files[0], anchor), name)
    return where


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
    where = _part_anchors(folder, splits)
    # ``[[#Section 300]]`` in the note itself became ``#section-300``: in a part without that
    # heading it names another part's.
    local: dict[str, dict[str, str]] = {}
    for files in splits:
        headings = {name: _headings(_read(folder / name)) for name in files}
        for name in files:
            local[name] = {anchor: f"{quote(other)}#{anchor}" for other in reversed(files)
                           for anchor in headings[other] if anchor not in headings[name]}
    if not where and not any(local.values()):
        return 0
    targets = {f"{quote(first)}#{anchor}": f"{quote(part)}#{anchor}"
               for (first, anchor), part in where.items()}
    pattern = re.compile(r"(?<=\]\()(?:" + "|".join(
        [re.escape(t) for t in targets] + [r"#[^\s)]+"]) + r")(?=[\s)])")
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
        body, hits = _swap(page.body, pattern, local.get(name, {}), targets)
        if not hits:
            continue
        data = (text[:len(text) - len(page.body)] + body).encode("utf-8")  # (its block as is)
        with field_lock(folder):
            atomic_write(path, data)
        if name in by_name:
            by_name[name][1].files[name] = sha256_hex(data)
        count += hits
    return count


def _swap(body: str, pattern: re.Pattern[str], here: dict[str, str],
          targets: dict[str, str]) -> tuple[str, int]:
    """``body`` with its links re-pointed (``here``: this part's own ``#anchor`` links;
    ``targets``: links to a split note's first part), and how many were."""
    hits = 0

    def one(match: re.Match[str]) -> str:
        nonlocal hits
        href = match.group(0)
        new = here.get(href[1:]) if href.startswith("#") else targets.get(href)
        if new is None:
            return href
        hits += 1
        return new

    return outside_code(body, lambda prose: pattern.sub(one, prose)), hits
