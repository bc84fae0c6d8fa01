"""The ``.gitignore`` a new field starts with: what deepfield derives inside a field folder.

People put fields under git (or a store, one folder up). The index files are rebuilt from the
pages at any time and change with every write: committed, they conflict on every merge and
a ``git checkout`` refuses to run over them. ``listing.md`` (the spec's catalogue),
``archive/`` and ``review/`` are kept (a person reviews those changes), and so is
``activation/``: one append-only file per machine, made to merge across a person's copies.
A ``.gitignore`` the person already has is never touched.
"""

from __future__ import annotations

from pathlib import Path

from .fsutil import create_new

GITIGNORE = ".gitignore"
DERIVED_PATTERNS = """\
# deepfield: files derived from the pages, rebuilt at any time (`deepfield index`). Delete
# a line to commit them too (the memoryfield spec lets a field ship its vector index).
*.sqlite3
*.sqlite3-*
.deepfield/
"""


def write_gitignore(folder: Path) -> bool:
    """Give ``folder`` deepfield's ``.gitignore`` unless it has one; True when written."""
    return create_new(folder / GITIGNORE, DERIVED_PATTERNS.encode("utf-8"))
