"""Real processes writing at once lose nothing; a kill -9 mid-write never tears a page."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import deepfield
from deepfield.archive import part_names
from deepfield.config import EmbeddingConfig
from deepfield.index.db import connect
from deepfield.page import Page

WRITER = textwrap.dedent(
    """
    import sys, time, pathlib, deepfield
    store_path, worker, count, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    while not pathlib.Path(start).exists():
        time.sleep(0.005)
    field = deepfield.open(store_path).field("shared")
    for i in range(count):
        field.add("Same title", f"worker {worker} note {i}")
    """
)

REWRITER = textwrap.dedent(
    """
    import sys, deepfield
    field = deepfield.open(sys.argv[1]).field("shared")
    bodies = ["A" * 7000, "B" * 7000]
    i = 0
    while True:
        field.write("# Page\\n\\n" + bodies[i % 2] + "\\n", name="page")
        i += 1
    """
)


@contextmanager
def _reaped(procs: list[subprocess.Popen[str]] | list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """Kill the workers a failed assertion left running: a still-running child is reported
    as an unraisable ResourceWarning in whichever later test collects it."""
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    deepfield.init(path, EmbeddingConfig("none"))
    deepfield.open(path).create_field("shared")
    return path


def test_parallel_writers_lose_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    start = tmp_path / "go"
    workers, count = 4, 15
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(w), str(count), str(start)])
        for w in range(workers)
    ]
    with _reaped(procs):
        time.sleep(0.5)
        start.touch()
        for proc in procs:
            assert proc.wait(timeout=120) == 0
    folder = store / "shared"
    pages = sorted(p for p in folder.glob("*.md") if p.name != "listing.md")
    assert len(pages) == workers * count
    bodies = {Page.parse(p.read_text()).body.strip() for p in pages}
    assert bodies == {f"worker {w} note {i}" for w in range(workers) for i in range(count)}
    listing = (folder / "listing.md").read_text()
    assert all(f"]({p.name})" in listing for p in pages)  # the catalogue saw every write
    field = deepfield.open(store).field("shared")
    assert len(field.pages()) == workers * count


def test_kill_9_never_leaves_a_torn_page(tmp_path: Path) -> None:
    store = _store(tmp_path)
    field = deepfield.open(store).field("shared")
    field.write("# Page\n\n" + "A" * 7000 + "\n", name="page")
    target = store / "shared" / "page.md"
    for delay in (0.15, 0.3, 0.45, 0.6, 0.9):
        proc = subprocess.Popen([sys.executable, "-c", REWRITER, str(store)])
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        body = Page.parse(target.read_text()).body
        assert body in ("# Page\n\n" + "A" * 7000 + "\n", "# Page\n\n" + "B" * 7000 + "\n")
    visible = [p.name for p in (store / "shared").iterdir() if not p.name.startswith(".")]
    assert sorted(n for n in visible if n.endswith(".md")) == ["listing.md", "page.md"]
    (store / "shared" / ".deepfield-killed.tmp").write_text("half a page")
    for temp in (store / "shared").glob(".deepfield-*.tmp"):  # debris of the killed writers
        os.utime(temp, (time.time() - 7200, time.time() - 7200))
    report = deepfield.open(store).field("shared").index()
    assert report.warnings == [] and len(field.pages()) == 1
    assert not list((store / "shared").glob(".deepfield-*.tmp"))


SPLIT_RACER = textwrap.dedent(
    """
    import sys, time, deepfield
    store_path, role, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    field = deepfield.open(store_path).field("shared")
    text = "\\n\\n".join(f"## Part {i}\\n\\n" + f"Woks and gaskets, paragraph {i}. " * 12
                       for i in range(40))  # ~20 KB: split into several parts
    stop, done = time.monotonic() + seconds, 0
    while time.monotonic() < stop:
        try:
            if role == "write":
                field.write(text, name="split")
            elif role == "rm":
                field.archive_page("split")
            else:
                field.restore_page("split")
            done += 1
        except deepfield.DeepfieldError:
            pass  # nothing to archive or restore just now
    print(done)
    """
)


def test_rm_and_restore_racing_a_split_page_write_move_whole_pages(tmp_path: Path) -> None:
    # rm archived a split page's parts one lock at a time: a write in between left parts
    # with no first page, or a second set of parts (split-2.md …) beside them.
    store = _store(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", SPLIT_RACER, str(store), role, "3"],
                              stdout=subprocess.PIPE)
             for role in ("write", "rm", "restore")]
    counts = []
    with _reaped(procs):
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            counts.append(int(out))
    assert counts[0] and counts[1]  # both writes and removals happened
    field = store / "shared"
    names = {p.name for p in field.glob("*.md")} - {"listing.md", "index.md"}
    if names:  # the page is there whole, once
        first = Page.parse((field / "split.md").read_text())
        assert names == set(part_names(first, "split.md") or ()), names


REMEMBERER = textwrap.dedent(
    """
    import sys, time, pathlib, deepfield
    from deepfield.memorize import remember
    store_path, worker, rounds, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    while not pathlib.Path(start).exists():
        time.sleep(0.005)
    store = deepfield.open(store_path)
    for r in range(rounds):
        text = f"user: we decided to use postgres 1{worker} for the billing service\\n" \\
               f"assistant: noted, postgres 1{worker}.\\n"
        remember(store.field(f"rr{r}"), f"sess{worker}.txt", text=text)
    """
)


def test_parallel_remembers_of_different_sessions_file_every_one(tmp_path: Path) -> None:
    # The free filename was picked outside the field lock: two sessions that get one name
    # raced, and the loser was refused with an error blaming its uuid (the session was lost).
    store = tmp_path / "store"
    deepfield.init(store, EmbeddingConfig("none"))
    rounds, workers = 6, 4
    for r in range(rounds):
        deepfield.open(store).create_field(f"rr{r}")
    start = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", REMEMBERER, str(store), str(w),
                               str(rounds), str(start)], stderr=subprocess.PIPE, text=True)
             for w in range(workers)]
    with _reaped(procs):
        time.sleep(0.5)
        start.touch()
        for proc in procs:
            _out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
    for r in range(rounds):
        pages = [p for p in (store / f"rr{r}").glob("*.md") if p.name != "listing.md"]
        bodies = {Page.parse(p.read_text()).body for p in pages}
        assert len(pages) == workers
        assert all(any(f"postgres 1{w} " in b for b in bodies) for w in range(workers))


def _open_index(path: str, start: str) -> None:
    while not os.path.exists(start):
        time.sleep(0.001)
    connect(Path(path)).execute("CREATE TABLE IF NOT EXISTS t (x)")


def test_processes_opening_a_new_index_at_once_all_get_it(tmp_path: Path) -> None:
    # Switching a new file to WAL needs an exclusive lock, and SQLite refused it at once
    # ("database is locked", no busy wait) to processes opening the index together: one of
    # four parallel `remember`s into a new field failed with an IndexCorruptError.
    forked = multiprocessing.get_context("fork")
    failed = 0
    for round_ in range(30):
        path, start = tmp_path / f"{round_}.sqlite3", tmp_path / f"go{round_}"
        workers = [forked.Process(target=_open_index, args=(str(path), str(start)))
                   for _ in range(6)]
        for worker in workers:
            worker.start()
        start.touch()
        for worker in workers:
            worker.join(timeout=60)
        failed += sum(worker.exitcode != 0 for worker in workers)
    assert failed == 0


def test_threads_sharing_one_field_search_and_write_at_once(field: deepfield.Field) -> None:
    # One SQLite connection served every thread: a search's embedding transaction met a
    # writer's ("cannot start a transaction within a transaction") and the call failed.
    for i in range(10):
        field.add(f"Seed {i}", f"wok fact {i} about pans")
    errors: list[BaseException] = []

    def run(kind: str) -> None:
        for i in range(25):
            try:
                if kind == "search":
                    assert field.search("wok pans", mode="hybrid").results
                elif kind == "write":
                    field.add(f"{threading.current_thread().name} {i}", f"wok note {i}")
                else:
                    field.pages()
            except BaseException as exc:  # collected for the assertion below
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(kind,), name=f"{kind}{n}")
               for n, kind in enumerate(["search", "search", "write", "write", "read"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(field.pages()) == 10 + 2 * 25
    assert field.search("wok note 24", mode="bm25").results
