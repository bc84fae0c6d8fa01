"""The activation log: one append-only JSON-lines file per host inside the field.

Reads, opened search hits and research citations append one JSON line each to
``activation/<instance>.jsonl`` (one file per host, so copies of a field merged by git or a
sync tool never edit the same file). Reading merges every file; corrupt lines are skipped with
a warning. Events are keyed by the page's uuid when it has one, so renames survive.

The files only grow, so a reader keeps where it stopped in each and parses just what was
appended since (every cite appends; re-reading a long history before each search would make
search slower the longer a field is used). deepfield.manage.activation turns the merged log
into scores.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..field import Field

log = logging.getLogger("deepfield")

ACTIVATION_DIR = "activation"
EVENTS = ("read", "open", "cite", "search-hit")
DECAY = 0.5
"""ACT-R's standard decay d."""
MIN_AGE_SECONDS = 1.0
"""Events younger than this count as this old (avoids infinite activation)."""
FUTURE_SKEW_SECONDS = 3600.0
"""Events dated later than this past the reader's clock are skipped (a log synced from a
machine whose clock was wrong): each counted as "used a second ago" for good, pinning its
page as in use so ``forget --older-than`` never took it."""


def instance_id() -> str:
    """This writer's log name: the host name folded to a filename (overridable for tests)."""
    chosen = os.environ.get("DEEPFIELD_INSTANCE") or socket.gethostname() or "local"
    return re.sub(r"[^a-z0-9-]+", "-", chosen.lower()).strip("-") or "local"


def iso_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def _parse_time(text: str) -> float:
    """Epoch seconds of an ISO 8601 time; one without a zone is UTC (as we write them), not
    the reader's local time, so merged logs from hosts in different zones agree."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def record_activation(
    field: Field,
    filenames: Iterable[str],
    event: str = "cite",
    *,
    uuids: Sequence[str | None] | None = None,
    when: float | None = None,
) -> int:
    """Append one ``event`` per page to the field's activation log; returns lines written.

    ``filenames`` are page filenames (``x.md``); their uuids come from ``uuids`` when given,
    else from the index. Never raises for I/O: a read-only field logs a warning and records
    nothing, so recording can never fail a read.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown activation event {event!r}; use one of {', '.join(EVENTS)}")
    names = list(filenames)
    if not names:
        return 0
    if uuids is None:
        uuids = [_uuid_of(field, name) for name in names]
    stamp = iso_time(time.time() if when is None else when)
    lines = "".join(
        json.dumps({"t": stamp, "page": name, "uuid": uuid, "event": event}) + "\n"
        for name, uuid in zip(names, uuids, strict=False)
    )
    folder = field.path / ACTIVATION_DIR
    try:
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / f"{instance_id()}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                     0o644)
        try:
            os.write(fd, lines.encode("utf-8"))  # one write: concurrent appenders never interleave
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("deepfield: could not record activation in %s: %s", folder, exc)
        return 0
    return len(names)


def _uuid_of(field: Field, filename: str) -> str | None:
    try:
        doc = field.index_handle().doc_by_filename(filename)
    except Exception:  # the index is optional here; the filename still counts
        return None
    return doc.uuid if doc else None


