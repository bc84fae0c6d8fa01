"""Real processes writing at once lose nothing; a kill -9 mid-write never tears a page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import deepfield
from deepfield.config import EmbeddingConfig
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
