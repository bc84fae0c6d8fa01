"""Objects in an S3-compatible bucket: list, get, and writes that never overwrite blindly.

Every write is conditional. A new object is written with ``If-None-Match: *`` and an update
with ``If-Match: <the ETag it replaces>``; the bucket refuses the write (412, or 409 when two
conditional writes cross) if another writer got there first, and :class:`ObjectConflictError`
carries what the object holds now. Deletes take ``If-Match`` too. Credentials, region and
endpoint come from boto3's usual places (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
``AWS_ENDPOINT_URL`` for MinIO, R2, moto, …). Every other failure is one
:class:`~deepfield.errors.RemoteUnavailableError` line saying what to check.
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RemoteUnavailableError, TransportError

SCHEME = "s3://"
READ_TIMEOUT_S = 4.0
READ_RETRIES = 1
"""Lists and page GETs (searches' refreshes, page reads, the poller): a bucket that accepts
connections and never answers fails them within ~2 x 4 s, and reads go on from the working
copy with a warning, rather than hanging 4 x 30 s as before."""
WRITE_TIMEOUT_S = 10.0
WRITE_RETRIES = 1
"""Writes and dataset downloads (larger bodies): at most ~25 s including connecting, below
the minute HTTP clients commonly wait, so a write fails while its client still listens."""
CONNECT_TIMEOUT_S = 3.0
STALLED_S = 3.0
"""A list or GET waiting this long makes searches warn that the bucket is not answering."""


@dataclass(frozen=True)
class ObjectInfo:
    name: str
    """The key below the listed prefix."""
    etag: str
    size: int
    modified: float
    """Last-Modified, seconds since the epoch (the bucket's clock)."""


@dataclass(frozen=True)
class Got:
    data: bytes
    etag: str
    modified: float
    server_time: float
    """The bucket's clock when it answered (the Date header)."""


class ObjectConflictError(Exception):
    """A conditional write or delete lost: ``current`` is the object now (None: absent)."""

    def __init__(self, key: str, current: Got | None) -> None:
        super().__init__(key)
        self.key = key
        self.current = current


def split_url(url: str) -> tuple[str, str]:
    """(bucket, prefix ending in '/' or empty) of ``s3://bucket/prefix``."""
    rest = url[len(SCHEME):] if url.startswith(SCHEME) else url
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise TransportError(f"{url!r} names no bucket", "write s3://BUCKET/PREFIX")
    prefix = prefix.strip("/")
    return bucket, (prefix + "/" if prefix else "")


def _boto3() -> Any:
    try:
        import boto3.session
        import botocore.config
    except ImportError:
        raise TransportError(
            "stores in S3 buckets need boto3", "install it with `pip install 'deepfield[scale]'`"
        ) from None
    return boto3.session, botocore.config


class Bucket:
    """One bucket, reached with the environment's credentials and endpoint."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name, self.prefix = split_url(url)
        session, config = _boto3()
        # A session of its own: boto3's default session caches credentials process-wide.
        own = session.Session()

        def client(read_timeout: float, retries: int) -> Any:
            # (botocore's ``max_attempts`` counts the retries after the first attempt.)
            return own.client("s3", config=config.Config(
                connect_timeout=CONNECT_TIMEOUT_S, read_timeout=read_timeout,
                retries={"max_attempts": retries, "mode": "standard"},
                max_pool_connections=32))

        self.client = client(WRITE_TIMEOUT_S, WRITE_RETRIES)
        self.reader = client(READ_TIMEOUT_S, READ_RETRIES)
        """The client of lists and GETs: short timeouts (READ_TIMEOUT_S)."""
        self._waiting: dict[int, float] = {}
        self._waiting_lock = threading.Lock()

    @contextlib.contextmanager
    def _request(self) -> Iterator[None]:
        """Around a list or GET: how long the oldest one has waited (:meth:`stalled_s`)."""
        token = object()
        with self._waiting_lock:
            self._waiting[id(token)] = time.monotonic()
        try:
            yield
        finally:
            with self._waiting_lock:
                self._waiting.pop(id(token), None)

    def stalled_s(self) -> float:
        """Seconds the oldest list or GET in flight has waited for the bucket (0: none)."""
        with self._waiting_lock:
            oldest = min(self._waiting.values(), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def key(self, name: str) -> str:
        return self.prefix + name

    def fail(self, exc: Exception, doing: str) -> RemoteUnavailableError:
        """One line for a failure that is not a lost race: what went wrong, what to check."""
        import botocore.exceptions as errors

        where = f"s3://{self.name}/{self.prefix}"
        if isinstance(exc, errors.NoCredentialsError | errors.PartialCredentialsError):
            return RemoteUnavailableError(
                f"no AWS credentials to {doing} {where}",
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")
        if isinstance(exc, errors.ClientError):
            error = exc.response.get("Error", {})
            code = error.get("Code", "error")
            hint = {"AccessDenied": "the credentials may not use this bucket; check its policy",
                    "NoSuchBucket": "check the bucket name (and AWS_ENDPOINT_URL)",
                    "InvalidAccessKeyId": "check AWS_ACCESS_KEY_ID",
                    "SignatureDoesNotMatch": "check AWS_SECRET_ACCESS_KEY"}.get(
                        code, "check the bucket, the prefix and the credentials' permissions")
            return RemoteUnavailableError(
                f"cannot {doing} {where}: {code}: {error.get('Message', exc)}", hint)
        if isinstance(exc, errors.EndpointConnectionError | errors.ConnectTimeoutError
                      | errors.ReadTimeoutError | errors.ConnectionClosedError):
            return RemoteUnavailableError(
                f"cannot reach the bucket of {where} to {doing} it ({type(exc).__name__})",
                "check AWS_ENDPOINT_URL and the network, then try again")
        return RemoteUnavailableError(f"cannot {doing} {where}: {exc}")

    # ------------------------------------------------------------------ reads

    def list(self, prefix: str = "", *, deep: bool = False
             ) -> tuple[list[ObjectInfo], list[str]]:
        """(objects directly under ``prefix`` (``deep``: at any depth, names with their
        sub-folders), names of the sub-folders there)."""
        import botocore.exceptions as errors

        start = self.prefix + prefix
        objects: list[ObjectInfo] = []
        folders: list[str] = []
        try:
            with self._request():
                pages = list(self.reader.get_paginator("list_objects_v2").paginate(
                    Bucket=self.name, Prefix=start, **({} if deep else {"Delimiter": "/"})))
            for page in pages:
                for item in page.get("Contents", []):
                    name = str(item["Key"])[len(start):]
                    if name:
                        objects.append(ObjectInfo(name, str(item.get("ETag", "")),
                                                  int(item["Size"]),
                                                  item["LastModified"].timestamp()))
                folders += [str(p["Prefix"])[len(start):].rstrip("/")
                            for p in page.get("CommonPrefixes", [])]
        except (errors.BotoCoreError, errors.ClientError) as exc:
            raise self.fail(exc, "list") from None
        return objects, folders

    def download(self, name: str, target: Path) -> None:
        """Copy object ``name`` into the file ``target`` (whole: written aside, then renamed)."""
        import botocore.exceptions as errors

        temp = target.with_name(f".{target.name}.part")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.client.download_file(self.name, self.key(name), str(temp))
        except (errors.BotoCoreError, errors.ClientError) as exc:
            temp.unlink(missing_ok=True)
            raise self.fail(exc, "read") from None
        os.replace(temp, target)

    def get(self, name: str) -> Got | None:
        """The object ``name`` (below the store's prefix), or None when there is none."""
        import botocore.exceptions as errors

        try:
            with self._request():
                reply = self.reader.get_object(Bucket=self.name, Key=self.key(name))
                data: bytes = reply["Body"].read()
                reply["Body"].close()
        except errors.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self.fail(exc, "read") from None
        except errors.BotoCoreError as exc:
            raise self.fail(exc, "read") from None
        return Got(data, str(reply["ETag"]), reply["LastModified"].timestamp(),
                   _server_time(reply))

    # ------------------------------------------------------------------ writes

    def put(self, name: str, data: bytes, *, if_match: str | None = None,
            create: bool = False) -> str:
        """Write ``name`` only if it does not exist (``create``) or still has ETag
        ``if_match``; returns the new ETag. ObjectConflictError when the bucket refuses."""
        import botocore.exceptions as errors

        condition: dict[str, str] = {}
        if create:
            condition["IfNoneMatch"] = "*"
        elif if_match is not None:
            condition["IfMatch"] = if_match
        try:
            reply = self.client.put_object(Bucket=self.name, Key=self.key(name), Body=data,
                                           **condition)
        except errors.ClientError as exc:
            if _lost(exc):
                raise ObjectConflictError(name, self.get(name)) from None
            raise self.fail(exc, "write to") from None
        except errors.BotoCoreError as exc:
            raise self.fail(exc, "write to") from None
        return str(reply["ETag"])

    def delete(self, name: str, *, if_match: str) -> None:
        """Delete ``name`` only if it still has ETag ``if_match`` (else ObjectConflictError)."""
        import botocore.exceptions as errors

        try:
            self.client.delete_object(Bucket=self.name, Key=self.key(name), IfMatch=if_match)
        except errors.ClientError as exc:
            if _lost(exc):
                raise ObjectConflictError(name, self.get(name)) from None
            raise self.fail(exc, "delete from") from None
        except errors.BotoCoreError as exc:
            raise self.fail(exc, "delete from") from None

    def close(self) -> None:
        self.client.close()
        self.reader.close()


def _lost(exc: Any) -> bool:
    """A conditional request that lost: 412, 409 (two conditional writes crossed), or 404
    for If-Match on an object deleted meanwhile."""
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status in (409, 412) or error.get("Code") in (
        "PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey")


def _server_time(reply: dict[str, Any]) -> float:
    date = reply.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if date:
        try:
            return email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            pass
    return time.time()
