"""Reliability trials: kill -9 in the middle of every kind of write, concurrent writers and
HTTP clients, a damaged index, and bad inputs. Counts what was lost, left partial, or left
behind as debris.

    .venv/bin/python bench/reliability.py                  # ~3-5 minutes on 2 busy cores
    .venv/bin/python bench/reliability.py --kills 30 --writes 250 --no-write

Every trial runs real processes on a keyword-only store (no model: what is measured is the
file and index handling, which is the same with one):

* **kill -9** (``--kills`` per kind, at a seeded random moment of the process's work: after
  it is ready, or once its temporary files appear, or in the second half of its usual run):
  a writer adding pages (an *acknowledged* page is one whose write returned and was printed);
  a rewriter alternating a page over 8 KB between two versions (split into linked parts);
  ``deepfield reindex``; ``deepfield unpack`` of a 5 MB zip; ``deepfield pack --with-index``.
* **concurrency**: ``--writers`` processes adding ``--writes`` pages each under one title,
  and 8 HTTP clients writing, reading and searching a two-worker ``deepfield serve``.
* **damaged index**: 8 KiB of noise written into the middle of the index file before each of
  ``search``, ``index``, ``status``, ``reindex`` and ``add``.
* **bad input**: names, bodies and options a careless or hostile client sends, through the
  library, the CLI and HTTP PUT.

Lost: an acknowledged write whose page is missing or different, or a page that existed before
and changed without being written. Partial: a page that does not parse, a split page whose
parts come from different versions once the next command ran (one killed among its renames
is finished by it), a search that misses pages after the trial, or a server error (5xx, a
traceback). Debris: ``.deepfield-*`` files and folders left right after the
kill, and what is still there after the next command that touches the place.

Writes bench/out/reliability.json and the ``reliability`` section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from locomo import write_section  # noqa: E402
from reliability_inputs import bad_input_trials  # noqa: E402

import deepfield  # noqa: E402
from deepfield.config import EmbeddingConfig  # noqa: E402
from deepfield.page import Page  # noqa: E402
from deepfield.portable.archive import pack_folder  # noqa: E402

OUT = BENCH_DIR / "out"
PY = sys.executable
ENV = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")} | {
    "DEEPFIELD_EMBEDDER": "none", "DEEPFIELD_REVIEW": "0"}

WRITER = """
import hashlib, sys, deepfield
field = deepfield.open(sys.argv[1], embedder=None).field("crash")
tag = sys.argv[2]
print("ready", flush=True)
i = 0
while True:
    body = f"trial {tag} note {i} " + "lorem ipsum " * (i % 9 * 60)
    done = field.add(f"Note {tag} {i}", body, review=False)
    print(done.pages[0].filename, hashlib.sha256(body.encode()).hexdigest(), flush=True)
    i += 1
"""
REWRITER = """
import sys, deepfield
field = deepfield.open(sys.argv[1], embedder=None).field("crash")
print("ready", flush=True)
i = 0
while True:
    letter = "AB"[i % 2]
    field.write(f"# Big\\n\\n" + "\\n\\n".join(f"{letter}{j} " + letter * 300 for j in range(60)),
                name="big", review=False)
    i += 1
