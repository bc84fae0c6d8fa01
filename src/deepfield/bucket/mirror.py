"""What a process knows of the pages of one field of a bucket store (bucket/field.py)."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

from ..fsutil import atomic_write


class MirrorState:
    """What this process knows of one field's objects: name -> (ETag, size, mtime_ns) of
    the copy in the working folder. Shared by the process's handles of the field."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.refreshed = 0.0
        self.files: dict[str, tuple[str, int, int]] = {}
        with contextlib.suppress(OSError, ValueError, TypeError):
            self.files = {k: (str(v[0]), int(v[1]), int(v[2]))
                          for k, v in json.loads(path.read_text("utf-8")).items()}

    def etag(self, name: str) -> str | None:
        entry = self.files.get(name)
        return entry[0] if entry else None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(self.files).encode(), durable=False)
