"""Portable fields: pack a field into a pinned ``.memoryfield.zip``, unpack one into a store,
and search or read fields that live elsewhere (a zip, HTTP, S3, git) through a local mirror.

    result = deepfield.portable.pack(store.field("notes"), Path("notes.memoryfield.zip"))
    result.sha256                     # the pin to hand out with the zip
    deepfield.portable.unpack(store, Path("notes.memoryfield.zip"), sha256=result.sha256)
    remote = deepfield.portable.open_remote("s3://bucket/notes", embedder=store.embedder)
    remote.search("wok heat")
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidNameError
from ..field import Field
from ..listing import LISTING_MARKER, render_listing
from ..page import LISTING_FILE
from ..store import Store, check_field_name
from .archive import (
    PackResult,
    UnpackResult,
    default_zip_name,
    extract_checked,
    field_name_for,
    pack_folder,
)
from .remote import RefreshReport, RemoteField, is_remote_source, open_remote, remote_search
from .shipped import adopt_shipped
from .zipsafe import DEFAULT_LIMITS, ZipLimits, sha256_file, verify_pin


def pack(
    field: Field, out: Path | None = None, *, with_index: bool = False, force: bool = False
) -> PackResult:
    """Write ``field`` as ``out`` (default ``./<field>.memoryfield.zip``); see archive.py."""
    report = field.ensure_synced(embed=False)  # listing.md must describe the pages packed
    index_path = field.index_handle().path if with_index else None

    def listing(pages: list[str]) -> bytes | None:
        # The field's listing.md lists every page it indexes, those pack leaves out too.
        path = field.path / LISTING_FILE
        try:
            if not path.read_text("utf-8").startswith(LISTING_MARKER):
                return None  # a person's own catalogue travels as they wrote it
        except (OSError, UnicodeDecodeError):
            return None
        packed = set(pages)
        entries = [e for e in field.index_handle().catalogue() if e.filename in packed]
        return render_listing(field.name, entries).encode("utf-8")

    result = pack_folder(
        field.path, out or Path(default_zip_name(field.name)), index_path=index_path,
        listing=listing, force=force,
    )
    result.warnings = report.warnings + result.warnings
    if with_index:
        pending = field.index_handle().pending_vectors()
        if pending:
            result.warnings.append(
                f"the index still lacks {pending} vectors; run `deepfield index` before packing "
                "for a complete one"
            )
    return result


def unpack(
    store: Store,
    zip_path: Path,
    *,
    name: str | None = None,
    sha256: str | None = None,
    limits: ZipLimits = DEFAULT_LIMITS,
) -> UnpackResult:
    """Verify ``zip_path`` (against ``sha256`` when given) and unpack it as a new field."""
    # A name taken from the zip's file name is checked too: ui.memoryfield.zip needs --as.
    try:
        chosen = check_field_name(name or field_name_for(zip_path))
    except InvalidNameError as exc:
        if name:
            raise
        raise InvalidNameError(exc.message, "unpack under another name with --as NAME") from None

    def adopt(folder: Path, index_files: list[str]) -> list[str]:
        # Indexed where it was extracted, before it is a field anyone can open (shipped.py).
        field = Field(folder, store.embedder, name=chosen,
                      index_backend=store.config.index.backend_for(chosen))
        return adopt_shipped(field, index_files)

    return extract_checked(zip_path, store.root / chosen, pin=sha256, limits=limits,
                           adopt=adopt)


__all__ = [
    "DEFAULT_LIMITS",
    "PackResult",
    "RefreshReport",
    "RemoteField",
    "UnpackResult",
    "ZipLimits",
    "is_remote_source",
    "open_remote",
    "pack",
    "remote_search",
    "sha256_file",
    "unpack",
    "verify_pin",
]
