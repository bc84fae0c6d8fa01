"""Remote fields: a zip, an HTTP server, an S3 prefix or a git repository, searched locally.

``open_remote(source)`` mirrors the field's root ``.md`` files into a cache folder and returns a
:class:`RemoteField` over it: an ordinary field with its own index, so every search mode and
``read`` work as on a local field. Each open refreshes the mirror by the transport's version
tokens and timestamps: only changed files are fetched, files gone from the remote are removed
from the mirror (the mirror is derived data, never anyone's pages), and nothing is written until
every changed file has arrived, so a remote that fails half-way leaves the previous mirror as
it was. Cached files get the remote timestamp as mtime, which the index records as each page's
``last_modified`` (git committer date, S3 Last-Modified, HTTP Last-Modified).

The cache lives in ``$DEEPFIELD_REMOTE_CACHE``, else ``$XDG_CACHE_HOME/deepfield/remote``
(``~/.cache/deepfield/remote``); one folder per source. Deleting it loses nothing.

When the source cannot be reached (no connection, no complete reply in time:
``RemoteUnreachableError``) but an earlier refresh left a mirror, the mirror is used as it is,
with a warning in the report ("using the copy fetched at <time>: <reason>"); a pinned source
falls back only on a mirror of exactly the pinned zip. Any other failure (refusals, HTTP errors,
a misbehaving server) is raised as it is.

A pin travels in the source as a fragment, ``x.memoryfield.zip#sha256=HEX`` (also for zip URLs),
or as ``pin=``; a zip whose sha256 differs is refused before any entry is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..debris import new_temp_file
from ..embed.base import Embedder
from ..errors import RemoteUnavailableError, RemoteUnreachableError, TransportError
from ..field import Field
from ..fsutil import atomic_write, field_lock
from ..page import (
    INTRO_FILE,
    LISTING_FILE,
    SPECIAL_FILES,
    is_debris,
    is_valid_name,
    iso_from_timestamp,
)
from ..store_openers import normal_url
from .transports import RemoteFile, Transport, create_transport, find_transport
from .transports.base import MissingRemoteFileError
from .zipsafe import DEFAULT_LIMITS, normalize_pin

STATE_FILE = "state.json"
PIN_FRAGMENT = "sha256="


@dataclass
class RefreshReport:
    source: str
    transport: str
    fetched: int = 0
    unchanged: int = 0
    removed: int = 0
    sha256: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    stale: bool = False  # the source was unreachable: the cached mirror was used as it was

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class RemoteField(Field):
    """A field mirrored from a remote source; searching and reading work, writing does not."""

    source: str
    refresh_report: RefreshReport | None = None

    def _read_only(self) -> TransportError:
        return TransportError(
            f"{self.name} is a read-only mirror of {self.source}",
            "write to the source itself, or `deepfield unpack` a zip of it into your store",
        )

    def check_writable(self) -> None:
        raise self._read_only()

    def write(self, *_: Any, **__: Any) -> Any:
        raise self._read_only()

    def write_intro(self, *_: Any, **__: Any) -> Any:
        raise self._read_only()

    def archive_intro(self, *_: Any, **__: Any) -> Any:
        raise self._read_only()

    def add(self, *_: Any, **__: Any) -> Any:
        raise self._read_only()

    def archive(self, *_: Any, **__: Any) -> Any:
        raise self._read_only()

    def restore(self, *_: Any, **__: Any) -> Any:
        raise self._read_only()


def is_remote_source(text: str) -> bool:
    """Whether ``text`` names a remote field (not a folder or a store field name)."""
    found = find_transport(split_pin(text)[0])
    return found is not None and found[0] != "local"


def split_pin(source: str) -> tuple[str, str | None]:
    """(source, pin) from ``...#sha256=HEX``; other fragments (a git ref) stay in the source."""
    head, sep, fragment = source.rpartition("#")
    if sep and fragment.lower().startswith(PIN_FRAGMENT):
        return head, fragment[len(PIN_FRAGMENT):]
    return source, None


def cache_root() -> Path:
    explicit = os.environ.get("DEEPFIELD_REMOTE_CACHE")
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "deepfield" / "remote"