"""
CLI = [PY, "-m", "deepfield"]


def debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".deepfield-"))


def new_store(root: Path, name: str = "store") -> Path:
    path = root / name
    deepfield.init(path, EmbeddingConfig("none"))
    with deepfield.open(path) as store:
        store.create_field("crash")
    return path


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"trial process did not start: {line!r}")


def _kill(proc: subprocess.Popen[str], delay: float) -> list[str]:
    """Kill ``proc`` after ``delay`` seconds; returns what it printed before."""
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    return out.splitlines()


def _duration(command: list[str]) -> float:
    """Seconds ``command`` takes when left alone: kills are spread over that time."""
    started = time.monotonic()
    subprocess.run(command, env=ENV, capture_output=True, timeout=600, check=True)
    return time.monotonic() - started


def _killed(command: list[str], duration: float, rng: random.Random) -> bool:
    """Run ``command`` and kill -9 it at a random moment of the second half of its usual run
    (the first is mostly Python starting); True if it was still running then."""
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(0.5, 0.98) * duration)
    running = proc.poll() is None
    if running:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    return running


def _work(command: list[str], started: Callable[[], bool]) -> float:
    """Seconds ``command`` works once ``started()`` (its temporary files appeared) holds."""
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while not started() and proc.poll() is None:
        time.sleep(0.002)
    begun = time.monotonic()
    if proc.wait(timeout=600) != 0:
        raise RuntimeError(f"{command} failed")
    return time.monotonic() - begun


def _killed_working(command: list[str], started: Callable[[], bool], work: float,
                    rng: random.Random) -> bool:
    """Kill -9 ``command`` at a random moment of its work (after ``started()``); True if
    the kill came while it worked."""
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while not started() and proc.poll() is None:
        time.sleep(0.002)
    time.sleep(rng.uniform(0.0, 0.9) * work)
    running = proc.poll() is None
    if running:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    return running


def _row(trial: str, runs: int, lost: int = 0, partial: int = 0, left: int = 0,
         after: int = 0, note: str = "") -> dict[str, Any]:
    return {"trial": trial, "runs": runs, "lost": lost, "partial": partial,
            "debris_after_kill": left, "debris_after_next_command": after, "note": note}


# ---------------------------------------------------------------------- kill -9


def kill_writer(root: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    store = new_store(root, "writer")
    folder = store / "crash"
    lost = partial = left = after = acked = 0
    for run in range(kills):
        proc = subprocess.Popen([PY, "-c", WRITER, str(store), str(run)], env=ENV,
                                stdout=subprocess.PIPE, text=True)
        _ready(proc)
        lines = _kill(proc, rng.uniform(0.05, 1.5))
        left += len(debris(folder))
        for line in lines:
            name, digest = line.split()
            acked += 1
            path = folder / name
            page = Page.parse(path.read_text()) if path.is_file() else None
            if page is None or hashlib.sha256(
                    page.body.rstrip("\n").encode()).hexdigest() != digest:
                lost += 1
        for path in folder.glob("*.md"):  # every page whole: parses, and is a page written
            if path.name == "listing.md" or path.name.startswith("after-kill"):
                continue
            text = path.read_text()
            partial += Page.parse(text).frontmatter_error is not None or "trial " not in text
        with deepfield.open(store) as opened:  # the next command: it must also work
            fld = opened.field("crash")
            fld.add(f"After kill {run}", "The store goes on.", review=False)
            pages = len([p for p in folder.glob("*.md") if p.name != "listing.md"])
            partial += len(fld.pages()) != pages
        after += len(debris(folder))
    return _row("kill -9 while adding pages", kills, lost, partial, left, after,
                f"{acked} acknowledged writes checked")


def kill_rewriter(root: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    store = new_store(root, "rewriter")
    folder = store / "crash"
    with deepfield.open(store) as opened:
        opened.field("crash").write("# Big\n\n" + "\n\n".join(
            f"A{j} " + "A" * 300 for j in range(60)), name="big", review=False)
    partial = left = after = torn = 0

    def mixed() -> int:
        """1 if the page's parts are not all of one version (or one does not parse)."""
        versions: set[str] = set()
        broken = 0
        for path in sorted(folder.glob("big*.md")):
            page = Page.parse(path.read_text())
            found = set(re.findall(r"^([AB])\d+ ", page.body, re.MULTILINE))
            broken += page.frontmatter_error is not None or not found
            versions |= found
        return int(broken > 0 or len(versions) != 1)

    for _run in range(kills):
        proc = subprocess.Popen([PY, "-c", REWRITER, str(store)], env=ENV,
                                stdout=subprocess.PIPE, text=True)
        _ready(proc)
        _kill(proc, rng.uniform(0.05, 1.5))
        left += len(debris(folder))
        torn += mixed()
        with deepfield.open(store) as opened:  # the next command: finishes what was cut
            fld = opened.field("crash")
            fld.index()
            partial += mixed() + (not fld.search("big", mode="bm25").results)
        after += len(debris(folder))
    return _row("kill -9 while rewriting a page split in parts", kills, 0, partial, left, after,
                f"parts checked to come from one version; {torn} killed among the renames, "
                "finished by the next command")


def _field_of(store: Path, pages: int) -> Path:
    folder = store / "crash"
    for i in range(pages):
        words = " ".join(f"word{(i * 7 + j) % 997}" for j in range(2500))
        (folder / f"page-{i:04d}.md").write_text(f"# Page {i}\n\nGasket note {i}. {words}\n")
    with deepfield.open(store) as opened:
        opened.field("crash").index()
    return folder


