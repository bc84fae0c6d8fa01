"""HTTP(S) memoryfield servers (spec, "HTTP"), read with plain GETs.

Pages are enumerated from ``listing.md`` and fetched one by one as ``/{page}.md`` with
conditional requests (``If-None-Match`` / ``If-Modified-Since``), so a refresh moves only what
changed. A server without ``listing.md`` is read through ``/memoryfield.zip`` (downloaded
conditionally into the transport's workdir, pin-checked and checked whole like any zip); a URL
that ends in ``.zip`` is that zip directly. ``search`` calls the server's ``/search`` and
checks the answer has the spec's shape. A pinned field (``#sha256=``) is always read
through its zip, the only form a pin can be checked on. Credentials in the URL (``https://user:pass@host/``)
are sent as HTTP Basic auth and never shown in messages.
"""

from __future__ import annotations

import contextlib
import email.utils
import io
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, unquote

import httpx

from ...errors import RemoteUnavailableError, RemoteUnreachableError, TransportError
from ...httpjson import display_url
from ...page import LISTING_FILE
from ..zipsafe import DEFAULT_LIMITS
from .base import MAX_FILE_BYTES, MissingRemoteFileError, RemoteFile, Transport, check_file_name
from .local import ZipTransport

ZIP_NAME = "memoryfield.zip"
TIMEOUT = httpx.Timeout(10.0, read=60.0)
# A deadline for each whole GET: httpx's timeouts are per socket read, so a server trickling a
# byte every few seconds would otherwise hold a fetch for ever (the size caps bound bytes, not
# time).
DEADLINE = 600.0
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def parse_listing(text: str) -> list[str]:
    """Page filenames linked from a ``listing.md`` (root ``.md`` links only, in order)."""
    names: dict[str, None] = {}
    for target in _LINK.findall(text):
        name = unquote(target.split("#", 1)[0]).removeprefix("./")
        if name.endswith(".md") and "/" not in name and ":" not in name and name != LISTING_FILE:
            names[name] = None
    return list(names)


_HTML = re.compile(r"\s*<(?:!doctype\s+html|html|head|body)[\s>]", re.IGNORECASE)


def _http_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


