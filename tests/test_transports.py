"""Remote fields over real transports on 127.0.0.1: HTTP servers, moto's S3 server, git repos.

Each transport is read into a local mirror with its own index; refreshes fetch only what
changed and drop what the remote deleted; failures are one clear error that leaves the store
and the previous mirror as they were.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import http.server
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

import deepfield
from deepfield import portable
from deepfield.errors import (
    RemoteUnavailableError,
    RemoteUnreachableError,
    TransportError,
    UnknownTransportError,
)
from deepfield.page import iso_from_timestamp
from deepfield.store_openers import normal_url

from .test_portable_archive import run_main

PAGES = {
    "carbon-fibre-woks.md": "---\ntitle: Carbon fibre woks\n---\n\nCarbon fibre woks heat "
                            "unevenly.\n",
    "finnish-bureaucracy.md": "---\ntitle: Finnish bureaucracy\n---\n\nForms in triplicate.\n",
    "wec-season.md": "# WEC season\n\nEndurance racing notes.\n",
}


def write_field(folder: Path, pages: dict[str, str] = PAGES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.md").write_text("# Kitchen and travel\n")
    for name, text in pages.items():
        (folder / name).write_text(text)
    return folder


def mirror_pages(field: deepfield.Field) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(field.path.glob("*.md"))
            if p.name not in ("index.md", "listing.md")}


# ---------------------------------------------------------------------- HTTP


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        pass


def serve(handler: Any) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture
def static_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A plain static file server over a folder (no /search)."""
    root = tmp_path / "www"
    root.mkdir()
    server, url = serve(functools.partial(_QuietHandler, directory=str(root)))
    yield root, url
    server.shutdown()
    server.server_close()


def test_http_listing_route_and_conditional_refresh(
    store: deepfield.Store, static_server: tuple[Path, str], tmp_path: Path
) -> None:
    root, url = static_server
    source = write_field(root / "kitchen")
    # A listing.md as deepfield writes it (indexing the folder as a field generates one).
    deepfield.open_field(source, None).index()
    cache = tmp_path / "cache"
    remote = portable.open_remote(url + "kitchen/", embedder=store.embedder, cache=cache)
    assert remote.name == "kitchen"
    assert mirror_pages(remote) == PAGES
    assert remote.search("woks", mode="bm25").results[0].filename == "carbon-fibre-woks.md"
    assert remote.read("wec-season").text.startswith("# WEC season")
    stamp = (source / "wec-season.md").stat().st_mtime
    assert {d.filename: d.last_modified for d in remote.pages()}["wec-season.md"] == \
        iso_from_timestamp(stamp)
    # Change one page (newer mtime), delete another from the listing: one GET, one removal.
    (source / "carbon-fibre-woks.md").write_text("# Woks\n\nSeasoned with oil.\n")
    os.utime(source / "carbon-fibre-woks.md", (stamp + 5, stamp + 5))
    (source / "finnish-bureaucracy.md").unlink()
    deepfield.open_field(source, None).index()
    again = portable.open_remote(url + "kitchen/", embedder=store.embedder, cache=cache)
    report = again.refresh_report
    assert report is not None
    assert (report.fetched, report.removed) == (1, 1)
    assert report.unchanged == 2  # index.md and wec-season.md answered 304
    assert again.search("seasoned oil", mode="bm25").results[0].filename == \
        "carbon-fibre-woks.md"
    assert "finnish-bureaucracy.md" not in mirror_pages(again)


