"""A store in an S3-compatible bucket: ``deepfield.open("s3://bucket/prefix")``.

The bucket holds the store exactly as a folder would (the memoryfield layout): the store's
``deepfield.toml`` at the prefix, one sub-prefix per field with its pages, ``index.md``
and ``archive/``. Pages are the truth; each process that opens the store keeps a private
working copy of them (a cache folder it locks for itself, so two processes on one host never
share one) with its own SQLite catalogue, and every write goes to the bucket conditionally
(bucket/field.py). A field whose index backend is ``lancedb`` keeps its dataset in the bucket
too, under ``<field>/.deepfield/``: every replica searches it, and the one process holding
the indexer lease (bucket/lease.py) writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..config import (
    CONFIG_FILE,
    EmbeddingConfig,
    StoreConfig,
    check_default_options,
    load_config,
    render_config,
)
from ..embed.base import Embedder
from ..errors import (
    ConfigError,
    FieldExistsError,
    RemoteUnavailableError,
    StoreNotFoundError,
    UnknownFieldError,
    WriteConflictError,
)
from ..fsutil import atomic_write
from ..page import INTRO_FILE, is_valid_name, require_field_name
from ..store import Store, build_embedder, check_field_name, intro_page
from ..store_openers import StoreOpener
from .lease import Lease
from .objects import SCHEME, Bucket, ObjectConflictError

if TYPE_CHECKING:
    from .field import BucketField
    from .mirror import MirrorState

MAX_REPLICA_SLOTS = 64
CONFIG_EDIT_TRIES = 8
"""How often an edit of the bucket's deepfield.toml is tried again after losing a race."""


def stale_copy(exc: RemoteUnavailableError) -> str:
    """The warning of a read answered from the working copy because the bucket failed."""
    return f"{exc.message}; answering from this process's copy of the pages"


def is_bucket_url(text: str | os.PathLike[str]) -> bool:
    return isinstance(text, str) and text.startswith(SCHEME)


def cache_base() -> Path:
    explicit = os.environ.get("DEEPFIELD_BUCKET_CACHE")
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "deepfield" / "buckets"