def _wanted(name: str) -> bool:
    # listing.md is left out: the mirror keeps its own, generated from the mirrored pages.
    return name.endswith(".md") and name != LISTING_FILE and not name.startswith(".") \
        and not is_debris(name)


def _load_state(path: Path) -> dict[str, tuple[RemoteFile, str]]:
    try:
        data = json.loads(path.read_text("utf-8"))
        files = {n: (RemoteFile(n, f.get("size"), f.get("timestamp"), f.get("version")),
                     str(f["sha256"])) for n, f in data.get("files", {}).items()}
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return {}
    return files


def _mtime_ns(file: RemoteFile, digest: bytes) -> int:
    # Whole seconds carry the remote timestamp (what the index records as last_modified); the
    # nanoseconds carry part of the content hash, so a change within the same second still
    # looks changed to the index's size-and-mtime test.
    stamp = int(file.timestamp if file.timestamp is not None else time.time())
    return stamp * 1_000_000_000 + int.from_bytes(digest[:4], "big") % 1_000_000_000


def refresh_mirror(transport: Transport, folder: Path, state_path: Path) -> RefreshReport:
    """Bring ``folder`` in line with the transport (see the module docstring)."""
    started = time.monotonic()
    report = RefreshReport(transport.label, transport.name)
    known = _load_state(state_path)
    listed = [f for f in transport.list_files() if _wanted(f.name)]
    # The spec's page names only, as pack and unpack keep: Upper_Case.md is no page.
    for file in listed:
        if file.name not in SPECIAL_FILES and not is_valid_name(file.name[:-3]):
            report.warnings.append(f"{file.name}: not a spec page name (lowercase letters, "
                                   "digits and hyphens); not mirrored")
    listed = [f for f in listed if f.name in SPECIAL_FILES or is_valid_name(f.name[:-3])]
    if len(listed) > DEFAULT_LIMITS.max_entries:
        raise RemoteUnavailableError(
            f"{transport.label} lists {len(listed)} pages (limit {DEFAULT_LIMITS.max_entries})",
            "the remote is misbehaving or is not one field; refusing it",
        )
    report.sha256 = getattr(transport, "sha256", None)
    keep: dict[str, tuple[RemoteFile, str]] = {}
    arrived: dict[str, tuple[RemoteFile, bytes]] = {}
    batch: list[RemoteFile] = []
    for file in listed:
        old = known.get(file.name)
        present = (folder / file.name).is_file()
        if file.version is None:
            try:
                got = transport.fetch_if_changed(file, old[0] if old and present else None)
            except MissingRemoteFileError:
                if file.name != "index.md":
                    report.warnings.append(f"{file.name}: listed but missing on the server")
                continue
            if got is None and old is not None:
                keep[file.name] = old
            elif got is not None:
                arrived[file.name] = got
        elif old and present and old[0].version == file.version \
                and old[0].timestamp == file.timestamp:
            keep[file.name] = old
        else:
            batch.append(file)
    by_name = {f.name: f for f in batch}
    for name, data in transport.fetch_many([f.name for f in batch]):
        arrived[name] = (by_name[name], data)
    if not any(name != INTRO_FILE for name in (*keep, *arrived)):
        # Unpack's rule: a memoryfield holds at least one page. A remote with none is a
        # mistake (a wrong prefix, an emptied zip), not a reason to empty the mirror.
        raise RemoteUnavailableError(
            f"{transport.label} holds no pages",
            "a memoryfield holds at least one .md page; check the source (the mirror is "
            "left as it was)",
        )
    # Everything has arrived: only now is the mirror touched.
    folder.mkdir(parents=True, exist_ok=True)
    for name, (file, data) in arrived.items():
        digest = hashlib.sha256(data).digest()
        old = known.get(name)
        path = folder / name
        if old is not None and old[1] == digest.hex() and path.is_file():
            report.unchanged += 1
        else:
            _write_cached(path, data)
            report.fetched += 1
        ns = _mtime_ns(file, digest)
        os.utime(path, ns=(ns, ns))
        keep[name] = (file, digest.hex())
    report.unchanged += len(keep) - len(arrived)
    for name in set(known) - set(keep):
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
            report.removed += 1
    state = {"source": transport.label, "transport": transport.name, "sha256": report.sha256,
             "fetched_at": time.time(),
             "files": {n: {**asdict(f), "sha256": sha} for n, (f, sha) in sorted(keep.items())}}
    atomic_write(state_path, json.dumps(state, indent=1).encode())
    report.seconds = time.monotonic() - started
    return report


