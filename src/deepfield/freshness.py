"""When a long-lived Field looks at its folder again, and which files it reads then.

Every search syncs first (:meth:`deepfield.Field.ensure_synced`). Checking every file — a
``stat`` each and the index row of each page, ~75 ms at 10k pages — runs at most every
SYNC_INTERVAL seconds (or every SYNC_COST_FACTOR check durations for a big field), and whenever
someone says pages changed without saying which. In between, a folder whose mtime changed (a
page created, deleted or atomically replaced, which is how deepfield and most editors save) is
compared by its listing alone (scan.page_inodes: names and inode numbers, ~6 ms at 10k pages)
and only the pages that differ are read, with those a file watcher named. An edit in place that
nobody reported, or a replace whose new file got the inode number the old one freed, waits for
the next full check, as edits in place always did without a watcher (bench/freshness.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .scan import is_page_name, page_inodes

SYNC_INTERVAL = 1.0
"""In a long-lived process, every file is checked at most this often (seconds) …"""
SYNC_COST_FACTOR = 20
"""… or, for big fields, at most every 20 check durations, so checking stays under 5% of the
time."""
QUICK_SYNC_PAGES = 256
"""At most this many changed pages are read by name; more, and every file is checked."""


@dataclass
class Check:
    """What one sync must read: ``names`` (None: every file)."""

    folder_mtime: int
    names: set[str] | None
    listed: dict[str, int] | None
    started: float


class Freshness:
    """A Field's memory of its last sync."""

    def __init__(self) -> None:
        self.last_full = 0.0
        self.cost = 0.0
        self.folder_mtime = -1
        self.everything = True
        """Check every file next time, whatever the interval says."""
        self.inodes: dict[str, int] | None = None
        self.reported: set[str] = set()

    def check(self, folder: Path) -> Check | None:
        """What to read now; None when the folder is as it was."""
        folder_mtime = folder.stat().st_mtime_ns
        interval = max(SYNC_INTERVAL, SYNC_COST_FACTOR * self.cost)
        fresh = time.monotonic() - self.last_full < interval
        if (not self.everything and not self.reported and fresh
                and folder_mtime == self.folder_mtime):
            return None
        started = time.monotonic()
        if not fresh or self.everything or self.inodes is None:
            return Check(folder_mtime, None, None, started)
        listed = page_inodes(folder, self.inodes)
        names = {name for name, inode in listed.items() if self.inodes.get(name) != inode}
        names |= self.inodes.keys() - listed.keys()
        names |= {name for name in self.reported if is_page_name(name)}
        if len(names) > QUICK_SYNC_PAGES:
            return Check(folder_mtime, None, None, started)
        return Check(folder_mtime, names, listed, started)

    def synced(self, folder: Path, check: Check | None, inodes: dict[str, int] | None) -> None:
        """After a sync of ``check`` (None: a full one outside :meth:`check`); ``inodes``:
        the listing it saw, when it saw one."""
        full = check is None or check.names is None
        if full:
            self.last_full = time.monotonic()
            if check is not None:
                self.cost = self.last_full - check.started
        if inodes is not None:
            self.inodes = inodes
        self.reported.clear()
        self.everything = False
        mtime = folder.stat().st_mtime_ns if check is None else check.folder_mtime
        # A folder changed within the last second may change again within the same mtime
        # tick; do not trust such a timestamp (the next search looks again).
        self.folder_mtime = mtime if time.time_ns() - mtime > 1_000_000_000 else -1

    def changed(self, names: Iterable[str] | None = None) -> None:
        """Pages changed where the folder's mtime may not show it: read ``names`` (file names
        at the field's root) at the next sync, or (None) check every file."""
        if names is None:
            self.everything = True
        else:
            self.reported.update(names)