def working_copy(url: str) -> tuple[Path, IO[bytes] | None]:
    """A cache folder for this process's copy of the store at ``url``, and the open lock
    file that keeps it this process's own: other processes on the host (replicas of one
    store) take other folders. A folder left by an earlier process is reused, which saves
    fetching its pages again."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL", "")
    digest = hashlib.sha256(f"{url}\n{endpoint}".encode()).hexdigest()[:12]
    base = cache_base() / f"{url[len(SCHEME):].split('/')[0]}-{digest}"
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: one process per store and host
        folder = base / "replica-0"
        folder.mkdir(parents=True, exist_ok=True)
        return folder, None
    for slot in range(MAX_REPLICA_SLOTS):
        folder = base / f"replica-{slot}"
        folder.mkdir(parents=True, exist_ok=True)
        handle = (folder / ".lock").open("ab")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return folder, handle
    raise StoreNotFoundError(f"{MAX_REPLICA_SLOTS} processes on this host have {url} open",
                             "close some of them")


class BucketStore(Store):
    """A store whose pages live in a bucket (see the module docstring)."""

    def __init__(self, url: str, bucket: Bucket, root: Path, config: StoreConfig,
                 embedder: Embedder | None, lock: IO[bytes] | None) -> None:
        super().__init__(root, config, embedder)
        self.url = url
        self.bucket = bucket
        self._lock_file = lock
        self._states: dict[str, MirrorState] = {}
        self._guard = threading.Lock()
        self.lease = Lease(bucket, ttl_s=config.server.lease_ttl_s)
        self.index_writer = True
        """Whether this process may take the indexer lease (False: a read-only replica)."""
        self.background_indexing = False
        """Set while a poller (bucket/poller.py) keeps the shared indexes current."""
        self.unreachable: str | None = None
        """Why the last refresh from the bucket failed (None: it worked): every search says
        it, as long as the working copy may be behind the bucket."""

    @contextlib.contextmanager
    def reaching(self) -> Iterator[None]:
        """Around a refresh from the bucket: keeps :attr:`unreachable` up to date."""
        try:
            yield
        except RemoteUnavailableError as exc:
            self.unreachable = stale_copy(exc)
            raise
        self.unreachable = None

    def __repr__(self) -> str:
        return f"BucketStore({self.url!r})"

    # ------------------------------------------------------------------ the indexer lease

    def may_write_index(self) -> bool:
        """Whether this process writes the store's shared indexes now: it holds the lease,
        taking it if it is free or expired (cheap while held: no request until renewal)."""
        if not self.index_writer:
            return False
        with self._guard:
            return self.lease.acquire()

    def indexer_name(self, *, ask: bool = True) -> str:
        """Who writes the store's shared indexes, for messages: this process, or the lease
        holder as the lease object names it (host:pid:…); ``ask=False``: as last seen, with
        no request (a search's warning must not wait on the bucket)."""
        if self.lease.held:
            return f"this process ({self.lease.holder})"
        holder = self.lease.seen
        if ask:
            with contextlib.suppress(RemoteUnavailableError):
                holder = self.lease.state().holder
        return "the replica holding the indexer lease" + (f" ({holder})" if holder else "")

    # ------------------------------------------------------------------ fields

    def _folders(self) -> list[str]:
        """The bucket's top-level folders (Store splits them into fields and skipped ones)."""
        _, folders = self.bucket.list("")
        return sorted(n for n in folders if not n.startswith((".", "_")))

    def skipped_folders(self) -> list[str]:
        try:
            return super().skipped_folders()
        except RemoteUnavailableError:
            return []  # said where the fields are listed

    def readable_field_names(self) -> list[str]:
        """The fields to list for reading: the bucket's, or while it cannot be reached those
        this process's working copy mirrors (reads answer from it, with the warning in
        :attr:`unreachable`); RemoteUnavailableError when it mirrors none."""
        try:
            return self.field_names()
        except RemoteUnavailableError as exc:
            states = self.root / ".state"
            names = sorted(p.stem for p in states.glob("*.json") if is_valid_name(p.stem)
                           and (self.root / p.stem).is_dir()) if states.is_dir() else []
            if not names:
                raise
            self.unreachable = stale_copy(exc)
            return names

    def state(self, name: str) -> MirrorState:
        from .mirror import MirrorState

        with self._guard:
            state = self._states.get(name)
            if state is None:
                state = self._states[name] = MirrorState(self.root / ".state" / f"{name}.json")
            return state

    def field(self, name: str) -> BucketField:
        require_field_name(name)
        cached = self._fields.get(name)
        if cached is not None:
            return cached  # type: ignore[return-value]
        if "/" in name or name.startswith("."):
            raise UnknownFieldError(f"no field {name!r} in store {self.url}")
        try:
            known = self.field_names()
        except RemoteUnavailableError as exc:
            # Reads answer from the working copy while the bucket is down (docs/SCALE.md):
            # a field this process's copy mirrors is opened on it, with the warning. A server
            # whose first request for the field came during the outage answered 502.
            if not (self.root / ".state" / f"{name}.json").is_file():
                raise
            self.unreachable = stale_copy(exc)
            known = [name]
        if name not in known:
            listed = ", ".join(known) or "none yet"
            raise UnknownFieldError(f"no field {name!r} in store {self.url} (fields: {listed})")
        field = self.open_handle(name)
        self._fields[name] = field
        return field

    def open_handle(self, name: str, embedder: Embedder | None = None) -> BucketField:
        from .field import BucketField

        (self.root / name).mkdir(exist_ok=True)
        field = BucketField(self, name, embedder or self.embedder,
                            self.config.index.backend_for(name), self.state(name))
        field.fast = self.config.index.fast
        field.page_vectors = self.config.index.page_vectors
        field.windows = self.config.index.windows
        return field

    def create_field(self, name: str, *, intro: str | None = None,
                     exist_ok: bool = False) -> BucketField:
        check_field_name(name)
        page = intro_page(name, intro)
        try:
            self.bucket.put(f"{name}/", b"", create=True)  # the folder marker
        except ObjectConflictError:
            if not exist_ok:
                raise FieldExistsError(f"field {name!r} already exists in {self.url}") from None
        if page is not None:
            with contextlib.suppress(ObjectConflictError):  # an existing introduction stays
                self.bucket.put(f"{name}/{INTRO_FILE}", page, create=True)
        return self.field(name)

    def discard_empty_field(self, name: str) -> bool:
        """Remove field ``name`` from the bucket when it holds nothing but derived state (a
        call that created it failed; see Service.discard_if_empty); True when it went. Its
        folder marker goes last, and only unchanged: a page another process writes meanwhile
        keeps the field listed."""
        check_field_name(name)
        objects, _ = self.bucket.list(f"{name}/", deep=True)
        if any(not item.name.startswith(".") for item in objects):
            return False
        with contextlib.suppress(ObjectConflictError):
            for item in objects:  # the field's own index state, if any was written
                self.bucket.delete(f"{name}/{item.name}", if_match=item.etag)
            marker = self.bucket.get(f"{name}/")
            if marker is not None:
                self.bucket.delete(f"{name}/", if_match=marker.etag)
        self.forget_field(name)
        with self._guard:
            self._states.pop(name, None)
        shutil.rmtree(self.root / name, ignore_errors=True)
        (self.root / ".state" / f"{name}.json").unlink(missing_ok=True)
        return name not in self.field_names()

    def refresh_config(self) -> bool:
        """Copy the bucket's deepfield.toml over this process's copy when it changed (True):
        a server's logins (server/auth.py) follow that file, so ``deepfield passwd`` on any
        machine reaches every running replica. RemoteUnavailableError when unreachable."""
        got = self.bucket.get(CONFIG_FILE)
        if got is None:  # removed by hand: keep what the store was opened with
            return False
        path = self.root / CONFIG_FILE
        try:
            if path.read_bytes() == got.data:
                return False
        except OSError:
            pass
        atomic_write(path, got.data, durable=False)
        return True

    def close(self) -> None:
        super().close()
        with contextlib.suppress(Exception):
            self.lease.release()
        self.bucket.close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def edit_bucket_config(url: str, edit: Callable[[str], str]) -> str:
    """Replace the deepfield.toml of the store at ``url`` with ``edit(its text)``, by a
    conditional write: an edit made meanwhile by another process is read and ``edit`` applied
    to it again, never overwritten. Returns the file's URL."""
    bucket = Bucket(url)
    try:
        for _ in range(CONFIG_EDIT_TRIES):
            got = bucket.get(CONFIG_FILE)
            if got is None:
                _, folders = bucket.list("")
                if not folders:
                    raise StoreNotFoundError(
                        f"no store at {url} (no {CONFIG_FILE} and no fields)",
                        f"create it with `deepfield --store {url} init`, or check the prefix")
            try:
                text = edit("" if got is None else got.data.decode("utf-8"))
            except UnicodeDecodeError:
                raise ConfigError(f"{url}/{CONFIG_FILE} is not UTF-8 text",
                                  "fix or replace it in the bucket") from None
            try:
                if got is None:
                    bucket.put(CONFIG_FILE, text.encode("utf-8"), create=True)
                else:
                    bucket.put(CONFIG_FILE, text.encode("utf-8"), if_match=got.etag)
            except ObjectConflictError:
                continue  # changed since it was read: edit the new version
            return f"{SCHEME}{bucket.name}/{bucket.prefix}{CONFIG_FILE}"
    finally:
        bucket.close()
    raise WriteConflictError(
        f"{url}/{CONFIG_FILE} kept changing while it was edited ({CONFIG_EDIT_TRIES} tries)",
        "try again")


def init_bucket_store(url: str, embedding: EmbeddingConfig) -> tuple[BucketStore, bool]:
    """Start a store at ``url`` with ``embedding`` written into its deepfield.toml (an
    existing store is opened as it is); (the store, whether it was created)."""
    check_default_options(embedding)  # before the bucket is reached: none takes no options
    bucket = Bucket(url)
    try:
        created = False
        if bucket.get(CONFIG_FILE) is None:
            text = render_config(StoreConfig(embedding))
            with contextlib.suppress(ObjectConflictError):  # another process just made it
                bucket.put(CONFIG_FILE, text.encode(), create=True)
                created = True
    finally:
        bucket.close()
    return open_bucket_store(url), created


def open_bucket_store(url: str, *, create: bool = False,
                      embedder: Embedder | str | None = "config") -> BucketStore:
    """Open (``create``: or start) the store at ``s3://bucket/prefix``; ``embedder`` as in
    :func:`deepfield.open`. Unreachable or refused buckets raise RemoteUnavailableError
    before anything is written locally."""
    bucket = Bucket(url)
    try:
        got = bucket.get(CONFIG_FILE)
        if got is None:
            _, folders = bucket.list("")
            if not create and not folders:
                raise StoreNotFoundError(
                    f"no store at {url} (no {CONFIG_FILE} and no fields)",
                    f"create it with `deepfield --store {url} init`, or check the prefix")
            named = isinstance(embedder, str) and embedder != "config"
            text = render_config(StoreConfig(EmbeddingConfig(str(embedder)) if named
                                             else EmbeddingConfig()))
            if create:
                with contextlib.suppress(ObjectConflictError):  # another process just made it
                    bucket.put(CONFIG_FILE, text.encode(), create=True)
                got = bucket.get(CONFIG_FILE)
            data = got.data if got is not None else text.encode()
        else:
            data = got.data
        root, lock = working_copy(url)
    except BaseException:
        bucket.close()
        raise
    atomic_write(root / CONFIG_FILE, data, durable=False)
    config = load_config(root)
    chosen: Any = build_embedder(config.embedding) if embedder == "config" else embedder
    if isinstance(chosen, str):
        chosen = build_embedder(EmbeddingConfig(chosen))
    return BucketStore(url, bucket, root, config, chosen, lock)


class BucketOpener(StoreOpener):
    """``s3://bucket/prefix`` for :func:`deepfield.open` and :func:`deepfield.init`: the
    built-in opener of deepfield.store_openers."""

    def open(self, url: str, *, create: bool, embedder: Embedder | str | None) -> Store:
        return open_bucket_store(url, create=create, embedder=embedder)

    def init(self, url: str, embedding: EmbeddingConfig | None) -> Store:
        return init_bucket_store(url, embedding or EmbeddingConfig())[0]


BUCKET_OPENER = BucketOpener()
