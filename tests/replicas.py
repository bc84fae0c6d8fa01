"""Several ``deepfield serve`` processes on one store in a bucket, and a mixed load on them:
for tests/test_replicas.py (bounded) and bench/scale_replicas.py (the full 3 x 8 x 200).

Each replica is the real console entry point in its own process, with the tests' fake
embedder registered (a store's deepfield.toml names it), its own working copy (the bucket
store locks one per process) and nothing else shared but the bucket.

The load: each client writes pages of its own (create, then read and update with If-Match),
searches, and races the other clients on one shared page with If-Match updates. The checks:

* lost writes: every acknowledged write (201/204) is what the bucket holds at the end, or a
  later acknowledged write of the same page replaced it;
* silent overwrites: no two acknowledged updates of the shared page were made from the same
  version (If-Match): each one replaced the version its writer had read;
* visibility: every page created is found by every replica's search, and how long that
  took after the write was acknowledged.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
LAUNCH = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from tests.fakes import register; "
          "register(); from deepfield.cli import main; main()")


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    url: str
    cache: Path | None = None
    """XDG_CACHE_HOME of the replica (its working copy is a folder below it)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipes()


def start_replicas(store_url: str, count: int, env: dict[str, str] | None = None,
                   timeout: float = 120) -> list[Replica]:
    """``count`` servers of ``store_url`` on free ports, each answering once it returns."""
    environment = {k: v for k, v in {**os.environ, **(env or {})}.items()
                   if not k.startswith("DEEPFIELD_")}
    started = []
    for _ in range(count):
        process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, str(REPO), "serve", "--store", store_url,
             "--port", "0", "--workers", "1", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment)
        started.append(process)
    replicas = []
    deadline = time.monotonic() + timeout
    for process in started:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"replica {process.pid} exited ({process.wait()})")
        cache = environment.get("XDG_CACHE_HOME")
        replicas.append(Replica(process, json.loads(line)["url"].rstrip("/"),
                                Path(cache) if cache else None))
    for replica in replicas:
        while True:
            try:
                if httpx.get(replica.url + "/", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {replica.url} does not answer")
            time.sleep(0.1)
    return replicas


def page(title: str, text: str) -> bytes:
    return f"---\ntitle: {title}\n---\n{text}\n".encode()


@dataclass
class LoadReport:
    requests: Counter[str] = field(default_factory=Counter)
    acknowledged: dict[str, bytes] = field(default_factory=dict)
    """Page filename -> the body of the last write acknowledged for it."""
    shared_wins: list[str] = field(default_factory=list)
    """The If-Match ETag each acknowledged update of the shared page was made from."""
    created: dict[str, float] = field(default_factory=dict)
    """Unique word of each page created -> when its write was acknowledged."""
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str) -> None:
        with self.lock:
            self.requests[kind] += 1


def _client(replica: Replica, client_id: str, requests: int, report: LoadReport,
            field_name: str, seed: int) -> None:
    rng = random.Random(seed)
    own: dict[str, str] = {}  # filename -> unique word
    with httpx.Client(base_url=replica.url, timeout=60) as http:
        for number in range(requests):
            roll = rng.random()
            try:
                if roll < 0.25 or not own:
                    word = f"zq{client_id}x{number}"
                    name = f"{client_id}-{number}.md"
                    data = page(f"Page {client_id} {number}", f"Note {word} of {client_id}.")
                    reply = http.put(f"/{field_name}/{name}", content=data)
                    report.add(f"create {reply.status_code}")
                    if reply.status_code == 201:
                        stored = _stored(http, field_name, name)
                        with report.lock:
                            report.acknowledged[name] = stored
                            report.created[word] = time.monotonic()
                        own[name] = word
                elif roll < 0.45:
                    name = rng.choice(sorted(own))
                    got = http.get(f"/{field_name}/{name}")
                    data = page(f"Page {client_id}", f"Note {own[name]} edited {number}.")
                    reply = http.put(f"/{field_name}/{name}", content=data,
                                     headers={"If-Match": got.headers["etag"]})
                    report.add(f"update {reply.status_code}")
                    if reply.status_code in (200, 204):
                        with report.lock:
                            report.acknowledged[name] = _stored(http, field_name, name)
                elif roll < 0.65:
                    got = http.get(f"/{field_name}/shared.md")
                    tag = got.headers["etag"]
                    data = page("Shared", f"Edited by {client_id} at {number}.")
                    reply = http.put(f"/{field_name}/shared.md", content=data,
                                     headers={"If-Match": tag})
                    report.add(f"shared {reply.status_code}")
                    if reply.status_code in (200, 204):
                        with report.lock:
                            report.shared_wins.append(tag)
                            report.acknowledged["shared.md"] = _stored(http, field_name,
                                                                       "shared.md")
                    elif reply.status_code in (409, 412):
                        assert reply.headers.get("etag"), "a lost race names the current version"
                else:
                    word = rng.choice(sorted(own.values()))
                    reply = http.get(f"/{field_name}/search", params={"q": word, "k": 3})
                    report.add(f"search {reply.status_code}")
            except (httpx.HTTPError, AssertionError, KeyError) as exc:
                with report.lock:
                    report.errors.append(f"{client_id} #{number}: {type(exc).__name__}: {exc}")


