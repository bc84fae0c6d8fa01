"""The transport interface: list a field's root files with timestamps, fetch one file's bytes.

A transport is how a memoryfield travels (spec, "Transport specific notes"): a local folder, a
zip, an HTTP(S) server, an S3-compatible bucket, a git repository. Each one lists the files at
the field's root with the timestamp the spec assigns to that transport (mtime, S3
``Last-Modified``, git committer date) and a version token that changes with the content (ETag,
git blob id, zip CRC), and fetches bytes. Everything else (which files to cache, when to re-fetch,
indexing) lives in remote.py, the same for every transport.

Transports are chosen by the shape of the source string through a small registry, like the
embedder registry: ``register_transport(name, matches, factory)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ...errors import RemoteUnavailableError, TransportError, UnknownTransportError
from ...store_openers import normal_url

MAX_FILE_BYTES = 16 << 20
"""Largest single file a transport hands over (pages are ~8 KB; this bounds a hostile server)."""


class MissingRemoteFileError(Exception):
    """A listed file the server does not have (404): dropped, with a warning. (Here, not in
    http.py, so that importing the remote machinery does not import httpx.)"""


@dataclass(frozen=True)
class RemoteFile:
    """One file at the field's root as the transport lists it."""

    name: str
    size: int | None = None
    timestamp: float | None = None
    """Seconds since the epoch, by the transport's rule (None: unknown until fetched)."""
    version: str | None = None
    """Changes whenever the content does (None: only a conditional fetch can tell)."""


def is_safe_file_name(name: str) -> bool:
    """A plain root filename: no path, drive letter or control characters."""
    return not (not name or "/" in name or "\\" in name or name in (".", "..") or ":" in name
                or any(ord(c) < 32 for c in name))


def check_file_name(name: str, label: str) -> str:
    """A plain root filename, or RemoteUnavailableError (a remote naming ../x is misbehaving)."""
    if not is_safe_file_name(name):
        raise RemoteUnavailableError(
            f"{label} lists an unsafe file name {name!r}", "the remote is misbehaving; refusing it"
        )
    return name


def listed_name(name: str, label: str) -> str | None:
    """A root file of a bucket or repository: pages must have safe names (else the remote is
    refused), other files with names no folder could hold (``a:b.json``) are passed over."""
    if name.endswith(".md"):
        return check_file_name(name, label)
    return name if is_safe_file_name(name) else None


class Transport(ABC):
    """Read access to one memoryfield somewhere. ``workdir`` is private scratch space
    (a git mirror, a downloaded zip) that persists between refreshes."""

    name: ClassVar[str] = ""
    accepts_pin: ClassVar[bool] = False
    """Whether a sha256 pin can be checked (zips): a pin is never silently ignored."""

    def __init__(self, source: str, workdir: Path, pin: str | None = None) -> None:
        self.source = source
        self.workdir = workdir
        self.pin = pin

    @property
    def label(self) -> str:
        """The source as shown in messages (credentials stripped where a URL may carry them)."""
        return self.source

    def field_name(self) -> str:
        """A name for the field (the last meaningful part of the source)."""
        from ...page import is_valid_name, slugify

        stem = self.source.rstrip("/").rsplit("/", 1)[-1] or "field"
        stem = stem.removesuffix(".git").removesuffix(".zip").removesuffix(".memoryfield")
        return stem if is_valid_name(stem) else slugify(stem) or "field"

    @abstractmethod
    def list_files(self) -> list[RemoteFile]:
        """Every file at the field's root (not in sub-folders)."""

    @abstractmethod
    def fetch(self, name: str) -> bytes:
        """The bytes of one root file."""

    def fetch_many(self, names: Iterable[str]) -> Iterator[tuple[str, bytes]]:
        """Bytes of several files (transports with a batch API override this)."""
        for name in names:
            yield name, self.fetch(name)

    def fetch_if_changed(
        self, file: RemoteFile, known: RemoteFile | None
    ) -> tuple[RemoteFile, bytes] | None:
        """For files listed without a version: fetch unless ``known`` is still current
        (None). Transports that can ask conditionally (HTTP) override this."""
        return file, self.fetch(file.name)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""


TransportFactory = Callable[[str, Path, "str | None"], Transport]
Matcher = Callable[[str], bool]
_registry: list[tuple[str, Matcher, TransportFactory]] = []


def register_transport(name: str, matches: Matcher, factory: TransportFactory) -> None:
    """Register (or replace) a transport; the first whose ``matches(source)`` is true wins."""
    _registry[:] = [entry for entry in _registry if entry[0] != name]
    _registry.append((name, matches, factory))


def transport_names() -> list[str]:
    return [name for name, _, _ in _registry]


def find_transport(source: str) -> tuple[str, TransportFactory] | None:
    for name, matches, factory in _registry:
        if matches(source):
            return name, factory
    return None


def create_transport(source: str, workdir: Path, pin: str | None = None) -> Transport:
    """The transport for ``source``, or UnknownTransportError."""
    source = normal_url(source)  # S3://b/p is s3://b/p: schemes are case-insensitive
    found = find_transport(source)
    if found is None:
        raise UnknownTransportError(f"no transport can read {source!r}")
    transport = found[1](source, workdir, pin)
    if pin is not None and not transport.accepts_pin:
        transport.close()
        raise TransportError(
            f"a sha256 pin cannot be checked on {transport.label} ({found[0]}): pins are "
            "for .memoryfield.zip files",
            "drop the pin, or pin a zip (an HTTP field is then read through its "
            "memoryfield.zip)",
        )
    return transport