class HttpTransport(Transport):
    name = "http"
    accepts_pin = True  # a pinned field is read through its zip, never page by page

    def __init__(self, source: str, workdir: Path, pin: str | None = None) -> None:
        super().__init__(source, workdir, pin)
        try:
            url = httpx.URL(source)
        except httpx.InvalidURL as exc:  # e.g. "http://[::1" (an unclosed IPv6 address)
            raise TransportError(f"{source} is not a valid URL ({exc})",
                                 "check the address: http(s)://host[:port]/field/") from None
        self._display = display_url(source)
        self.zip_url = source if url.path.endswith(".zip") else None
        self.base = source if source.endswith("/") else source + "/"
        if self.zip_url:
            self.base = source.rsplit("/", 1)[0] + "/"
        self.client = httpx.Client(timeout=TIMEOUT, follow_redirects=True,
                                   headers={"User-Agent": "deepfield"})
        self._zip: ZipTransport | None = None

    @property
    def label(self) -> str:
        return self._display

    @property
    def sha256(self) -> str | None:
        """The zip's sha256 when the field was read through its zip (recorded in the mirror's
        state, so a pinned mirror can be matched to its pin offline)."""
        return self._zip.sha256 if self._zip is not None else None

    def field_name(self) -> str:
        from ...page import is_valid_name, slugify

        url = httpx.URL(self.zip_url or self.base)
        parts = [p for p in url.path.split("/") if p]
        stem = parts[-1] if parts else url.host
        for suffix in (".zip", ".memoryfield"):
            stem = stem.removesuffix(suffix)
        return stem if is_valid_name(stem) else slugify(stem) or "field"

    # ------------------------------------------------------------------ requests

    def _get(self, url: str, headers: dict[str, str] | None = None,
             limit: int = MAX_FILE_BYTES,
             params: dict[str, Any] | None = None) -> tuple[httpx.Response, bytes]:
        """GET with a size cap and a deadline; connection failures and overdue replies become
        RemoteUnreachableError."""
        buffer = io.BytesIO()
        response = self._stream(url, headers, buffer, limit, params)
        return response, buffer.getvalue()

    def _stream(self, url: str, headers: dict[str, str] | None, out: IO[bytes],
                limit: int, params: dict[str, Any] | None = None) -> httpx.Response:
        """GET into ``out`` (the body of a 200 only), refusing more than ``limit`` bytes and
        giving up when the whole reply has not arrived within ``DEADLINE`` seconds (checked as
        each chunk arrives; no single read waits longer than the deadline either)."""
        deadline = DEADLINE
        started = time.monotonic()
        per_read = httpx.Timeout(min(10.0, deadline), read=min(60.0, deadline))

        def overdue() -> RemoteUnreachableError:
            return RemoteUnreachableError(
                f"cannot read {self.label}: no complete reply to GET "
                f"{url.rsplit('/', 1)[-1] or '/'} within {deadline:g} s",
                "the server is too slow or stalled; try again later",
            )

        try:
            with self.client.stream("GET", url, headers=headers or {}, params=params,
                                    timeout=per_read) as response:
                size = 0
                if response.status_code == 200:
                    for chunk in response.iter_bytes():
                        if time.monotonic() - started > deadline:
                            raise overdue()
                        size += len(chunk)
                        if size > limit:
                            raise RemoteUnavailableError(
                                f"{self.label}: {url.rsplit('/', 1)[-1]} is larger than "
                                f"{limit} bytes", "the server is misbehaving; refusing it",
                            )
                        out.write(chunk)
                if time.monotonic() - started > deadline:
                    raise overdue()
                return response
        except httpx.TransportError as exc:  # no connection: refused, DNS, reset, timed out
            if time.monotonic() - started >= deadline:
                raise overdue() from None
            raise RemoteUnreachableError(f"cannot read {self.label}: {exc}") from None
        except httpx.HTTPError as exc:
            raise RemoteUnavailableError(f"cannot read {self.label}: {exc}") from None

    def _unexpected(self, what: str, response: httpx.Response) -> RemoteUnavailableError:
        return RemoteUnavailableError(
            f"{self.label}: GET {what} answered HTTP {response.status_code}"
        )

    # ------------------------------------------------------------------ the zip route

    def _download_zip(self, url: str) -> ZipTransport:
        """The server's zip, re-downloaded only when it changed (ETag / Last-Modified)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        target, meta_path = self.workdir / ZIP_NAME, self.workdir / f"{ZIP_NAME}.json"
        meta: dict[str, Any] = {}
        if target.exists() and meta_path.exists():
            with contextlib.suppress(ValueError, OSError):
                meta = json.loads(meta_path.read_text())
        headers = {}
        if meta.get("etag"):
            headers["If-None-Match"] = str(meta["etag"])
        if meta.get("last_modified"):
            headers["If-Modified-Since"] = str(meta["last_modified"])
        # Straight to disk: a zip may be far larger than memory should hold.
        fd, temp = tempfile.mkstemp(dir=self.workdir, suffix=".zip.tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                response = self._stream(url, headers, handle, DEFAULT_LIMITS.max_total_bytes)
        except BaseException:
            Path(temp).unlink()
            raise
        shown = display_url(url)  # messages name the URL, not the temporary file
        if response.status_code != 200:
            Path(temp).unlink()
            if response.status_code == 304 and target.exists():
                return ZipTransport(str(target), self.workdir, self.pin, display=shown)
            raise MissingRemoteFileError(ZIP_NAME) if response.status_code == 404 else \
                self._unexpected(ZIP_NAME, response)
        staged = ZipTransport(temp, self.workdir, self.pin, display=shown)
        try:
            staged.list_files()  # pin and safety checks before it replaces the old copy
        except BaseException:
            staged.close()
            Path(temp).unlink()
            raise
        staged.close()
        os.replace(temp, target)
        meta = {"etag": response.headers.get("etag"),
                "last_modified": response.headers.get("last-modified")}
        meta_path.write_text(json.dumps(meta))
        return ZipTransport(str(target), self.workdir, self.pin, display=shown)

    # ------------------------------------------------------------------ Transport

    def list_files(self) -> list[RemoteFile]:
        if self.zip_url is None and self.pin is None:
            response, data = self._get(self.base + LISTING_FILE)
            if response.status_code == 200:
                return self._listed(data.decode("utf-8", "replace"))
            if response.status_code not in (403, 404, 410):
                raise self._unexpected(LISTING_FILE, response)
        try:
            self._zip = self._download_zip(self.zip_url or self.base + ZIP_NAME)
        except MissingRemoteFileError:
            if self.zip_url is not None:
                raise RemoteUnavailableError(f"HTTP 404 for {self.label}",
                                             "check the zip's URL") from None
            if self.pin is not None:
                raise RemoteUnavailableError(
                    f"{self.label} has no {ZIP_NAME}, so the sha256 pin cannot be checked",
                    "drop the pin to read its pages one by one, or pin a zip URL",
                ) from None
            if self.zip_url is None and self._has_search():
                raise RemoteUnavailableError(
                    f"{self.label} offers /search but neither {LISTING_FILE} nor {ZIP_NAME}, "
                    "so its pages cannot be listed",
                    "search it with `deepfield remote search URL QUERY`",
                ) from None
            raise RemoteUnavailableError(
                f"{self.label} is not a memoryfield server (no {LISTING_FILE}, {ZIP_NAME} or "
                "/search)", "check the URL: it should be the field's root",
            ) from None
        return self._zip.list_files()

    def _listed(self, text: str) -> list[RemoteFile]:
        """The files a ``listing.md`` names; refused (before the mirror is touched) when it
        is no listing: a web app answering its HTML page for every path, or a listing of no
        pages (a memoryfield holds at least one)."""
        if _HTML.match(text):
            raise RemoteUnavailableError(
                f"{self.label} is not a memoryfield server: its {LISTING_FILE} is an HTML page",
                "check the URL: it should be the field's root (where listing.md is)",
            )
        names = parse_listing(text)
        if not names:
            raise RemoteUnavailableError(
                f"{self.label} is not a memoryfield server: its {LISTING_FILE} links no pages",
                "check the URL: it should be the root of a field with at least one page",
            )
        return [RemoteFile(check_file_name(n, self.label)) for n in ["index.md", *names]]

    def fetch(self, name: str) -> bytes:
        if self._zip is not None:
            return self._zip.fetch(name)
        found = self.fetch_if_changed(RemoteFile(name), None)
        assert found is not None
        return found[1]

    def fetch_if_changed(
        self, file: RemoteFile, known: RemoteFile | None
    ) -> tuple[RemoteFile, bytes] | None:
        if self._zip is not None:
            return file, self._zip.fetch(file.name)
        headers = {}
        if known is not None and known.version:
            headers["If-None-Match"] = known.version
        if known is not None and known.timestamp is not None:
            headers["If-Modified-Since"] = email.utils.formatdate(known.timestamp, usegmt=True)
        name = check_file_name(file.name, self.label)
        response, data = self._get(self.base + quote(name), headers)
        if response.status_code == 304 and known is not None:
            return None
        if response.status_code in (404, 410):
            raise MissingRemoteFileError(name)
        if response.status_code != 200:
            raise self._unexpected(name, response)
        stamp = _http_time(response.headers.get("last-modified"))
        return RemoteFile(name, len(data), stamp, response.headers.get("etag")), data

    def _has_search(self) -> bool:
        try:
            self.search("", k=1)
        except RemoteUnavailableError:
            return False
        return True

    def search(self, query: str, k: int = 10) -> list[dict[str, Any]]:
        """The server's ``/search`` results (spec shape checked: filename and frontmatter)."""
        response, data = self._get(self.base + "search", params={"q": query, "k": k})
        if response.status_code != 200:
            raise self._unexpected("/search", response)
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or not all(
            isinstance(r, dict) and isinstance(r.get("filename"), str) for r in results
        ):
            raise RemoteUnavailableError(
                f"{self.label}/search did not answer the spec's JSON "
                '({"results": [{"filename", "frontmatter"}, ...]})',
                "the server is misbehaving; read it through listing.md or memoryfield.zip",
            )
        return results[:k] if k else results

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        self.client.close()