def _cached_report(transport: Transport, mirror: Path, state_path: Path, pin: str | None,
                   error: RemoteUnreachableError) -> RefreshReport:
    """The report for a mirror used as it is because the source is unreachable; ``error``
    again when there is no usable mirror (none yet, or not of the pinned zip)."""
    try:
        state = json.loads(state_path.read_text("utf-8"))
        fetched_at = float(state.get("fetched_at") or state_path.stat().st_mtime)
    except (OSError, ValueError, TypeError, AttributeError):
        raise error from None
    if not mirror.is_dir() or not isinstance(state, dict) or not state.get("files"):
        raise error
    if pin is not None and str(state.get("sha256") or "").lower() != normalize_pin(pin):
        raise error
    report = RefreshReport(transport.label, transport.name, sha256=state.get("sha256"),
                           unchanged=len(state["files"]), stale=True)
    report.warnings.append(
        f"using the copy fetched at {iso_from_timestamp(fetched_at)}: {error.message}")
    return report


def _write_cached(path: Path, data: bytes) -> None:
    # No fsync per file: the mirror is derived and re-fetched if a crash tears it.
    fd, temp = new_temp_file(path.parent)  # held: no cleaner takes it meanwhile
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    finally:
        os.close(fd)


def _absolute(source: str) -> str:
    """Local paths made absolute, so one zip or repository maps to one mirror from anywhere."""
    prefix = "git+" if source.startswith("git+") else ""
    rest = source[len(prefix):]
    path, sep, ref = rest.partition("#") if prefix else (rest, "", "")
    if "://" not in path and Path(path).exists():
        return prefix + str(Path(path).resolve()) + sep + ref
    return source


def cache_dir_for(source: str, name: str, root: Path | None = None) -> Path:
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return (root or cache_root()) / f"{name}-{digest}"


def open_remote(
    source: str,
    *,
    embedder: Embedder | None = None,
    cache: Path | None = None,
    pin: str | None = None,
    refresh: bool = True,
) -> RemoteField:
    """A :class:`RemoteField` mirroring ``source`` (refreshed first unless ``refresh=False``)."""
    if not source.strip():
        raise TransportError("no source given",
                             "name a zip, a folder, an http(s):// URL, s3://bucket/prefix or "
                             "git+URL")
    source, fragment_pin = split_pin(source)
    source = _absolute(normal_url(source))
    pin = pin or fragment_pin
    if pin is not None:  # once, here: every use below (the offline fallback too) sees HEX
        pin = normalize_pin(pin)
    probe = create_transport(source, Path(tempfile.gettempdir()), pin)
    try:
        name = probe.field_name()
    finally:
        probe.close()
    folder = cache_dir_for(source, name, cache)
    folder.mkdir(parents=True, exist_ok=True)
    mirror = folder / name
    with field_lock(folder):
        if refresh or not mirror.is_dir():
            transport = create_transport(source, folder / "transport", pin)
            try:
                report = refresh_mirror(transport, mirror, folder / STATE_FILE)
            except RemoteUnreachableError as exc:
                report = _cached_report(transport, mirror, folder / STATE_FILE, pin, exc)
            finally:
                transport.close()
        else:
            report = None
    remote = RemoteField(mirror, embedder, name=name)
    remote.source = probe.label
    remote.refresh_report = report
    return remote


def remote_search(source: str, query: str, k: int = 10) -> list[dict[str, Any]]:
    """Ask an HTTP memoryfield server's ``/search`` directly (spec-shaped results)."""
    from .transports.http import HttpTransport

    source, pin = split_pin(source)
    if pin is not None:
        raise TransportError(f"a server's /search cannot be checked against a pin ({source})",
                             "search the pinned zip's local mirror instead")
    transport = create_transport(source, Path(tempfile.gettempdir()))
    try:
        if not isinstance(transport, HttpTransport):
            raise TransportError(f"{source} is not an HTTP memoryfield server",
                                 "remote search needs an http(s):// URL")
        return transport.search(query, k)
    finally:
        transport.close()
