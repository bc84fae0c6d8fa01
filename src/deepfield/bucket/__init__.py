"""Stores in S3-compatible buckets, shared by several processes (the [scale] extra).

    store = deepfield.open("s3://bucket/memory", create=True)   # AWS_* variables as usual
    store.create_field("notes", exist_ok=True).add("Title", "Text")

Pages stay the truth and stay in the memoryfield layout; each process works on a private copy
and writes back conditionally (field.py), so replicas never overwrite each other silently;
one replica at a time, holding a lease in the bucket (lease.py), keeps a field's LanceDB
index current for all of them (poller.py). docs/SCALE.md describes the deployment.
"""

from __future__ import annotations

from .field import BucketField
from .lease import Lease
from .objects import Bucket, ObjectConflictError
from .store import BucketStore, is_bucket_url, open_bucket_store

__all__ = ["Bucket", "BucketField", "BucketStore", "Lease", "ObjectConflictError", "is_bucket_url",
           "open_bucket_store"]
