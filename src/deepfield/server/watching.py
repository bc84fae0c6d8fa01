"""One file watcher per server process for every field folder it has open.

A server notices pages edited in place (the folder's mtime does not change) through file
notifications (watchfiles: inotify, FSEvents, ReadDirectoryChangesW). Each watch holds an
inotify instance, and Linux gives a user 128 of them by default, shared with editors and IDEs:
a watcher per field, times the worker processes, would take them all for a store of a few dozen
fields. So a process watches all its field folders with one watcher (not recursively: pages are
at a field's root), restarted when a field is added. Events lost while it restarts, or that the
kernel drops, are covered by the slow safety poll of server/pool.py.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..manage.watch import is_page_path

log = logging.getLogger("deepfield.server")

DEBOUNCE_MS = 50
"""Changes are reported in batches at most this often (a sync follows each batch)."""


class _Either:
    """Set when either event is: watchfiles polls ``is_set()`` to know when to stop."""

    def __init__(self, first: threading.Event, second: threading.Event) -> None:
        self.first, self.second = first, second

    def is_set(self) -> bool:
        return self.first.is_set() or self.second.is_set()


class FolderWatcher:
    """Calls a folder's callback (in the watcher's thread) with the names of the pages at its
    root that changed."""

    def __init__(self) -> None:
        self._folders: dict[Path, Callable[[set[str]], None]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._thread: threading.Thread | None = None
        self.running = threading.Event()
        """Set while notifications arrive; clear before the first start, after a failure
        (then callers poll) and after :meth:`close`."""

    def add(self, folder: Path, on_change: Callable[[set[str]], None]) -> None:
        """Watch ``folder`` too (the watcher starts with the first folder)."""
        with self._lock:
            if self._stop.is_set():
                return
            self._folders[Path(os.path.realpath(folder))] = on_change
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="deepfield-watch")
                self._thread.start()
            else:
                self._restart.set()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.running.clear()

    def _run(self) -> None:
        from watchfiles import watch

        retry, last_error = 1.0, ""
        while not self._stop.is_set():
            with self._lock:
                # A field folder removed while served would make the whole watch fail.
                folders = {p: cb for p, cb in self._folders.items() if p.is_dir()}
                self._restart.clear()
            if not folders:
                self._restart.wait(1.0)
                continue

            def relevant(_change: Any, path: str, folders: dict[Path, Any] = folders) -> bool:
                real = Path(os.path.realpath(path))
                return real.parent in folders and is_page_path(real.parent, str(real))

            try:
                # yield_on_timeout: an empty first batch says the watch is up.
                for changes in watch(*folders, watch_filter=relevant, debounce=DEBOUNCE_MS,
                                     step=20, stop_event=_Either(self._stop, self._restart),
                                     rust_timeout=1000, yield_on_timeout=True,
                                     raise_interrupt=False, recursive=False):
                    self.running.set()
                    retry = 1.0
                    self._notify(folders, changes)
            except Exception as exc:  # limits, a filesystem without notifications: poll
                self.running.clear()
                if str(exc) != last_error:
                    log.warning("cannot watch the field folders (%s); edits made in place "
                                "are found by polling until it works again", exc)
                    last_error = str(exc)
                # Try again later (a folder may be back, an inotify instance freed).
                if self._stop.wait(retry):
                    break
                retry = min(60.0, retry * 2)
        self.running.clear()

    @staticmethod
    def _notify(folders: dict[Path, Callable[[set[str]], None]], changes: set[Any]) -> None:
        changed: dict[Path, set[str]] = {}
        for _change, path in changes:
            real = Path(os.path.realpath(path))
            changed.setdefault(real.parent, set()).add(real.name)
        for folder, names in changed.items():
            callback = folders.get(folder)
            if callback is None:
                continue
            try:
                callback(names)
            except Exception:  # one field's trouble must not stop the watcher for the rest
                log.exception("handling a change in %s failed", folder)