def test_http_zip_route_and_pinned_zip_url(
    store: deepfield.Store, static_server: tuple[Path, str], tmp_path: Path
) -> None:
    root, url = static_server
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early.")
    (root / "travel").mkdir()
    packed = portable.pack(field, root / "travel" / "memoryfield.zip")
    cache = tmp_path / "cache"
    remote = portable.open_remote(url + "travel", embedder=store.embedder, cache=cache)
    assert list(mirror_pages(remote)) == ["helsinki-trip.md"]
    assert remote.refresh_report is not None and remote.refresh_report.transport == "http"
    pinned = portable.open_remote(f"{url}travel/memoryfield.zip#sha256={packed.sha256}",
                                  embedder=store.embedder, cache=cache)
    assert list(mirror_pages(pinned)) == ["helsinki-trip.md"]
    with pytest.raises(deepfield.errors.PinMismatchError):
        portable.open_remote(f"{url}travel/memoryfield.zip#sha256={'0' * 64}", cache=cache)
    # The server's zip turns hostile: refused, and the earlier mirror is still there.
    import zipfile

    with zipfile.ZipFile(root / "travel" / "memoryfield.zip", "w") as hostile:
        hostile.writestr("../escape.md", "# out\n")
    stamp = time.time() + 10
    os.utime(root / "travel" / "memoryfield.zip", (stamp, stamp))
    with pytest.raises(deepfield.errors.UnsafeArchiveError, match="path traversal"):
        portable.open_remote(url + "travel", embedder=store.embedder, cache=cache)
    assert list(mirror_pages(remote)) == ["helsinki-trip.md"]
    assert not list(tmp_path.rglob("escape.md"))


