"""Transports a field can be read through, registered by the shape of the source string.

======================  ============================================================
``path/to/folder``      a local memoryfield folder (``local``)
``x.memoryfield.zip``   a local zip (``zip``); any ``*.zip`` file
``http(s)://host/f/``   a memoryfield HTTP server; ``.../x.memoryfield.zip`` its zip
``s3://bucket/prefix``  an S3-compatible bucket (boto3)
``git+URL[#ref]``       a git repository (URL or local path; default ref HEAD)
======================  ============================================================
"""

from __future__ import annotations

from pathlib import Path

from .base import (
    RemoteFile,
    Transport,
    create_transport,
    find_transport,
    register_transport,
    transport_names,
)


def _http(source: str, workdir: Path, pin: str | None) -> Transport:
    from .http import HttpTransport

    return HttpTransport(source, workdir, pin)


def _s3(source: str, workdir: Path, pin: str | None) -> Transport:
    from .s3 import S3Transport

    return S3Transport(source, workdir, pin)


def _git(source: str, workdir: Path, pin: str | None) -> Transport:
    from .git import GitTransport

    return GitTransport(source, workdir, pin)


def _zip(source: str, workdir: Path, pin: str | None) -> Transport:
    from .local import ZipTransport

    return ZipTransport(source, workdir, pin)


def _local(source: str, workdir: Path, pin: str | None) -> Transport:
    from .local import LocalTransport

    return LocalTransport(source, workdir, pin)


register_transport("http", lambda s: s.lower().startswith(("http://", "https://")), _http)
register_transport("s3", lambda s: s.lower().startswith("s3://"), _s3)
register_transport("git", lambda s: s.lower().startswith("git+"), _git)
register_transport("zip", lambda s: s.lower().endswith(".zip") and "://" not in s, _zip)
register_transport("local", lambda s: Path(s).is_dir(), _local)

__all__ = [
    "RemoteFile",
    "Transport",
    "create_transport",
    "find_transport",
    "register_transport",
    "transport_names",
]