@dataclass
class ActivationLog:
    """Every event of a field, grouped by page key (uuid, or ``file:<filename>``)."""

    times: dict[str, list[float]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    filenames: dict[str, str] = field(default_factory=dict)
    """Key -> last filename seen (for reports)."""
    warnings: list[str] = field(default_factory=list)
    events: int = 0

    def key_for(self, filename: str, uuid: str | None) -> str | None:
        """The key under which a page's events are stored, if it has any.

        A page used before it had a uuid (written by hand, given one by a later rewrite) has
        events under both keys; they are joined under a third key, made once."""
        by_file = f"file:{filename}"
        if not (uuid and uuid in self.times):
            return by_file if by_file in self.times else None
        if by_file not in self.times:
            return uuid
        both = f"both:{uuid}:{filename}"
        if both not in self.times:
            self.times[both] = self.times[uuid] + self.times[by_file]
            counts = dict(self.counts.get(uuid, {}))
            for kind, n in self.counts.get(by_file, {}).items():
                counts[kind] = counts.get(kind, 0) + n
            self.counts[both] = counts
            self.filenames[both] = filename
        return both

    def base_level(self, key: str | None, now: float | None = None,
                   extra: Sequence[float] = ()) -> float | None:
        """B for a key (plus ``extra`` moments, e.g. a page's last update); None: never used."""
        moments = list(self.times.get(key, ())) if key else []
        moments += list(extra)
        if not moments:
            return None
        return base_level(moments, time.time() if now is None else now)

    def last_used(self, key: str | None) -> float | None:
        moments = self.times.get(key) if key else None
        return max(moments) if moments else None


def base_level(moments: Sequence[float], now: float, decay: float = DECAY) -> float:
    """ACT-R base-level activation of uses at ``moments`` (epoch seconds) seen at ``now``."""
    if len(moments) > 64:  # a much-used page: one vector operation, not a Python loop
        import numpy as np  # here: a CLI command that never meets such a page starts faster

        ages = np.maximum(now - np.asarray(moments, dtype=np.float64), MIN_AGE_SECONDS)
        return math.log(float(np.sum(ages ** -decay)))
    total = sum(max(now - t, MIN_AGE_SECONDS) ** -decay for t in moments)
    return math.log(total)


def read_log(folder: Path) -> ActivationLog:
    """Merge every ``*.jsonl`` file in ``folder`` (an ``activation/`` folder), uncached."""
    return _read_all(folder, _signature(folder)).log


def _ingest(result: ActivationLog, data: bytes, copied: set[str]) -> tuple[int, _Skipped]:
    """Add the complete lines of ``data`` to ``result``; returns (bytes used, lines skipped:
    corrupt, dated in the future, or naming an event that is not one of EVENTS).

    A last line without its newline is left for the next read (an append may be under way).
    Keys not in ``copied`` get fresh lists before they grow, so a log handed out earlier
    (and shared with its readers) never changes under them."""
    used = data.rfind(b"\n") + 1
    skipped = _Skipped()
    latest = time.time() + FUTURE_SKEW_SECONDS
    moments: dict[str, float] = {}  # events of one batch share a timestamp
    for raw in data[:used].decode("utf-8", "replace").splitlines():
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
            stamp = item["t"]
            moment = moments.get(stamp) if isinstance(stamp, str) else None
            if moment is None:
                moment = moments[stamp] = _parse_time(stamp)
            page = item["page"]
            uuid = item.get("uuid")
            kind = str(item.get("event", "read"))
            if not isinstance(page, str) or (uuid is not None and not isinstance(uuid, str)):
                raise ValueError("bad page or uuid")
        # RecursionError: a line nested deeper than Python can decode (a log arrives in zips).
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            skipped.corrupt += 1
            continue
        if moment > latest:
            skipped.future += 1
            continue
        if kind not in EVENTS:  # counted as a use, it made any line boost a page
            skipped.unknown += 1
            continue
        key = uuid or f"file:{page}"
        if key not in copied:
            copied.add(key)
            result.times[key] = list(result.times.get(key, ()))
            result.counts[key] = dict(result.counts.get(key, {}))
        result.times[key].append(moment)
        per = result.counts[key]
        per[kind] = per.get(kind, 0) + 1
        result.filenames[key] = page
        result.events += 1
    return used, skipped


@dataclass
class _Skipped:
    """Lines of one log file left out, by why."""

    corrupt: int = 0
    future: int = 0
    unknown: int = 0

    def __add__(self, other: _Skipped) -> _Skipped:
        return _Skipped(self.corrupt + other.corrupt, self.future + other.future,
                        self.unknown + other.unknown)

    def __bool__(self) -> bool:
        return bool(self.corrupt or self.future or self.unknown)

    def said(self) -> str:
        parts = [f"{self.corrupt} corrupt line(s)"] if self.corrupt else []
        if self.future:
            parts.append(f"{self.future} line(s) dated in the future (a wrong clock?)")
        if self.unknown:
            parts.append(f"{self.unknown} line(s) with an unknown event (not "
                         f"{', '.join(EVENTS)})")
        return ", ".join(parts)


@dataclass
class _FileState:
    """How far one log file has been read, and the bytes just before that point (a file
    rewritten rather than appended to no longer has them)."""

    inode: int
    offset: int
    tail: bytes
    bad: _Skipped


@dataclass
class _Loaded:
    signature: tuple[tuple[str, int, int, int], ...]
    log: ActivationLog
    files: dict[str, _FileState]


_CACHE: dict[str, _Loaded] = {}
_CACHE_LOCK = threading.Lock()
_TAIL = 64


def _signature(folder: Path) -> tuple[tuple[str, int, int, int], ...]:
    try:
        with os.scandir(folder) as entries:
            found = []
            for entry in entries:
                if entry.name.endswith(".jsonl"):
                    stat = entry.stat()
                    found.append((entry.name, stat.st_size, stat.st_mtime_ns, stat.st_ino))
    except OSError:
        return ()
    return tuple(sorted(found))


def activation_cached(path: Path) -> bool:
    """True when :func:`load_activation` for ``path`` would answer from its cache (no field
    log to read, or none changed since it was read)."""
    signature = _signature(path / ACTIVATION_DIR)
    cached = _CACHE.get(os.fspath(path.resolve()))
    return not signature or (cached is not None and cached.signature == signature)


def load_activation(path: Path) -> ActivationLog:
    """The merged log of the field at ``path``, cached until a log file's size or mtime
    changes (so search stays fast).

    Logs only grow, so a changed log costs what was appended since the last read, not the
    whole history: 200,000 events take about a second to parse, and every cite appends.
    A file that shrank, vanished or was rewritten (its bytes before the read point differ)
    is read again from the start, with the rest."""
    folder = path / ACTIVATION_DIR
    key = os.fspath(path.resolve())
    with _CACHE_LOCK:
        signature = _signature(folder)
        cached = _CACHE.get(key)
        if cached is not None and cached.signature == signature:
            return cached.log
        loaded = _grow(folder, cached, signature) if cached is not None else None
        if loaded is None:
            loaded = _read_all(folder, signature)
        _CACHE[key] = loaded
        return loaded.log


def clear_cache() -> None:
    """Forget every log read so far (benchmarks time a cold read)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _read_all(folder: Path, signature: tuple[tuple[str, int, int, int], ...]) -> _Loaded:
    result, files = ActivationLog(), {}
    unreadable = []
    for name, _size, _mtime, inode in signature:
        try:
            data = _read_from(folder / name, 0)
        except OSError as exc:
            unreadable.append(f"{ACTIVATION_DIR}/{name}: unreadable ({exc})")
            continue
        used, bad = _ingest(result, data, set())
        files[name] = _FileState(inode, used, data[max(0, used - _TAIL):used], bad)
    _set_warnings(result, files, unreadable, set(files))
    return _Loaded(signature, result, files)


def _grow(folder: Path, cached: _Loaded,
          signature: tuple[tuple[str, int, int, int], ...]) -> _Loaded | None:
    """``cached`` extended by what was appended since; None when a file was not appended to."""
    names = {entry[0] for entry in signature}
    if any(name not in names for name in cached.files):
        return None
    old = cached.log
    result = ActivationLog(dict(old.times), dict(old.counts), dict(old.filenames), [],
                           old.events)
    for both in [k for k in result.times if k.startswith("both:")]:  # joined from stale lists
        del result.times[both], result.counts[both], result.filenames[both]
    files = dict(cached.files)
    copied: set[str] = set()
    changed: set[str] = set()
    unchanged = set(cached.signature)
    for entry in signature:
        name, size, _mtime, inode = entry
        state = files.get(name)
        start = 0
        if state is not None:
            if entry in unchanged:
                continue
            if state.inode != inode or size < state.offset:
                return None
            start = state.offset - len(state.tail)
        try:
            data = _read_from(folder / name, start)
        except OSError:
            return None
        if state is not None:
            if not data.startswith(state.tail):
                return None
            data = data[len(state.tail):]
            start = state.offset
        used, bad = _ingest(result, data, copied)
        end = start + used
        before = b"" if state is None else state.tail
        tail = (before + data[:used])[-_TAIL:]
        files[name] = _FileState(inode, end, tail, (state.bad if state else _Skipped()) + bad)
        if bad:
            changed.add(name)
    _set_warnings(result, files, [], changed)
    return _Loaded(signature, result, files)


def _read_from(path: Path, offset: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read()


def _set_warnings(result: ActivationLog, files: dict[str, _FileState], unreadable: list[str],
                  new: set[str]) -> None:
    """The log's warnings; only those about lines read just now are logged (once)."""
    result.warnings = list(unreadable)
    for name, state in sorted(files.items()):
        if state.bad:
            message = f"{ACTIVATION_DIR}/{name}: skipped {state.bad.said()}"
            result.warnings.append(message)
            if name in new:
                log.warning("deepfield: %s", message)
    for message in unreadable:
        log.warning("deepfield: %s", message)
