"""The per-field SQLite index file: schema, migrations and safe connections.

One file per field and embedding model, ``<model-code>.sqlite3`` at the field root (spec: vector
index filenames begin with the model code). It holds the spec's ``pages`` table, readable by any
memoryfield tool (one row per page: frontmatter JSON, mtime, sha256, float32 embedding of the
whole file), and deepfield's own ``df_*`` tables: documents, chunks with heading paths, an FTS5
table over the chunks kept in step by triggers, and chunk vectors. Keyword-only stores (no
embedding model) use ``bm25-only.sqlite3`` without the spec table, because it has no vectors.

Everything in it is derived from the Markdown and can be deleted at any time.
Connections use WAL and a busy timeout so several processes can read and write at once.
"""

from __future__ import annotations

import functools
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import IndexCorruptError, ModelMismatchError

SCHEMA_VERSION = 1
KEYWORD_ONLY_CODE = "bm25-only"
BUSY_TIMEOUT_MS = 30_000


def index_filename(model_code: str) -> str:
    return f"{model_code}.sqlite3"


_SCHEMA: tuple[str, ...] = (
    """
        CREATE TABLE IF NOT EXISTS df_docs (
            id            INTEGER PRIMARY KEY,
            filename      TEXT NOT NULL UNIQUE,
            uuid          TEXT,
            title         TEXT NOT NULL,
            summary       TEXT,
            frontmatter   TEXT NOT NULL,       -- JSON, 'null' when the page has none
            sha256        BLOB NOT NULL,
            mtime_ns      INTEGER NOT NULL,
            size          INTEGER NOT NULL,
            last_modified TEXT NOT NULL,       -- ISO 8601 from the transport's timestamp
            warnings      TEXT NOT NULL DEFAULT '[]',
            page_embedded INTEGER NOT NULL DEFAULT 0
        )
    """,
    """
        CREATE INDEX IF NOT EXISTS df_docs_uuid ON df_docs(uuid)
    """,
    """
        CREATE TABLE IF NOT EXISTS df_chunks (
            id          INTEGER PRIMARY KEY,
            doc_id      INTEGER NOT NULL REFERENCES df_docs(id) ON DELETE CASCADE,
            ord         INTEGER NOT NULL,
            kind        TEXT NOT NULL,
            heading     TEXT NOT NULL,         -- heading path joined with ' > '
            line_start  INTEGER NOT NULL,
            line_end    INTEGER NOT NULL,
            body        TEXT NOT NULL,         -- the chunk's Markdown text
            context     TEXT NOT NULL,         -- page title and heading path, searched too
            cjk         TEXT NOT NULL,         -- CJK unigrams + bigrams (see index/cjk.py)
            embedding   BLOB                   -- float32, NULL until embedded
        )
    """,
    """
        CREATE INDEX IF NOT EXISTS df_chunks_doc ON df_chunks(doc_id)
    """,
    """
        CREATE INDEX IF NOT EXISTS df_chunks_pending ON df_chunks(id) WHERE embedding IS NULL
    """,
    """
        CREATE VIRTUAL TABLE IF NOT EXISTS df_chunks_fts USING fts5(
            body, context, cjk,
            content='df_chunks', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )
    """,
    """
        CREATE TRIGGER IF NOT EXISTS df_chunks_ai AFTER INSERT ON df_chunks BEGIN
            INSERT INTO df_chunks_fts(rowid, body, context, cjk)
            VALUES (new.id, new.body, new.context, new.cjk);
        END
    """,
    """
        CREATE TRIGGER IF NOT EXISTS df_chunks_ad AFTER DELETE ON df_chunks BEGIN
            INSERT INTO df_chunks_fts(df_chunks_fts, rowid, body, context, cjk)
            VALUES ('delete', old.id, old.body, old.context, old.cjk);
        END
    """,
)


def _m001_initial(conn: sqlite3.Connection, with_vectors: bool) -> None:
    if with_vectors:
        # The spec's table, verbatim, so other memoryfield readers can use this file.
        conn.execute(
            """CREATE TABLE IF NOT EXISTS pages (
                filename      TEXT PRIMARY KEY,
                frontmatter   JSON NOT NULL,
                last_modified DATETIME NOT NULL,
                sha256_hash   BLOB NOT NULL,
                embedding     BLOB NOT NULL
            )"""
        )
    # One statement at a time: executescript() would COMMIT the surrounding transaction.
    for statement in _SCHEMA:
        conn.execute(statement)


def _m002_pending_indexes(conn: sqlite3.Connection, with_vectors: bool) -> None:
    # embed_pending and count_pending read only the rows still waiting for a vector; without
    # these every batch of 32 (and every pre-search sync) walks all the embedded rows again.
    conn.execute(
        "CREATE INDEX IF NOT EXISTS df_chunks_pending_order ON df_chunks(doc_id DESC, ord) "
        "WHERE embedding IS NULL"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS df_docs_page_pending ON df_docs(id) WHERE page_embedded = 0"
    )


def _m003_latent_terms(conn: sqlite3.Connection, with_vectors: bool) -> None:
    # Sparse features of chunks and of record lines (index/latent.py); derived like vectors.
    if not with_vectors:
        return
    conn.execute(
        """CREATE TABLE IF NOT EXISTS df_latent (
            chunk_id INTEGER PRIMARY KEY REFERENCES df_chunks(id) ON DELETE CASCADE,
            terms    BLOB NOT NULL      -- count (uint16), feature ids (uint16), weights (fp16)
        )"""
    )
    conn.execute(
        """CREATE TABLE IF NOT EXISTS df_latent_lines (
            doc_id INTEGER NOT NULL REFERENCES df_docs(id) ON DELETE CASCADE,
            line   INTEGER NOT NULL,
            terms  BLOB NOT NULL,
            PRIMARY KEY (doc_id, line)
        )"""
    )


