"""A replica's local copy of a field's LanceDB dataset kept in the bucket.

Searching a dataset in an object store reads its files by ranges, a dozen requests a query
(bench/scale.py measures it on moto). A served replica therefore searches a copy on its own
disk that it keeps in step: a Lance dataset's files are never changed once written (new data,
indexes and versions are new files), so bringing the copy up to date is fetching the files it
lacks, every file a version's manifest names before the manifest itself, so the copy never
shows a version whose files have not arrived. Files gone from the bucket (old versions
cleaned up) go from the copy too, except while the bucket holds no version at all (the
dataset was deleted and is being rebuilt): the replica then keeps searching its last copy.
The copy is derived, private to the replica, and rebuilt from the bucket when deleted.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from .objects import Bucket

VERSIONS = "_versions/"


@dataclass
class CacheReport:
    fetched: int = 0
    removed: int = 0
    bytes: int = 0


def refresh_dataset_copy(bucket: Bucket, prefix: str, folder: Path) -> CacheReport:
    """Bring ``folder`` in line with the objects under ``prefix`` (a dataset's folder in the
    bucket, relative to the store's prefix); returns what changed."""
    report = CacheReport()
    objects, _ = bucket.list(prefix, deep=True)
    listed = {o.name: o.size for o in objects}
    if not any(VERSIONS in name for name in listed):
        return report  # gone from the bucket (being rebuilt): keep serving the last copy
    # Manifests last: a reader that finds a new version finds its files already here.
    for name in sorted(listed, key=lambda n: (VERSIONS in n, n)):
        target = folder / name
        try:
            if target.stat().st_size == listed[name]:
                continue
        except FileNotFoundError:
            pass
        bucket.download(prefix + name, target)
        report.fetched += 1
        report.bytes += listed[name]
    if folder.is_dir():
        for path in sorted(folder.rglob("*"), key=lambda p: VERSIONS not in p.as_posix()):
            relative = path.relative_to(folder).as_posix()
            if path.is_file() and relative not in listed and not path.name.startswith("."):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    report.removed += 1
    return report


def dataset_copy_folder(root: Path, field: str, dataset: str) -> Path:
    """Where a replica keeps its copy of ``dataset`` (the dataset's folder name) of ``field``."""
    return root / ".lancedb" / field / os.path.basename(dataset.rstrip("/"))
