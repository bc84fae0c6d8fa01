"""The LanceDB dataset of one field: its two tables, their indexes, and where they live.

A dataset is a LanceDB database folder (local, or a prefix in an S3-compatible bucket) named
for the field's model code, with two tables:

* ``chunks``: one row per chunk, self-contained, so a replica answers a search from this
  table alone: a stable key (a hash of filename and chunk number), the page (``doc``,
  a hash of the filename), the chunk's text, heading path, lines and kind, the page's
  title, uuid, summary, frontmatter and timestamp, the text BM25 searches (title and
  heading path, the body, CJK n-grams, as the SQLite index's three FTS5 columns), and the
  chunk vector (zeros and ``embedded = false`` until it is computed).
* ``pages``: one row per page with the sha256 and vector state it was written at: what a
  sync compares with the catalogue to find what changed, without reading the chunks.

Everything here is derived from the pages and rebuilt when missing or unreadable.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

    from .backend import BackendContext

CHUNKS = "chunks"
PAGES = "pages"
KEY_MASK = (1 << 63) - 1
ANN_MIN_ROWS = 20_000
"""Below this many chunk vectors LanceDB scans them all (exact, a few ms); above, an
IVF_HNSW_SQ index answers (docs/SCALE.md measures its recall against exact search)."""
HNSW_M = 16
HNSW_BUILD_EF = 64
"""HNSW graph degree and build-time beam. On bench/scale.py's vectors at 100k chunks (IVF_HNSW_SQ,
4 partitions) these built in 81 s against 70 s for m = 12 / ef 100 and gave the same recall
(0.99 at query ef 200); IVF_FLAT, IVF_SQ and IVF_PQ needed half their partitions probed for
0.9 and missed 0.95 (docs/SCALE.md)."""
SCALAR_MIN_ROWS = 5_000
"""Tables this big get B-tree indexes on ``key`` and ``filename``."""
ANN_PARTITION_ROWS = 500_000
"""Rows per IVF partition of the vector index (1M chunks: 2 graphs, built in parallel on 2
cores). Searches probe every partition (lance_query.NPROBES): on these vectors k-means
partitions do not hold a query's neighbours (16 partitions, 8 probed: recall 0.85), so
partitions only bound a graph's size. At 1M chunks of bench/scale.py's vectors, 2 graphs of
500k against 4 of 250k gave recall@10 0.960 against 0.978 and a vector search of 37 ms against
54 ms (p50, 2 cores); `bench/scale.py --ann-sweep 100000` rebuilds and measures both."""
OPTIMIZE_UNINDEXED = 5_000
"""Rows added since the indexes were last brought up to date that trigger ``optimize``
(new rows are searched exactly meanwhile, which slows searches, not results)."""
OPTIMIZE_EVERY_S = 30.0
"""A writer that keeps a dataset current (a bucket store's indexer, every round) folds new
rows into the indexes and compacts their small files at most this often; rows added since are
searched exactly meanwhile."""
KEEP_VERSIONS_S = 60.0
"""Old versions (and the files only they use) are removed this long after they were replaced:
long enough for a replica's copy (a second behind) and a reader's open version; short enough
that the dataset's folder, which every replica lists each second, stays a few hundred files."""
READ_CONSISTENCY_S = 1.0
"""How often a handle looks for a newer version of the tables (another process's writes)."""


class DatasetDamagedError(Exception):
    """The dataset cannot be read (deleted files, a torn manifest): rebuild it."""


def lancedb_module() -> Any:
    try:
        import lancedb
    except ImportError:
        raise ConfigError(
            "the lancedb index backend needs the lancedb package",
            "install it with `pip install 'deepfield[scale]'`, or set [index] backend = "
            "\"sqlite\" in deepfield.toml",
        ) from None
    return lancedb


ORD_BITS = 17
"""Chunk keys are a page id (46 bits of a hash of the filename) and the chunk's number (17
bits): a search groups its candidates by page without reading a column."""


def page_id(filename: str) -> int:
    """A page's id, the same in every process (a 46-bit hash of its filename)."""
    digest = hashlib.blake2b(filename.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") & KEY_MASK) >> ORD_BITS


def chunk_key(filename: str, ord_: int) -> int:
    """The key of chunk ``ord_`` of a page (numbers past 2^17 share keys: a page of that
    many chunks is 1 MiB of one-word lines)."""
    return (page_id(filename) << ORD_BITS) | (ord_ & ((1 << ORD_BITS) - 1))


def page_of(key: int) -> int:
    return key >> ORD_BITS


def storage_options_from_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """LanceDB's object-store settings from the usual AWS variables (AWS_ENDPOINT_URL for
    MinIO, R2, moto…), so the dataset and boto3 reach the same bucket."""
    env = dict(os.environ if env is None else env)
    options: dict[str, str] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["aws_endpoint"] = endpoint
        if endpoint.startswith("http://"):
            options["allow_http"] = "true"
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["aws_region"] = region
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if env.get(key):
            options[key.lower()] = env[key]
    # Any other object-store setting, by name: DEEPFIELD_LANCE_TIMEOUT=5s is `timeout`. A
    # bucket that accepts connections and never answers held a search for minutes under the
    # defaults (30 s a request, retried); a short timeout with no retries gives up in seconds,
    # at the price of failing large reads on a slow link, so it is the operator's call.
    for key, value in env.items():
        if key.startswith(LANCE_OPTION_PREFIX) and len(key) > len(LANCE_OPTION_PREFIX) and value:
            options[key[len(LANCE_OPTION_PREFIX):].lower()] = value
    return options


LANCE_OPTION_PREFIX = "DEEPFIELD_LANCE_"
"""Environment variables named with this prefix are passed to LanceDB's object store as the
setting named by the rest, lower-cased (DEEPFIELD_LANCE_CLIENT_MAX_RETRIES=0)."""


def chunks_schema(dim: int | None) -> pa.Schema:
    import pyarrow as pa

    fields = [
        ("key", pa.int64()), ("doc", pa.int64()), ("filename", pa.string()),
        ("ord", pa.int32()), ("kind", pa.string()), ("heading", pa.string()),
        ("line_start", pa.int32()), ("line_end", pa.int32()), ("body", pa.string()),
        ("text", pa.string()), ("title", pa.string()), ("uuid", pa.string()),
        ("summary", pa.string()), ("frontmatter", pa.string()),
        ("last_modified", pa.string()), ("size", pa.int64()), ("superseded", pa.bool_()),
        ("embedded", pa.bool_()),
    ]
    if dim:
        fields.append(("vector", pa.list_(pa.float32(), dim)))
    return pa.schema(fields)


def pages_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("filename", pa.string()), ("doc", pa.int64()), ("sha256", pa.string()),
                      ("complete", pa.bool_()), ("chunks", pa.int32()),
                      ("superseded", pa.bool_())])