Migration = Callable[[sqlite3.Connection, bool], None]
MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_initial", _m001_initial),
    ("m002_pending_indexes", _m002_pending_indexes),
    ("m003_latent_terms", _m003_latent_terms),
]


@functools.cache
def expected_schema(with_vectors: bool) -> dict[str, tuple[str, frozenset[str]]]:
    """The tables (with their columns) and triggers an index file must hold, name ->
    (kind, columns), as the migrations make them in a new file (so this never falls behind
    the migrations)."""
    conn = sqlite3.connect(":memory:")
    try:
        for _name, migration in MIGRATIONS:
            migration(conn, with_vectors)
        rows = conn.execute("SELECT name, type FROM sqlite_master WHERE type IN "
                            "('table', 'trigger') AND name NOT LIKE 'sqlite_%'").fetchall()
        return {name: (kind, frozenset(row[1] for row in conn.execute(
            f'PRAGMA table_info("{name}")'))) for name, kind in rows}
    finally:
        conn.close()


def schema_problem(conn: sqlite3.Connection) -> str | None:
    """What an index file lacks of the schema (a table, a column, a trigger: dropped or
    altered by hand, or a leftover table of another program of the same name), or None.
    Such a file is valid SQLite but cannot be used, nor brought up to date by the
    migrations (they record what they did and run once): it is healed like a damaged one."""
    present = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    if "df_meta" not in present:
        return "table df_meta is missing"
    expected = expected_schema(get_meta(conn, "model_code") != KEYWORD_ONLY_CODE)
    for name, (kind, columns) in expected.items():
        if name not in present:
            return f"{kind} {name} is missing"
        if columns:
            have = {row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')}
            if columns - have:
                return f"column {name}.{sorted(columns - have)[0]} is missing"
    return None


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open an index file with WAL, a busy timeout and foreign keys on."""
    if readonly:
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000
        )
    else:
        # check_same_thread=False: search hands the connection to one worker at a time.
        conn = sqlite3.connect(
            str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
        )
    conn.isolation_level = None  # explicit BEGIN/COMMIT: we decide where transactions end
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    # Up to 32 MiB of page cache instead of SQLite's 2 MiB: a BM25 query at 100k chunks reads
    # scattered FTS and row pages, ~6% faster when they stay cached (only what is read is held).
    conn.execute("PRAGMA cache_size = -32768")
    if not readonly:
        try:
            _switch_to_wal(conn)
        except BaseException:
            conn.close()
            raise
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another process holds the file.

    Switching the journal mode needs an exclusive lock, and SQLite answers "database is
    locked" at once instead of calling the busy handler when processes open a new index
    together (parallel ``remember``s into a fresh field): retried here up to the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: BEGIN IMMEDIATE takes the write lock up front (waiting up to the
    busy timeout), so two writers never deadlock upgrading a read lock; commits on success,
    rolls back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM df_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO df_meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def prepare(conn: sqlite3.Connection, path: Path, model_code: str, dim: int | None, *,
            rebuild: bool = False) -> None:
    """Create or migrate the schema and check the file belongs to ``model_code``.
    ``rebuild``: the caller is about to drop every row (``reindex``), so vectors of another
    size than the model's are no error: they go, and the size is learnt again."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        raise  # busy, locked or read-only: not a damaged file
    except sqlite3.DatabaseError as exc:
        raise IndexCorruptError(f"{path} is not a usable SQLite index: {exc}",
                                damaged=True) from None
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS df_meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS df_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
        )
        stored = get_meta(conn, "model_code")
        if stored is not None and stored != model_code:
            raise ModelMismatchError(
                f"{path.name} holds vectors of model {stored!r}, not {model_code!r}",
                f"rename or delete {path.name} (it is derived data) and run `deepfield reindex`",
            )
        stored_dim = get_meta(conn, "dim")
        if stored_dim and dim and int(stored_dim) != dim and not rebuild:
            raise ModelMismatchError(
                f"{path.name} holds {stored_dim}-dimensional vectors but {model_code} "
                f"makes {dim}-dimensional ones",
                "the model behind this model code changed; run `deepfield reindex` to rebuild",
            )
        done = {row[0] for row in conn.execute("SELECT name FROM df_migrations")}
        with_vectors = model_code != KEYWORD_ONLY_CODE
        for name, migration in MIGRATIONS:
            if name not in done:
                migration(conn, with_vectors)
                conn.execute(
                    "INSERT INTO df_migrations(name, applied_at) VALUES (?, datetime('now'))",
                    (name,),
                )
        if get_meta(conn, "instance") is None:  # tells this file from a rebuilt one
            set_meta(conn, "instance", uuid.uuid4().hex)
        if stored is None:
            set_meta(conn, "model_code", model_code)
            set_meta(conn, "schema_version", str(SCHEMA_VERSION))
            set_meta(conn, "generation", "0")
        if dim and not stored_dim:
            set_meta(conn, "dim", str(dim))
        problem = schema_problem(conn)
        if problem:
            raise IndexCorruptError(f"{path} lacks deepfield's index schema: {problem}",
                                    damaged=True)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def bump_generation(conn: sqlite3.Connection) -> int:
    """Count index changes so in-memory caches (vector matrices) know when to reload."""
    value = int(get_meta(conn, "generation") or 0) + 1
    set_meta(conn, "generation", str(value))
    return value