def kill_reindex(root: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    store = new_store(root, "reindex")
    folder = _field_of(store, 200)
    command = [*CLI, "--store", str(store), "reindex"]
    duration = _duration(command)
    partial = left = after = hit = 0
    for _run in range(kills):
        hit += _killed(command, duration, rng)
        left += len(debris(folder))
        with deepfield.open(store) as opened:
            fld = opened.field("crash")
            found = fld.search("gasket", mode="bm25", k=1000).results
            partial += len(found) != 200 or len(fld.pages()) != 200
        after += len(debris(folder))
    return _row("kill -9 during reindex", kills, 0, partial, left, after,
                f"{hit} killed while running; the next search must find all 200 pages")


def kill_unpack(root: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    store = new_store(root, "unpack")
    _field_of(store, 120)
    zipped = pack_folder(store / "crash", root / "crash.memoryfield.zip").path
    partial = left = after = hit = 0

    def staging() -> bool:
        return any(n.startswith(".deepfield-unpack-") for n in os.listdir(store))

    work = _work([*CLI, "--store", str(store), "unpack", str(zipped), "--as", "first"],
                 staging)
    for run in range(kills):
        hit += _killed_working([*CLI, "--store", str(store), "unpack", str(zipped), "--as",
                                f"copy-{run}"], staging, work, rng)
        left += len(debris(store))
        target = store / f"copy-{run}"
        if target.exists() and len(list(target.glob("page-*.md"))) != 120:
            partial += 1  # a field folder appears whole or not at all
        deepfield.open(store).close()  # the next command
        after += len(debris(store))
    return _row("kill -9 during unpack (5 MB zip)", kills, 0, partial, left, after,
                f"{hit} killed while writing")


def kill_pack(root: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    store = new_store(root, "pack")
    _field_of(store, 120)
    out = root / "packs"
    out.mkdir()
    partial = left = after = hit = 0

    def command(run: int | str) -> list[str]:
        return [*CLI, "--store", str(store), "pack", "crash", "--with-index", "-o",
                str(out / f"crash-{run}.memoryfield.zip")]

    def writing() -> bool:
        return any(n.startswith(".deepfield-") for n in os.listdir(out))

    work = _work(command("first"), writing)
    for run in range(kills):
        target = out / f"crash-{run}.memoryfield.zip"
        hit += _killed_working(command(run), writing, work, rng)
        left += len(debris(out))
        if target.exists():
            with zipfile.ZipFile(target) as archive:
                partial += archive.testzip() is not None
        with deepfield.open(store) as opened:  # the next pack into the same folder
            pack_folder(opened.field("crash").path, out / "next.memoryfield.zip", force=True)
        after += len(debris(out))
    return _row("kill -9 during pack --with-index", kills, 0, partial, left, after,
                f"{hit} killed while writing")


# ---------------------------------------------------------------------- concurrency


def concurrent_writers(root: Path, writers: int, writes: int) -> dict[str, Any]:
    store = new_store(root, "concurrent")
    folder = store / "crash"
    script = ("import sys, deepfield\n"
              "f = deepfield.open(sys.argv[1], embedder=None).field('crash')\n"
              "for i in range(int(sys.argv[3])):\n"
              "    f.add('Same title', f'writer {sys.argv[2]} note {i}', review=False)\n")
    procs = [subprocess.Popen([PY, "-c", script, str(store), str(w), str(writes)], env=ENV)
             for w in range(writers)]
    failed = sum(p.wait(timeout=900) != 0 for p in procs)
    bodies = set()
    partial = 0
    for path in folder.glob("*.md"):
        if path.name == "listing.md":
            continue
        page = Page.parse(path.read_text())
        partial += page.frontmatter_error is not None
        bodies.add(page.body.strip())
    expected = {f"writer {w} note {i}" for w in range(writers) for i in range(writes)}
    listing = (folder / "listing.md").read_text()
    unlisted = sum(f"]({p.name})" not in listing for p in folder.glob("same-title*.md"))
    return _row(f"{writers} processes x {writes} writes, one title", writers * writes,
                len(expected - bodies), partial + failed + unlisted, len(debris(folder)),
                len(debris(folder)), "listing.md lists every page")


def http_clients(root: Path, clients: int, rounds: int) -> dict[str, Any]:
    import concurrent.futures

    import httpx

    store = new_store(root, "http")
    proc = subprocess.Popen([*CLI, "serve", str(store), "--port", "0", "--workers", "2",
                             "--json"], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        deadline = time.monotonic() + 120
        while True:  # workers still starting refuse connections
            try:
                httpx.get(url, timeout=10)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        acked: dict[str, bytes] = {}
        errors = 0

        def client(number: int) -> None:
            nonlocal errors
            with httpx.Client(base_url=url, timeout=60) as http:
                for i in range(rounds):
                    name = f"c{number}-p{i}.md"
                    body = f"# Client {number} page {i}\n\nGasket order {number}-{i}.\n".encode()
                    put = http.put(f"/crash/{name}", content=body)
                    if put.status_code >= 500:
                        errors += 1
                    elif put.status_code in (201, 204):
                        acked[name] = body
                    got = http.get(f"/crash/{name}")
                    errors += got.status_code >= 500
                    found = http.get("/crash/search", params={"q": "gasket order", "k": 5})
                    errors += found.status_code >= 500

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            list(pool.map(client, range(clients)))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    lost = sum(not (store / "crash" / n).is_file() or Page.parse(
        (store / "crash" / n).read_text()).body.strip() != Page.parse(
            body.decode()).body.strip() for n, body in acked.items())
    return _row(f"{clients} HTTP clients (PUT, GET, search), 2 workers", clients * rounds,
                lost, errors, len(debris(store / "crash")), len(debris(store / "crash")),
                f"{len(acked)} acknowledged PUTs checked; partial = 5xx answers")


# ---------------------------------------------------------------------- damaged index


def damaged_index(root: Path) -> dict[str, Any]:
    store = new_store(root, "damaged")
    _field_of(store, 60)
    index = store / "crash" / "bm25-only.sqlite3"
    partial = noticed = 0
    commands = [("search", "gasket", "-k", "100"), ("index",), ("status",), ("reindex",),
                ("add", "crash", "--title", "After damage", "Still written.")]
    for command in commands:
        with deepfield.open(store) as opened:
            opened.field("crash").close()
        size = index.stat().st_size
        with index.open("r+b") as handle:
            handle.seek(size // 2 - 4096)
            handle.write(os.urandom(8192))
        done = subprocess.run([*CLI, "--store", str(store), *command], env=ENV,
                              capture_output=True, text=True, timeout=300)
        said = [line for line in done.stderr.splitlines() if "damaged" in line]
        noticed += len(said) == 1
        partial += done.returncode != 0 or "Traceback" in done.stderr or len(said) > 1
        with deepfield.open(store) as opened:
            partial += len(opened.field("crash").search("gasket", k=100).results) < 60
    return _row("index damaged (8 KiB of noise) before each command", len(commands), 0,
                partial, 0, 0, f"search, index, status, reindex, add: all exit 0; {noticed} "
                "met the damage, moved the file aside and said so in one line (the others "
                "read no damaged page); all 60 pages found after each")


# ---------------------------------------------------------------------- report


def render(rows: list[dict[str, Any]], seconds: float, command: str) -> str:
    lines = [
        "## Reliability",
        "",
        f"`{command}` ({seconds:.0f} s on 2 busy cores; keyword-only store, real processes, "
        "kill -9 at a seeded random moment of each command's work). Lost: an acknowledged "
        "write missing or different, or a page changed that was not written. Partial: a page "
        "that does not parse, a split page with parts of two versions once the next command "
        "ran, a search missing pages after the trial, a 5xx or a traceback. Debris: "
        "`.deepfield-*` files and folders right after the kill, and after the next command "
        "that touches the place.",
        "",
        "| trial | runs | lost | partial | debris after kill | debris after next command |"
        " notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['trial']} | {row['runs']} | {row['lost']} | {row['partial']} | "
                     f"{row['debris_after_kill']} | {row['debris_after_next_command']} | "
                     f"{row['note']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=12, help="kill -9 runs per kind")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--writes", type=int, default=40, help="pages per concurrent writer")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10, help="requests per HTTP client")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--no-write", action="store_true", help="print, do not edit docs")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="deepfield-reliability-"))
    rows: list[dict[str, Any]] = []
    try:
        for trial in (kill_writer, kill_rewriter, kill_reindex, kill_unpack, kill_pack):
            rows.append(trial(root, args.kills, rng))
            print(rows[-1], flush=True)
        rows.append(concurrent_writers(root, args.writers, args.writes))
        print(rows[-1], flush=True)
        rows.append(http_clients(root, args.clients, args.rounds))
        print(rows[-1], flush=True)
        rows.append(damaged_index(root))
        print(rows[-1], flush=True)
        rows += bad_input_trials(root / "bad")
        print(rows[-3:], flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    seconds = time.monotonic() - started
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
             if k != "no_write" and parser.get_default(k) != v]
    command = " ".join(["python bench/reliability.py", *flags])
    text = render(rows, seconds, command)
    print(text)
    if not args.no_write:
        OUT.mkdir(exist_ok=True)
        (OUT / "reliability.json").write_text(json.dumps(
            {"rows": rows, "seconds": round(seconds, 1), "args": vars(args)}, indent=2))
        write_section("reliability", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