def quoted(values: list[str]) -> str:
    """An SQL list of string literals for a LanceDB ``IN (…)`` filter."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


class LanceDataset:
    """The tables of one field's dataset at ``uri`` (a folder or ``s3://…``)."""

    def __init__(self, uri: str, dim: int | None,
                 storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.dim = dim
        self.storage_options = dict(storage_options or {})
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._lock = threading.RLock()
        self.writing = threading.RLock()
        """Held by a sync for its whole diff-and-write (lance_backend.LanceBackend)."""
        self.generation = 0
        """Bumped by :meth:`forget`: a dataset opened again (rebuilt, or a copy swapped for a
        fresh one) may number its versions as the old one did, so caches keyed by a table's
        version key by this too."""
        self.rebuilt = 0
        self.rebuilds_in_a_row = 0
        """Rebuilds since the dataset last answered a read (LanceBackend.MAX_REBUILDS)."""
        self.optimized_at = 0.0
        """time.monotonic() of this handle's last ``optimize`` (0: never)."""
        """How many times this handle found the dataset gone or damaged and started over."""

    @property
    def local(self) -> bool:
        return "://" not in self.uri

    def _connect(self) -> Any:
        if self._db is None:
            lancedb = lancedb_module()
            if self.local:
                os.makedirs(self.uri, exist_ok=True)
            self._db = lancedb.connect(
                self.uri, read_consistency_interval=timedelta(seconds=READ_CONSISTENCY_S),
                storage_options=self.storage_options or None)
        return self._db

    def table(self, name: str, *, create: bool = False) -> Any:
        """The table ``name`` (None if it does not exist and ``create`` is False)."""
        with self._lock:
            table = self._tables.get(name)
            if table is not None:
                return table
            db = self._connect()
            try:
                table = db.open_table(name)
            except (ValueError, FileNotFoundError):  # lancedb: "Table 'x' was not found"
                if not create:
                    return None
                schema = chunks_schema(self.dim) if name == CHUNKS else pages_schema()
                table = db.create_table(name, schema=schema, exist_ok=True)
            except Exception as exc:
                raise DatasetDamagedError(f"{self.uri}/{name}: {exc}") from exc
            self._tables[name] = table
            return table

    def forget(self) -> None:
        """Drop the open handles (the next use opens the dataset again)."""
        with self._lock:
            self._tables.clear()
            self._db = None
            self.generation += 1

    def drop(self) -> None:
        """Delete the whole dataset (it is derived data)."""
        with self._lock:
            self.forget()
            self.rebuilt += 1
            self.rebuilds_in_a_row += 1
            if self.local:
                shutil.rmtree(self.uri, ignore_errors=True)
                return
            db = self._connect()
            for name in (CHUNKS, PAGES):
                with contextlib.suppress(Exception):
                    db.drop_table(name)
            self.forget()

    # ------------------------------------------------------------------ reads

    def page_states(self) -> dict[str, tuple[str, bool]]:
        """filename -> (sha256 hex, all its chunks have vectors) as the dataset holds them."""
        table = self.table(PAGES)
        if table is None:
            return {}
        try:
            data = table.search().select(["filename", "sha256", "complete"]).limit(None) \
                .to_arrow()
        except Exception as exc:
            raise DatasetDamagedError(f"{self.uri}/{PAGES}: {exc}") from exc
        return dict(zip(data["filename"].to_pylist(),
                        zip(data["sha256"].to_pylist(), data["complete"].to_pylist(),
                            strict=True), strict=True))

    # ------------------------------------------------------------------ writes

    def replace_pages(self, gone: list[str], chunks: pa.Table, pages: pa.Table) -> None:
        """Drop the rows of the pages in ``gone``, then add ``chunks`` and ``pages``.
        Chunks are written before the page rows that vouch for them: a sync interrupted in
        between writes the page again next time."""
        chunk_table = self.table(CHUNKS, create=True)
        page_table = self.table(PAGES, create=True)
        for start in range(0, len(gone), 500):
            where = f"filename IN ({quoted(gone[start:start + 500])})"
            chunk_table.delete(where)
            page_table.delete(where)
        if chunks.num_rows:
            chunk_table.add(chunks)
        if pages.num_rows:
            page_table.add(pages)

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Create the indexes a table lacks and fold rows added since into them
        (``optimize``, which also compacts the small files each write adds)."""
        done: dict[str, Any] = {}
        table = self.table(CHUNKS)
        if table is None:
            return done
        names = {index.name for index in table.list_indices()}
        rows = table.count_rows()
        if "text_idx" not in names and rows:
            from lancedb.index import FTS

            started = time.monotonic()
            table.create_index("text", config=FTS(with_position=False), name="text_idx")
            done["fts_s"] = time.monotonic() - started
        for column in ("key", "filename"):  # hits are read by key, pages replaced by name
            if f"{column}_idx" not in names and rows >= SCALAR_MIN_ROWS:
                started = time.monotonic()
                table.create_scalar_index(column, index_type="BTREE", name=f"{column}_idx")
                done["scalar_s"] = done.get("scalar_s", 0.0) + time.monotonic() - started
        if self.dim and "vector_idx" not in names and rows >= ANN_MIN_ROWS:
            started = time.monotonic()
            embedded = table.count_rows("embedded")
            if embedded >= ANN_MIN_ROWS:
                from lancedb.index import HnswSq

                partitions = -(-embedded // ANN_PARTITION_ROWS)
                # (With ``config`` the first argument names the column.)
                table.create_index("vector", name="vector_idx",
                                   config=HnswSq(distance_type="dot", num_partitions=partitions,
                                                 m=HNSW_M, ef_construction=HNSW_BUILD_EF))
                done["ann_s"] = time.monotonic() - started
        unindexed = 0
        if not done:
            with contextlib.suppress(Exception):
                unindexed = table.index_stats("text_idx").num_unindexed_rows
        if force or unindexed >= OPTIMIZE_UNINDEXED:
            started = time.monotonic()
            keep = timedelta(seconds=KEEP_VERSIONS_S)
            table.optimize(cleanup_older_than=keep)
            pages = self.table(PAGES)
            if pages is not None:
                pages.optimize(cleanup_older_than=keep)
            self.optimized_at = time.monotonic()
            done["optimize_s"] = self.optimized_at - started
        return done

    def optimize_due(self) -> bool:
        return time.monotonic() - self.optimized_at >= OPTIMIZE_EVERY_S if self.optimized_at \
            else True


_DATASETS: dict[str, LanceDataset] = {}
_DATASETS_LOCK = threading.Lock()


DATASET_FORMAT = 1
"""Bumped when the rows or keys change: a dataset of another format is left alone (derived
data) and a new one is built beside it."""


def dataset_uri(context: BackendContext, model_code: str) -> str:
    """Where the dataset of a field (``context``) and model lives."""
    return f"{context.location.rstrip('/')}/lancedb/{model_code}.v{DATASET_FORMAT}"


def shared_dataset(uri: str, dim: int | None, options: dict[str, str]) -> LanceDataset:
    """One handle per dataset and process: its caches (the ANN index, opened files) are
    shared by every searcher of the field instead of loaded once per searcher."""
    with _DATASETS_LOCK:
        dataset = _DATASETS.get(uri)
        if dataset is None or dataset.dim != dim:
            dataset = _DATASETS[uri] = LanceDataset(uri, dim, options)
        return dataset