def test_an_oversized_zip_is_refused_while_it_streams_to_disk(
    store: deepfield.Store, static_server: tuple[Path, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepfield.portable.transports import http as http_transport
    from deepfield.portable.zipsafe import ZipLimits

    root, url = static_server
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early. " * 50)
    (root / "travel").mkdir()
    portable.pack(field, root / "travel" / "memoryfield.zip")
    monkeypatch.setattr(http_transport, "DEFAULT_LIMITS", ZipLimits(max_total_bytes=200))
    cache = tmp_path / "cache"
    with pytest.raises(RemoteUnavailableError, match="larger than 200 bytes"):
        portable.open_remote(url + "travel", cache=cache)
    assert not [p for p in cache.rglob("*") if p.name.endswith((".tmp", ".zip"))]


def test_a_pin_is_checked_or_refused_never_ignored(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store,
    static_server: tuple[Path, str], tmp_path: Path,
) -> None:
    root, url = static_server
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early.")
    (root / "travel").mkdir()
    packed = portable.pack(field, root / "travel" / "memoryfield.zip")
    deepfield.open_field(write_field(root / "travel"), None).index()  # a listing.md too
    cache = tmp_path / "cache"
    # A pinned server field is read through its zip (where the pin is checked), not page by
    # page through listing.md.
    pinned = portable.open_remote(f"{url}travel/#sha256={packed.sha256}", cache=cache)
    try:
        assert list(mirror_pages(pinned)) == ["helsinki-trip.md"]
    finally:
        pinned.close()
    with pytest.raises(deepfield.errors.PinMismatchError):
        portable.open_remote(f"{url}travel/", pin="0" * 64, cache=cache)
    with pytest.raises(TransportError, match="pin"):
        portable.remote_search(f"{url}travel/#sha256={packed.sha256}", "sauna")
    code, _, stderr = run_main(capsys, "--store", str(store.root), "remote", "search",
                               f"{url}travel/", "sauna", "--sha256", "0" * 64)
    assert code == 1 and "not the pinned" in stderr
    # Sources that cannot be pinned refuse a pin instead of dropping it.
    folder = write_field(tmp_path / "plain")
    with pytest.raises(TransportError, match="pins are for"):
        portable.open_remote(f"{folder}#sha256={packed.sha256}", cache=cache)
    (root / "bare").mkdir()
    (root / "bare" / "index.md").write_text("# bare\n")
    with pytest.raises(RemoteUnavailableError, match="pin cannot be checked"):
        portable.open_remote(f"{url}bare/", pin=packed.sha256, cache=cache)


class _SearchHandler(http.server.BaseHTTPRequestHandler):
    """A tiny memoryfield server with only /search and /{page}.md (no listing, no zip)."""

    answer: Any = None

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        parsed = urlparse(self.path)
        if parsed.path == "/search":
            query = parse_qs(parsed.query).get("q", [""])[0].lower()
            body = self.answer if self.answer is not None else {"results": [
                {"filename": name, "frontmatter": None, "score": 1.0}
                for name, text in PAGES.items() if query in text.lower()
            ]}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        elif parsed.path.lstrip("/") in PAGES:
            data = PAGES[parsed.path.lstrip("/")].encode()
            self.send_response(200)
        else:
            data = b"not found"
            self.send_response(404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_http_search_route(capsys: pytest.CaptureFixture[str], store: deepfield.Store,
                           tmp_path: Path) -> None:
    server, url = serve(_SearchHandler)
    try:
        results = portable.remote_search(url, "woks")
        assert [r["filename"] for r in results] == ["carbon-fibre-woks.md"]
        code, stdout, _ = run_main(capsys, "--store", str(store.root), "remote", "search",
                                   url, "woks", "--json")
        assert code == 0 and json.loads(stdout)["source"] == "server"
        # Its pages cannot be listed, so it cannot be mirrored: a clear error.
        with pytest.raises(RemoteUnavailableError, match="/search"):
            portable.open_remote(url, cache=tmp_path / "cache")
        _SearchHandler.answer = {"hits": "nonsense"}
        with pytest.raises(RemoteUnavailableError, match="spec's JSON"):
            portable.remote_search(url, "woks")
    finally:
        _SearchHandler.answer = None
        server.shutdown()
        server.server_close()


class _FlakyHandler(_QuietHandler):
    """Serves the folder, but pages answer 500 while ``broken`` is set."""

    broken = False

    def do_GET(self) -> None:
        if self.broken and self.path.endswith(".md") and "listing" not in self.path:
            self.send_error(500, "boom")
            return
        super().do_GET()


def test_misbehaving_and_unreachable_http_leave_the_mirror_alone(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, tmp_path: Path
) -> None:
    root = tmp_path / "www"
    write_field(root)
    deepfield.open_field(root, None).index()
    server, url = serve(functools.partial(_FlakyHandler, directory=str(root)))
    cache = tmp_path / "cache"
    try:
        first = portable.open_remote(url, embedder=store.embedder, cache=cache)
        before = mirror_pages(first)
        (root / "wec-season.md").write_text("# changed\n")
        os.utime(root / "wec-season.md", (time.time() + 10, time.time() + 10))
        _FlakyHandler.broken = True
        with pytest.raises(RemoteUnavailableError, match="HTTP 500"):
            portable.open_remote(url, embedder=store.embedder, cache=cache)
        assert mirror_pages(first) == before
    finally:
        _FlakyHandler.broken = False
        server.shutdown()
        server.server_close()
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "search", "x", "-f",
                                    dead)
    assert code == 1 and stdout == "" and stderr.startswith("error: cannot read http://")
    assert stderr.count("\n") == 1


class _TrickleHandler(_QuietHandler):
    """Promises a large body for anything under /trickle/, then sends a byte now and then."""

    def do_GET(self) -> None:
        if not self.path.startswith("/trickle"):
            super().do_GET()
            return
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(100):  # at most 10 s, should the client never give up
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)


def test_a_trickling_server_is_given_up_at_the_deadline(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepfield.portable.transports import http as http_transport

    monkeypatch.setattr(http_transport, "DEADLINE", 1.0)
    root = tmp_path / "www"
    root.mkdir()
    server, url = serve(functools.partial(_TrickleHandler, directory=str(root)))
    try:
        for source in (url + "trickle/", url + "trickle/notes.memoryfield.zip"):
            started = time.monotonic()
            with pytest.raises(RemoteUnreachableError, match=r"no complete reply .* within 1 s"):
                portable.open_remote(source, cache=tmp_path / "cache")
            assert time.monotonic() - started < 5
        started = time.monotonic()
        code, stdout, stderr = run_main(capsys, "--store", str(store.root), "search", "x",
                                        "-f", url + "trickle/")
        assert time.monotonic() - started < 5
        assert code == 1 and stdout == "" and "no complete reply" in stderr
        assert stderr.count("\n") == 1
    finally:
        server.shutdown()
        server.server_close()


def test_an_unreachable_source_falls_back_on_its_cached_mirror(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, tmp_path: Path
) -> None:
    root = tmp_path / "www"
    deepfield.open_field(write_field(root / "notes"), None).index()  # writes listing.md
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early.")
    packed = portable.pack(field, root / "travel.memoryfield.zip")
    server, url = serve(functools.partial(_QuietHandler, directory=str(root)))
    pinned = f"{url}travel.memoryfield.zip#sha256={packed.sha256}"
    try:
        code, stdout, _ = run_main(capsys, "--store", str(store.root), "search", "wok", "-f",
                                   url + "notes/")
        assert code == 0 and "carbon-fibre-woks" in stdout
        portable.open_remote(pinned, cache=tmp_path / "cache").close()
    finally:
        server.shutdown()
        server.server_close()
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "search", "wok", "-f",
                                    url + "notes/")
    assert code == 0 and "carbon-fibre-woks" in stdout
    assert stderr.startswith("warning: using the copy fetched at ")
    assert "Connection refused" in stderr.splitlines()[0]
    # A pinned zip falls back on a mirror of exactly that zip, never on another pin's.
    remote = portable.open_remote(pinned, cache=tmp_path / "cache")
    assert remote.refresh_report is not None and remote.refresh_report.stale
    assert list(mirror_pages(remote)) == ["helsinki-trip.md"]
    remote.close()
    with pytest.raises(RemoteUnreachableError):
        portable.open_remote(f"{url}travel.memoryfield.zip#sha256={'0' * 64}",
                             cache=tmp_path / "cache")
    # No cached copy: the error as it is.
    with pytest.raises(RemoteUnreachableError, match="cannot read"):
        portable.open_remote(url + "other/", cache=tmp_path / "cache")


def test_a_missing_zip_url_says_http_404(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, static_server: tuple[Path, str]
) -> None:
    _, url = static_server
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "search", "x", "-f",
                                    url + "missing.memoryfield.zip")
    assert code == 1 and stdout == ""
    assert stderr.startswith(f"error: HTTP 404 for {url}missing.memoryfield.zip")
    assert stderr.count("\n") == 1


