"""A replica's local copy of a field's LanceDB dataset kept in the bucket.

Searching a dataset in an object store reads its files by ranges, a dozen requests a query
(bench/scale.py measures it on moto). A served replica therefore searches a copy on its own
disk that it keeps in step: a Lance dataset's files are never changed once written (new data,
indexes and versions are new files), so bringing the copy up to date is fetching the files it
lacks, every file a version's manifest names before the manifest itself, so the copy never
shows a version whose files have not arrived. Files gone from the bucket (old versions
cleaned up) go from the copy too, except while the bucket lacks a table the copy has (the
dataset was deleted and is being rebuilt): the replica then keeps searching its last copy.

A rebuilt dataset starts its versions again, so its manifests can have the names (and even
the sizes) of the old ones with other content. What the copy holds is therefore recorded by
ETag (``.etags.json``); a manifest whose ETag changed, or a copy none of whose versions of a
table the bucket still lists, means a new dataset: it is fetched whole into a folder beside
the copy (files whose ETag did not change are linked, not fetched) and swapped in at once.
The copy is derived, private to the replica, and rebuilt from the bucket when deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..fsutil import atomic_write
from .objects import Bucket, ObjectInfo

if TYPE_CHECKING:
    from .field_indexing import SharedIndexField

VERSIONS = "_versions/"
ETAGS = ".etags.json"
"""name -> ETag of every file of the copy, inside the copy (swapped with it)."""
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@dataclass
class CacheReport:
    fetched: int = 0
    removed: int = 0
    bytes: int = 0
    replaced: bool = False
    """The bucket's dataset was rebuilt and the copy switched to a fresh one: handles opened
    on the old copy must be dropped (LanceDataset.forget)."""


def refresh_dataset_copy(bucket: Bucket, prefix: str, folder: Path) -> CacheReport:
    """Bring ``folder`` in line with the objects under ``prefix`` (a dataset's folder in the
    bucket, relative to the store's prefix); returns what changed. One refresh of a folder
    at a time (the poller, and a search whose copy failed)."""
    with _lock(folder):
        return _refresh(bucket, prefix, folder)


def _lock(folder: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(os.fspath(folder), threading.Lock())


def _refresh(bucket: Bucket, prefix: str, folder: Path) -> CacheReport:
    report = CacheReport()
    objects, _ = bucket.list(prefix, deep=True)
    listed = {o.name: o for o in objects}
    held = _manifests(_local_names(folder))
    if not _tables(listed) or not _tables(held) <= _tables(listed):
        return report  # gone from the bucket (being rebuilt): keep serving the last copy
    known = _known(folder)
    if _rebuilt(listed, known, held):
        _fresh_copy(bucket, prefix, folder, listed, known, report)
        return report
    _fetch(bucket, prefix, folder, folder, listed, known, report)
    _save(folder, {name: listed[name].etag for name in listed})
    if folder.is_dir():
        for path in sorted(folder.rglob("*"), key=lambda p: VERSIONS not in p.as_posix()):
            relative = path.relative_to(folder).as_posix()
            if path.is_file() and relative not in listed and not path.name.startswith("."):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    report.removed += 1
    return report


def _fetch(bucket: Bucket, prefix: str, folder: Path, into: Path,
           listed: dict[str, ObjectInfo], known: dict[str, str], report: CacheReport) -> None:
    """Every listed file into ``into``, manifests last (a reader that finds a new version
    finds its files already there); a file ``folder`` holds at the same ETag is kept (or,
    into another folder, linked)."""
    for name in sorted(listed, key=lambda n: (VERSIONS in n, n)):
        info, source, target = listed[name], folder / name, into / name
        if known.get(name) == info.etag and _size(source) == info.size:
            if into == folder:
                continue
            if VERSIONS not in name:  # data and index files: never rewritten under a name
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(source, target)
                except OSError:
                    shutil.copy2(source, target)
                continue
        bucket.download(prefix + name, target)
        report.fetched += 1
        report.bytes += info.size


def _fresh_copy(bucket: Bucket, prefix: str, folder: Path, listed: dict[str, ObjectInfo],
                known: dict[str, str], report: CacheReport) -> None:
    """Fetch a rebuilt dataset beside the copy, then swap the two: searches read the old
    copy until the new one is whole (one that opens a file in between reopens it)."""
    fresh = folder.with_name(f".{folder.name}.next")
    old = folder.with_name(f".{folder.name}.old")
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    _fetch(bucket, prefix, folder, fresh, listed, known, report)
    _save(fresh, {name: listed[name].etag for name in listed})
    if folder.exists():
        os.rename(folder, old)
    os.rename(fresh, folder)
    shutil.rmtree(old, ignore_errors=True)
    report.replaced = True


def _rebuilt(listed: dict[str, ObjectInfo], known: dict[str, str], held: set[str]) -> bool:
    """Whether the bucket's dataset is another one than the copy's (see the docstring)."""
    if held and not known:
        return True  # a copy of unknown ETags (an older deepfield's): start again
    for name in held:
        if name in listed and known.get(name) != listed[name].etag:
            return True
    in_bucket = _manifests(listed)
    return any(not {n for n in held if _table(n) == table} & in_bucket
               for table in _tables(held))


def _local_names(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and not p.name.startswith(".")}


def _manifests(names: Iterable[str]) -> set[str]:
    return {n for n in names if VERSIONS in n and n.endswith(".manifest")}


def _table(name: str) -> str:
    return name.split(VERSIONS, 1)[0]


def _tables(names: Iterable[str]) -> set[str]:
    """The tables (``chunks.lance/`` …) that have a version among ``names``."""
    return {_table(n) for n in _manifests(names)}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _known(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / ETAGS).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save(folder: Path, etags: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / ETAGS, json.dumps(etags).encode(), durable=False)


def sync_field_copy(field: SharedIndexField) -> CacheReport:
    """Bring a served replica's copy of ``field``'s shared dataset in line with the bucket
    (the poller each round; a search whose copy failed), and make the process's handles of
    a copy that was swapped for a fresh one open it again."""
    from ..index.lance_backend import LanceBackend, dataset_uri

    copy = field.search_backend()
    assert isinstance(copy, LanceBackend)
    shared = dataset_uri(field.shared_backend_context(), copy.model_code)
    prefix = shared.removeprefix(f"s3://{field.bucket.name}/{field.bucket.prefix}")
    report = refresh_dataset_copy(field.bucket, prefix.rstrip("/") + "/", Path(copy.uri))
    if report.replaced:
        copy.dataset.forget()
    return report


def dataset_copy_folder(root: Path, field: str, dataset: str) -> Path:
    """Where a replica keeps its copy of ``dataset`` (the dataset's folder name) of ``field``."""
    return root / ".lancedb" / field / os.path.basename(dataset.rstrip("/"))
