"""S3-compatible buckets: ``s3://bucket/prefix`` through boto3 (the ``[s3]`` extra).

The field is the objects directly under the prefix (``Delimiter='/'``: deeper keys are
sub-folders, never pages). Timestamps are the ``Last-Modified`` that ``ListObjectsV2`` reports
(spec, "S3-compatible object stores") and version tokens the ETags, so a refresh fetches only
changed objects. Credentials, region and endpoint come from boto3's usual places
(``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL`` for MinIO, R2, moto, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import RemoteUnavailableError, RemoteUnreachableError, TransportError
from .base import MAX_FILE_BYTES, RemoteFile, Transport, check_file_name, listed_name


def _boto3() -> Any:
    try:
        import boto3
        import boto3.session
        import botocore.config
    except ImportError:
        raise TransportError(
            "reading s3:// fields needs boto3", "install it with `pip install 'deepfield[s3]'`"
        ) from None
    return boto3, botocore.config


class S3Transport(Transport):
    name = "s3"

    def __init__(self, source: str, workdir: Path, pin: str | None = None) -> None:
        super().__init__(source, workdir, pin)
        rest = source.removeprefix("s3://")
        self.bucket, _, prefix = rest.partition("/")
        if not self.bucket:
            raise TransportError(f"{source!r} names no bucket", "write s3://BUCKET/PREFIX")
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        boto3, config = _boto3()
        # A session of its own: boto3's default session caches credentials process-wide.
        self.client = boto3.session.Session().client(
            "s3",
            config=config.Config(connect_timeout=5, read_timeout=30,
                                  retries={"max_attempts": 2, "mode": "standard"}),
        )

    def field_name(self) -> str:
        from ...page import is_valid_name, slugify

        stem = self.prefix.strip("/").rsplit("/", 1)[-1] or self.bucket
        return stem if is_valid_name(stem) else slugify(stem) or "field"

    def _fail(self, exc: Exception) -> RemoteUnavailableError:
        import botocore.exceptions as errors

        if isinstance(exc, errors.NoCredentialsError | errors.PartialCredentialsError):
            return RemoteUnavailableError(
                f"no AWS credentials to read {self.source}",
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
            )
        if isinstance(exc, errors.ClientError):
            error = exc.response.get("Error", {})
            return RemoteUnavailableError(
                f"{self.source}: {error.get('Code', 'error')}: {error.get('Message', exc)}",
                "check the bucket name, the prefix and the credentials' permissions",
            )
        return RemoteUnreachableError(f"cannot reach {self.source}: {exc}")

    def list_files(self) -> list[RemoteFile]:
        import botocore.exceptions as errors

        files = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix, Delimiter="/"
            )
            for page in pages:
                for item in page.get("Contents", []):
                    name = listed_name(str(item["Key"])[len(self.prefix):], self.source)
                    if not name:
                        continue  # the "folder" marker object itself, or an odd non-page
                    files.append(RemoteFile(
                        name, int(item["Size"]),
                        item["LastModified"].timestamp(), str(item.get("ETag", "")) or None,
                    ))
        except (errors.BotoCoreError, errors.ClientError) as exc:
            raise self._fail(exc) from None
        return sorted(files, key=lambda f: f.name)

    def fetch(self, name: str) -> bytes:
        import botocore.exceptions as errors

        key = self.prefix + check_file_name(name, self.source)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            data: bytes = body.read(MAX_FILE_BYTES + 1)
            body.close()
        except (errors.BotoCoreError, errors.ClientError) as exc:
            raise self._fail(exc) from None
        if len(data) > MAX_FILE_BYTES:
            raise RemoteUnavailableError(f"{self.source}: {name} is larger than {MAX_FILE_BYTES}")
        return data

    def close(self) -> None:
        self.client.close()