# ---------------------------------------------------------------------- S3


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    import boto3

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    client = boto3.client("s3")
    bucket = f"fields-{os.getpid()}-{time.monotonic_ns()}"
    client.create_bucket(Bucket=bucket)
    yield client, bucket
    client.close()


def test_s3_prefix_mirror_uses_list_objects_timestamps(
    s3: Any, store: deepfield.Store, tmp_path: Path
) -> None:
    client, bucket = s3
    for name, text in PAGES.items():
        client.put_object(Bucket=bucket, Key=f"shared/kitchen/{name}", Body=text.encode())
    client.put_object(Bucket=bucket, Key="shared/kitchen/logs/deep.md", Body=b"# not a page")
    client.put_object(Bucket=bucket, Key="shared/other.md", Body=b"# other field")
    # Not a page, and a name no folder could hold: passed over, not a reason to refuse.
    client.put_object(Bucket=bucket, Key="shared/kitchen/2026-01-01T10:00.json", Body=b"{}")
    cache = tmp_path / "cache"
    remote = portable.open_remote(f"s3://{bucket}/shared/kitchen", embedder=store.embedder,
                                  cache=cache)
    assert remote.name == "kitchen" and mirror_pages(remote) == PAGES
    listed = client.list_objects_v2(Bucket=bucket, Prefix="shared/kitchen/", Delimiter="/")
    expected = {item["Key"].rsplit("/", 1)[-1]: iso_from_timestamp(
        item["LastModified"].timestamp()) for item in listed["Contents"]}
    expected.pop("2026-01-01T10:00.json")
    assert {d.filename: d.last_modified for d in remote.pages()} == expected
    assert remote.search("triplicate", mode="bm25").results[0].filename == \
        "finnish-bureaucracy.md"
    client.put_object(Bucket=bucket, Key="shared/kitchen/wec-season.md", Body=b"# Le Mans\n")
    client.delete_object(Bucket=bucket, Key="shared/kitchen/carbon-fibre-woks.md")
    again = portable.open_remote(f"s3://{bucket}/shared/kitchen", embedder=store.embedder,
                                 cache=cache)
    report = again.refresh_report
    assert report is not None and (report.fetched, report.removed, report.unchanged) == (1, 1, 1)
    assert mirror_pages(again)["wec-season.md"] == "# Le Mans\n"


