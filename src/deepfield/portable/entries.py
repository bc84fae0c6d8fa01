"""Which checked entries of a zip unpack keeps: what pack could have written, nothing else.

zipsafe.py refuses what is unsafe to extract; this leaves out, with a warning each, what is safe
but no part of a memoryfield as pack writes one (and as the spec says pages are):

- ``activation/``: the sender's usage log. Adopted, it would count as this machine's use, and a
  zip could make chosen pages look "hot" and the rest cold (ranking, ``forget``).
- ``*.sqlite3-wal``, ``-shm``, ``-journal``: an index ships as a bare ``.sqlite3`` in journal
  mode DELETE; a sidecar beside it would be replayed into the index SQLite opens there.
- a non-ASCII name whose UTF-8 flag (bit 11) is clear: its bytes are in an unknown code page
  (Python reads them as cp437), so the name that would be written is a guess.
- a root ``.md`` whose name the spec forbids (``Upper_Case.md``; ``P.md`` beside ``p.md``):
  pack leaves such pages out, and so must unpack, or the same zip gives one page or two
  depending on whether the file system folds case.
"""

from __future__ import annotations

import zipfile

from ..manage.activation_log import ACTIVATION_DIR
from ..page import is_valid_name, slugify
from .zipsafe import SIDECAR_SUFFIXES, is_page_member

UTF8_FLAG = 0x800


def skip_reason(info: zipfile.ZipInfo) -> str | None:
    """Why unpack leaves out the (checked) entry ``info``, as a warning; None to keep it."""
    name = info.filename
    if name.split("/", 1)[0] == ACTIVATION_DIR and "/" in name:
        return (f"{name}: the sender's usage log, which a memoryfield does not carry; "
                "left out")
    if name.endswith(SIDECAR_SUFFIXES):
        return (f"{name}: an index's journal file, which a memoryfield does not carry "
                "(indexes ship as one .sqlite3 file); left out")
    if not name.isascii() and not info.flag_bits & UTF8_FLAG:
        return (f"{name}: a non-ASCII name not marked as UTF-8 in the zip (its bytes cannot "
                "be read reliably); left out")
    if is_page_member(name) and not is_valid_name(name[:-3]):
        return (f"{name}: not a spec page name (lowercase letters, digits and hyphens, e.g. "
                f"{slugify(name[:-3]) or 'a-name'}.md); left out")
    return None


def kept_entries(infos: list[zipfile.ZipInfo]) -> tuple[list[zipfile.ZipInfo], list[str]]:
    """The entries unpack extracts, and a warning for each it leaves out."""
    kept: list[zipfile.ZipInfo] = []
    warnings: list[str] = []
    for info in infos:
        reason = None if info.is_dir() else skip_reason(info)
        if reason is None:
            kept.append(info)
        else:
            warnings.append(reason)
    return kept, warnings