def _stored(http: httpx.Client, field_name: str, name: str) -> bytes:
    """What a write was acknowledged as (the server fills in uuid and dates)."""
    return http.get(f"/{field_name}/{name}").content


def mixed_load(replicas: list[Replica], clients: int, requests: int,
               field_name: str = "notes") -> LoadReport:
    """``clients`` clients per replica, ``requests`` requests each, all at once."""
    report = LoadReport()
    threads = [
        threading.Thread(target=_client, args=(replica, f"r{r}c{c}", requests, report,
                                               field_name, 1000 * r + c))
        for r, replica in enumerate(replicas) for c in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report.seconds = time.monotonic() - started
    return report


def lost_writes(report: LoadReport, read: Any) -> list[str]:
    """Acknowledged pages whose last acknowledged version is not what the bucket holds;
    ``read(filename)`` returns the bytes stored (None: absent)."""
    return [name for name, data in report.acknowledged.items() if read(name) != data]


def probe_visibility(replicas: list[Replica], stop: threading.Event, delays: list[float],
                     field_name: str = "notes", limit: float = 10.0,
                     vector_delays: list[float] | None = None,
                     vector_limit: float = 60.0) -> None:
    """Until ``stop``: write a probe page through one replica after another and record how
    long after the acknowledgement every replica's keyword search found it (``limit`` + 5 s
    at most: a longer delay is recorded as such); with ``vector_delays``, also how long until
    every replica's vector search found it (the indexer's vectors reached every replica;
    ``vector_limit`` s at most)."""
    number = 0
    with httpx.Client(timeout=30) as http:
        while not stop.is_set():
            word = f"zqprobe{number}x{random.randrange(10**6)}"
            writer = replicas[number % len(replicas)]
            try:
                reply = http.put(f"{writer.url}/{field_name}/probe-{number}.md",
                                 content=page(f"Probe {number}", f"Probe {word}."))
            except httpx.HTTPError:  # the mixed load counts client errors; a probe retries
                continue
            finally:
                number += 1
            if reply.status_code != 201:
                continue
            written = time.monotonic()
            modes = ["bm25"] + (["vector"] if vector_delays is not None else [])
            waiting = {(r.url, mode) for r in replicas for mode in modes}
            found: dict[str, float] = {}
            while waiting and time.monotonic() - written < (
                    limit + 5 if any(m == "bm25" for _, m in waiting) else vector_limit):
                for url, mode in sorted(waiting):
                    # By vector, the page's own words: one word alone is as near to any page
                    # whose word shares its hashed dimension (tests/fakes.py).
                    query = word if mode == "bm25" else f"Probe {number - 1} Probe {word}"
                    try:
                        hits = http.get(f"{url}/{field_name}/search",
                                        params={"q": query, "k": 3, "mode": mode}).json()
                    except httpx.HTTPError:
                        continue
                    if any(word in r.get("snippet", "") for r in hits.get("results", [])):
                        waiting.discard((url, mode))
                for mode in modes:
                    if mode not in found and not any(m == mode for _, m in waiting):
                        found[mode] = time.monotonic() - written
                time.sleep(0.1)
            delays.append(found.get("bm25", time.monotonic() - written))
            if vector_delays is not None:
                vector_delays.append(found.get("vector", time.monotonic() - written))


def unfound(replicas: list[Replica], report: LoadReport, field_name: str = "notes",
            wait: float = 15.0) -> list[str]:
    """Created words some replica's search still does not find after up to ``wait`` s (each
    replica is asked by one client at a time, the replicas at once)."""
    from concurrent.futures import ThreadPoolExecutor

    deadline = time.monotonic() + wait

    def missing(url: str) -> list[str]:
        pending = sorted(report.created)
        with httpx.Client(timeout=30) as http:
            while pending and time.monotonic() < deadline:
                pending = [word for word in pending if not any(
                    word in r.get("snippet", "") for r in http.get(
                        f"{url}/{field_name}/search",
                        params={"q": word, "k": 3, "mode": "bm25"}).json().get("results", []))]
                if pending:
                    time.sleep(0.3)
        return [f"{word} @ {url}" for word in pending]

    with ThreadPoolExecutor(len(replicas) or 1) as pool:
        return sorted(name for names in pool.map(missing, [r.url for r in replicas])
                      for name in names)