def test_an_upper_case_scheme_names_the_same_remote_field(
    s3: Any, store: deepfield.Store, tmp_path: Path
) -> None:
    """`-f S3://bucket/x` failed with 'Invalid bucket name "S3:"': URL schemes are
    case-insensitive, and the upper-case spelling shares the lower-case one's mirror."""
    client, bucket = s3
    for name, text in PAGES.items():
        client.put_object(Bucket=bucket, Key=f"shared/kitchen/{name}", Body=text.encode())
    cache = tmp_path / "cache"
    lower = portable.open_remote(f"s3://{bucket}/shared/kitchen", embedder=store.embedder,
                                 cache=cache)
    upper = portable.open_remote(f"S3://{bucket}/shared/kitchen", embedder=store.embedder,
                                 cache=cache)
    assert upper.name == "kitchen" and mirror_pages(upper) == PAGES
    assert upper.path == lower.path
    report = upper.refresh_report
    assert report is not None and report.fetched == 0
    assert normal_url("GIT+HTTPS://Host/Repo.git#Main") == \
        "git+https://Host/Repo.git#Main"


def test_s3_errors_are_clear(
    s3: Any, capsys: pytest.CaptureFixture[str], store: deepfield.Store,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    _, bucket = s3
    with pytest.raises(RemoteUnavailableError, match="NoSuchBucket"):
        portable.open_remote("s3://no-such-bucket-here/x", cache=tmp_path / "cache")
    client, _ = s3
    client.put_object(Bucket=bucket, Key="odd/c:evil.md", Body=b"# evil")
    with pytest.raises(RemoteUnavailableError, match="unsafe file name"):
        portable.open_remote(f"s3://{bucket}/odd", cache=tmp_path / "cache")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    before = sorted(p.name for p in store.root.iterdir())
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "search", "woks",
                                    "-f", f"s3://{bucket}/kitchen")
    assert code == 1 and stdout == ""
    assert stderr == (f"error: no AWS credentials to read s3://{bucket}/kitchen (set "
                      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)\n")
    assert sorted(p.name for p in store.root.iterdir()) == before


# ---------------------------------------------------------------------- git


def git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    if when is not None:
        stamp = f"{when} +0000"
        env |= {"GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.org",
         "-c", "init.defaultBranch=main", *args],
        cwd=repo, env=env, capture_output=True, text=True, check=True,
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = write_field(tmp_path / "kitchen-repo")
    git(repo, "init", "-q")
    git(repo, "add", "index.md", "carbon-fibre-woks.md")
    git(repo, "commit", "-q", "-m", "first", when=1_700_000_000)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "second", when=1_700_100_000)
    return repo


