"""Pack and verified unpack of synthetic fields (target: 10k pages in ≤ 10 s each).

    python bench/portable.py            # 1k and 10k pages, 3 runs each; writes docs/BENCHMARKS.md
    python bench/portable.py --sizes 1000 --runs 1 --no-write

Pages come from bench/corpus.py (seed 7, 600-2500 bytes each). The field is indexed
keyword-only first (not timed), so ``pack`` times what a user waits for on an indexed field: the
freshness check, reading and deflating every file and hashing the zip. ``unpack`` is the
verified path: sha256 against the pin, every entry checked, extraction into a hidden folder,
mtimes restored, rename into place. ``mirror`` opens the zip as a remote field (pin, checks,
copy of the pages into the cache). Results go between the ``portable`` markers in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))

from corpus import Corpus  # noqa: E402
from locomo import write_section  # noqa: E402

import deepfield  # noqa: E402
from deepfield import portable  # noqa: E402
from deepfield.config import EmbeddingConfig  # noqa: E402

TARGET_SECONDS = 10.0


def median_seconds(runs: list[float]) -> float:
    return statistics.median(runs)


def bench_size(size: int, runs: int, workdir: Path) -> dict[str, Any]:
    store = deepfield.init(workdir / f"store-{size}", EmbeddingConfig("none"))
    field = store.create_field("mem")
    Corpus(7).write_pages(field.path, size)
    started = time.perf_counter()
    field.index()
    index_seconds = time.perf_counter() - started
    pack_runs, packi_runs, unpack_runs, mirror_runs = [], [], [], []
    result = None
    for run in range(runs):
        out = workdir / f"mem-{size}-{run}.memoryfield.zip"
        started = time.perf_counter()
        result = portable.pack(field, out)
        pack_runs.append(time.perf_counter() - started)
        started = time.perf_counter()
        portable.pack(field, workdir / f"mem-{size}-{run}-i.memoryfield.zip", with_index=True)
        packi_runs.append(time.perf_counter() - started)
        started = time.perf_counter()
        unpacked = portable.unpack(store, out, name=f"copy-{run}", sha256=result.sha256)
        unpack_runs.append(time.perf_counter() - started)
        assert unpacked.pages == size, unpacked
        started = time.perf_counter()
        mirror = portable.open_remote(f"{out}#sha256={result.sha256}", embedder=None,
                                      cache=workdir / f"cache-{size}-{run}")
        mirror_runs.append(time.perf_counter() - started)
        assert mirror.refresh_report is not None and mirror.refresh_report.fetched == size
        shutil.rmtree(unpacked.path)
    assert result is not None
    return {
        "pages": size, "zip_bytes": result.bytes, "index_seconds": index_seconds,
        "pack": median_seconds(pack_runs), "pack_with_index": median_seconds(packi_runs),
        "unpack": median_seconds(unpack_runs), "mirror": median_seconds(mirror_runs),
        "runs": runs,
    }


def render(rows: list[dict[str, Any]], load: float, cpus: int) -> str:
    lines = [
        "## Pack and unpack (portable fields)",
        "",
        "`python bench/portable.py` — synthetic pages from bench/corpus.py, median of "
        f"{rows[0]['runs']} runs, on {platform.machine()} ({cpus} CPUs, load average "
        f"{load:.1f} at the start) / Python {platform.python_version()}. "
        f"Target: pack and verified unpack of 10k pages ≤ {TARGET_SECONDS:.0f} s each.",
        "",
        "| pages | zip | pack | pack --with-index | unpack (pin + checks) | open zip as "
        "remote field | target |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        ok = row["pack"] <= TARGET_SECONDS and row["unpack"] <= TARGET_SECONDS
        lines.append(
            f"| {row['pages']:,} | {row['zip_bytes'] / 1e6:.1f} MB | {row['pack']:.2f} s | "
            f"{row['pack_with_index']:.2f} s | {row['unpack']:.2f} s | {row['mirror']:.2f} s | "
            f"{'met' if ok else 'MISSED'} |"
        )
    lines += ["", "The field is indexed (keyword-only) before timing; `pack` includes the "
              "freshness check that keeps listing.md current."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="Print only.")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="deepfield-portable-") as temp:
        rows = [bench_size(size, args.runs, Path(temp)) for size in args.sizes]
    text = render(rows, load, os.cpu_count() or 1)
    print(text)
    if not args.no_write:
        write_section("portable", text)
    return 0 if all(r["pack"] <= TARGET_SECONDS and r["unpack"] <= TARGET_SECONDS
                    for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