def test_git_mirror_uses_committer_dates(
    repo: Path, store: deepfield.Store, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    os.utime(repo / "carbon-fibre-woks.md", (1_800_000_000, 1_800_000_000))  # mtime: ignored
    remote = portable.open_remote(f"git+{repo}", embedder=store.embedder, cache=cache)
    assert remote.name == "kitchen-repo" and mirror_pages(remote) == PAGES
    dates = {d.filename: d.last_modified for d in remote.pages()}
    assert dates["carbon-fibre-woks.md"] == iso_from_timestamp(1_700_000_000)
    assert dates["wec-season.md"] == iso_from_timestamp(1_700_100_000)
    # A new commit changes one page and deletes another; an older ref still has both.
    (repo / "wec-season.md").write_text("# WEC\n\nLe Mans in June.\n")
    git(repo, "rm", "-q", "finnish-bureaucracy.md")
    git(repo, "commit", "-q", "-am", "third", when=1_700_200_000)
    again = portable.open_remote(f"git+{repo}", embedder=store.embedder, cache=cache)
    report = again.refresh_report
    assert report is not None and (report.fetched, report.removed) == (1, 1)
    when = {d.filename: d.last_modified for d in again.pages()}
    assert when["wec-season.md"] == iso_from_timestamp(1_700_200_000)
    assert when["carbon-fibre-woks.md"] == iso_from_timestamp(1_700_000_000)
    assert again.search("le mans", mode="bm25").results[0].filename == "wec-season.md"
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    old = portable.open_remote(f"git+{repo}#{first}", embedder=store.embedder, cache=cache)
    assert list(mirror_pages(old)) == ["carbon-fibre-woks.md"]


def test_git_errors_are_clear(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, repo: Path, tmp_path: Path
) -> None:
    plain = write_field(tmp_path / "not-a-repo")
    with pytest.raises(RemoteUnavailableError, match="cannot read git repository") as caught:
        portable.open_remote(f"git+{plain}", cache=tmp_path / "cache")
    assert "does not appear to be a git repository" in caught.value.message  # git's own reason
    with pytest.raises(RemoteUnavailableError, match="no-such-branch"):
        portable.open_remote(f"git+{repo}#no-such-branch", cache=tmp_path / "cache")
    with pytest.raises(TransportError):
        portable.open_remote("git+--upload-pack=evil", cache=tmp_path / "cache")
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "ls", f"git+{plain}")
    assert code == 1 and stdout == "" and stderr.count("\n") == 1
    assert stderr.startswith("error: cannot read git repository")


def test_git_credentials_stay_out_of_messages_and_the_cache(
        capsys: pytest.CaptureFixture[str], store: deepfield.Store, tmp_path: Path) -> None:
    from deepfield.portable.transports.git import GitTransport

    secret = "git+http://u:s3cretPW@127.0.0.1:1/notes.git#main"
    with pytest.raises(RemoteUnavailableError) as caught:
        portable.open_remote(secret, cache=tmp_path / "cache")
    assert "s3cretPW" not in str(caught.value), caught.value
    assert "http://127.0.0.1:1/notes.git" in str(caught.value)
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "search", "x", "-f",
                                    secret, "--json")
    assert code == 1 and "s3cretPW" not in stdout + stderr
    transport = GitTransport(secret, tmp_path / "t")
    assert transport.label == "git+http://127.0.0.1:1/notes.git#main"
    assert transport.url == "http://u:s3cretPW@127.0.0.1:1/notes.git"  # git still gets it
    assert GitTransport("git+git@host:repo.git", tmp_path / "t").label == "git+git@host:repo.git"
    assert not any("s3cretPW" in p.read_text(errors="replace")
                   for p in (tmp_path / "cache").rglob("*") if p.is_file())


# ---------------------------------------------------------------------- misc


def test_unknown_sources_and_local_folders(tmp_path: Path, store: deepfield.Store) -> None:
    with pytest.raises(UnknownTransportError):
        portable.open_remote("ftp://example.org/field", cache=tmp_path / "cache")
    folder = write_field(tmp_path / "plain")
    mirrored = portable.open_remote(str(folder), embedder=store.embedder,
                                    cache=tmp_path / "cache")
    assert mirror_pages(mirrored) == PAGES
    stamp = dt.datetime.fromtimestamp((folder / "wec-season.md").stat().st_mtime, dt.UTC)
    assert {d.filename: d.last_modified for d in mirrored.pages()}["wec-season.md"] == \
        stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert not portable.is_remote_source(str(folder))
    assert portable.is_remote_source("s3://bucket/x") and portable.is_remote_source("a.zip")


def test_cli_remote_fetch_and_credentials_stay_out_of_messages(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, repo: Path
) -> None:
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "remote", "fetch",
                               f"git+{repo}", "--json")
    report = json.loads(stdout)
    assert code == 0 and report["transport"] == "git" and report["fetched"] == 4
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "remote", "fetch",
                               f"git+{repo}")
    assert code == 0 and "0 fetched, 4 unchanged, 0 removed" in stdout
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://reader:s3cret@127.0.0.1:{sock.getsockname()[1]}/field/"
    code, _, stderr = run_main(capsys, "--store", str(store.root), "remote", "fetch", dead)
    assert code == 1 and "s3cret" not in stderr and "127.0.0.1" in stderr
