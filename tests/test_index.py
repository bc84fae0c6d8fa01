"""The derived index: incremental sync, the spec's pages table, bad files, rebuilds."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.errors import ModelMismatchError
from deepfield.index.sync import MAX_INDEXED_BYTES

from .fakes import FakeEmbedder


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sync_is_incremental_and_idempotent(field: deepfield.Field, embedder: FakeEmbedder) -> None:
    for i in range(5):
        write(field.path, f"page-{i}.md", f"# Page {i}\n\nContent number {i} about apples.\n")
    first = field.index()
    assert (first.added, first.updated, first.removed) == (5, 0, 0)
    embedded = embedder.texts_embedded
    second = field.index()
    assert (second.added, second.updated, second.removed, second.unchanged) == (0, 0, 0, 5)
    assert embedder.texts_embedded == embedded  # nothing re-embedded
    write(field.path, "page-1.md", "# Page 1\n\nContent number 1 about pears now.\n")
    (field.path / "page-2.md").unlink()
    third = field.index()
    assert (third.added, third.updated, third.removed) == (0, 1, 1)
    assert embedder.texts_embedded - embedded <= 3  # the changed chunk and the page, no more
    hits = field.search("pears", mode="bm25").results
    assert [h.filename for h in hits] == ["page-1.md"]
    assert field.search("number 2", mode="bm25").results[0].filename != "page-2.md"


def test_touch_without_change_rehashes_but_does_not_reindex(field: deepfield.Field) -> None:
    path = write(field.path, "a.md", "# A\n\nalpha\n")
    field.index()
    os.utime(path, (time.time() + 5, time.time() + 5))
    report = field.index()
    assert report.updated == 0 and report.unchanged == 1


@pytest.mark.parametrize("page_vectors", ["mean", "whole"])
def test_spec_pages_table(field: deepfield.Field, embedder: FakeEmbedder,
                          page_vectors: str) -> None:
    text = ("---\ntitle: Woks\nuuid: 6aa615f0-486f-48a7-a210-ba4f5ff18c8b\n---\nCarbon woks.\n"
            "\n## Care\n\nOil them after washing.\n")
    path = write(field.path, "woks.md", text)
    field.page_vectors = page_vectors
    embedder.calls.clear()
    field.index()
    db = field.path / f"{embedder.model_code}.sqlite3"
    assert db.exists()
    conn = sqlite3.connect(db)
    row = conn.execute(
        "SELECT filename, frontmatter, last_modified, sha256_hash, embedding FROM pages"
    ).fetchone()
    assert row[0] == "woks.md"
    assert json.loads(row[1]) == {"title": "Woks", "uuid": "6aa615f0-486f-48a7-a210-ba4f5ff18c8b"}
    assert row[2].startswith(time.strftime("%Y-", time.gmtime(path.stat().st_mtime)))
    assert bytes(row[3]) == hashlib.sha256(path.read_bytes()).digest()
    vector = np.frombuffer(row[4], dtype="<f4")
    assert vector.shape == (embedder.dim,)
    if page_vectors == "whole":  # the whole file, frontmatter included (the spec's wording)
        assert embedder.calls == [("document", 2), ("document", 1)]  # chunks, then the page
        expected = embedder.embed([text])[0]
    else:  # the default: the chunk vectors' mean weighted by length, normalised; no pass
        rows = conn.execute("SELECT length(body), embedding FROM df_chunks").fetchall()
        chunks = np.stack([np.frombuffer(blob, "<f4") for _, blob in rows])
        mean = np.asarray([size for size, _ in rows], np.float32) @ chunks  # by length
        expected = mean / np.linalg.norm(mean)
        assert embedder.calls == [("document", 2)]  # the two chunks, nothing more
    assert np.allclose(vector, expected)


def test_a_full_sync_of_the_index_makes_page_vectors_as_the_field_says(
        field: deepfield.Field, embedder: FakeEmbedder) -> None:
    """FieldIndex.sync(embed_budget=None) (a bucket poller's refresh) encodes pages whole
    where ``[index] page_vectors = "whole"``, as Field.index does."""
    from deepfield.scan import scan_field

    write(field.path, "woks.md", "---\ntitle: Woks\n---\nCarbon woks.\n\n## Care\n\nOil them.\n")
    field.page_vectors = "whole"
    index = field.index_handle()
    embedder.calls.clear()
    index.sync(scan_field(field.path).files, embed_budget=None)
    assert embedder.calls == [("document", 2), ("document", 1)]  # chunks, then the page


def test_reindex_rebuilds_from_markdown_alone(field: deepfield.Field) -> None:
    for i in range(3):
        field.add(f"Note {i}", f"text about item {i}")
    before = [(h.filename, round(h.score, 6)) for h in field.search("item", mode="hybrid").results]
    db = field.index_handle().path
    field.close()
    db.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    field.index()
    after = [(h.filename, round(h.score, 6)) for h in field.search("item", mode="hybrid").results]
    assert after == before
    assert field.reindex().added == 3


def test_model_code_mismatch_is_a_clear_error(field: deepfield.Field, tmp_path: Path) -> None:
    field.add("A", "alpha")
    field.index()
    field.close()
    db = field.index_handle().path
    field.close()
    impostor = FakeEmbedder(dim=64, model_code="other-model-v2")
    (field.path / "other-model-v2.sqlite3").write_bytes(db.read_bytes())
    with pytest.raises(ModelMismatchError) as info:
        deepfield.open_field(field.path, impostor).index()
    assert "fake-hash-64-v1" in info.value.message and "reindex" in info.value.hint
    wider = FakeEmbedder(dim=32, model_code="fake-hash-64-v1")
    with pytest.raises(ModelMismatchError, match="dimensional"):
        deepfield.open_field(field.path, wider).index()


def test_reindex_clears_vectors_of_a_model_swapped_behind_its_model_code(
        field: deepfield.Field) -> None:
    # The error's hint says `deepfield reindex`: it must work, whether the new model's size
    # is known when the index opens or only from its first vectors (an endpoint's).
    field.add("A", "alpha kiwi")
    field.index()
    field.close()
    for dim in (32, 16):
        wider = FakeEmbedder(dim=dim, model_code="fake-hash-64-v1")
        with pytest.raises(ModelMismatchError, match="reindex"):
            deepfield.open_field(field.path, wider).embed()
        lazy = FakeEmbedder(dim=dim, model_code="fake-hash-64-v1")
        swapped = deepfield.open_field(field.path, wider if dim == 32 else lazy)
        if dim == 16:
            lazy.dim = None  # learnt from the first batch, as OpenAIEmbedder does
            sized = FakeEmbedder(dim=16)
            lazy.embed_batch = sized.embed_batch  # type: ignore[method-assign]
        assert swapped.reindex().pending_vectors == 0
        assert [h.filename for h in swapped.search("kiwi", mode="vector").results] == ["a.md"]
        swapped.close()


def test_bad_files_are_indexed_leniently_and_never_touched(field: deepfield.Field) -> None:
    broken = "---\ntitle: [oops\n---\nThe kiwi text survives.\n"
    files = {
        "broken-yaml.md": broken.encode(),
        "latin1.md": "café crème".encode("latin-1"),
        "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00",
        "empty.md": b"",
        "Bad Name.md": b"kiwi in a badly named file\n",
        "Upper.MD": b"kiwi in a file whose extension is upper-case\n",
        "kiwi (conflicted copy 2024-05-01).md": b"kiwi in a sync tool's conflict copy\n",
        "kiwi.LOCAL.4242.md": b"kiwi in a merge tool's copy\n",
        "merged.md": b"---\n<<<<<<< HEAD\ntitle: Kiwi main\n=======\ntitle: Kiwi side\n"
                     b">>>>>>> side\n---\nkiwi after a merge\n",
        "merged-body.md": b"# Kiwi\n\n<<<<<<< HEAD\nkiwi main\n=======\nkiwi side\n>>>>>>> side\n",
        "setext.md": b"Kiwi\n=======\n\nA setext heading is no conflict.\n",
        "foreign-keys.md": b"---\ntitle: Kiwi keys\nuuid: 42\ncreated: 2026-03-01T09:00:00Z\n"
                           b"---\nkiwi\n",
    }
    for name, data in files.items():
        (field.path / name).write_bytes(data)
    report = field.index()
    warnings = "\n".join(report.warnings)
    assert "broken-yaml.md: malformed YAML frontmatter" in warnings
    assert "latin1.md: not valid UTF-8" in warnings
    assert "binary.md: binary file" in warnings
    assert "empty.md: empty page" in warnings
    assert "Bad Name.md: not a spec filename" in warnings and "bad-name.md" in warnings
    assert "Upper.MD: not indexed (a page's name ends in lowercase .md); rename it to " \
        "upper.md" in warnings and "listing.md" not in warnings
    assert "kiwi (conflicted copy 2024-05-01).md: a sync or merge tool's conflict copy, not " \
        "indexed" in warnings and "kiwi.LOCAL.4242.md: a sync" in warnings
    assert "merged.md: unresolved merge conflict in its frontmatter (lines 2, 4, 6); keep one " \
        "side in an editor" in warnings
    assert "merged-body.md: unresolved merge conflict in its text (lines 3, 5, 7)" in warnings
    assert "setext.md" not in warnings
    assert "foreign-keys.md: uuid '42' is not a UUID" in warnings
    assert "foreign-keys.md: created is an unquoted date, which YAML reads as a date object " \
        "(the spec asks for a quoted string: created: '2026-03-01T09:00:00Z')" in warnings
    hits = {h.filename for h in field.search("kiwi", mode="bm25").results}
    assert hits == {"broken-yaml.md", "Bad Name.md", "merged.md", "merged-body.md",
                    "setext.md", "foreign-keys.md"}
    for name, data in files.items():
        assert (field.path / name).read_bytes() == data
    assert field.read("broken-yaml").warnings


def test_huge_file_is_indexed_up_to_the_cap(field: deepfield.Field) -> None:
    path = field.path / "huge.md"
    with path.open("w") as handle:
        handle.write("# Huge\n\nneedle at the start.\n\n")
        filler = ("lorem ipsum dolor sit amet " * 40 + "\n\n") * 100
        while handle.tell() < 100 * (1 << 20):
            handle.write(filler)
        handle.write("needle2 at the very end.\n")
    started = time.monotonic()
    report = field.index(embed=False)
    assert time.monotonic() - started < 60
    assert any("huge.md" in w and "KiB" in w for w in report.warnings)
    assert field.search("needle", mode="bm25").results[0].filename == "huge.md"
    assert field.search("needle2", mode="bm25").results == []
    chunks = field.index_handle().conn.execute("SELECT sum(length(body)) FROM df_chunks")
    assert chunks.fetchone()[0] <= MAX_INDEXED_BYTES


def test_keyword_only_store(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("plain")
    field.add("Kiwi", "kiwi fruit notes")
    assert field.search("kiwi", mode="bm25").results[0].filename == "kiwi.md"
    assert (field.path / "bm25-only.sqlite3").exists()
    tables = {r[0] for r in field.index_handle().conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "pages" not in tables  # no vectors, so no spec vector table
    with pytest.raises(deepfield.DeepfieldError, match="no embedding model"):
        field.search("kiwi", mode="hybrid")


def test_vectors_can_be_pending(field: deepfield.Field) -> None:
    for i in range(4):
        write(field.path, f"n{i}.md", f"# N{i}\n\nmango {i}\n")
    field.index(embed=False)
    index = field.index_handle()
    assert index.pending_chunk_vectors() > 0
    assert field.search("mango", mode="bm25").results
    done = field.embed()
    chunks, pages = done.chunks, done.pages
    assert chunks > 0 and pages == 4 and index.pending_vectors() == 0


def test_common_terms_are_pruned_in_big_fields(keyword_store: deepfield.Store,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from deepfield.index import keyword

    field = keyword_store.create_field("big")
    for i in range(40):
        field.add(f"Note {i}", f"The pump report number {i} is routine." + (
            " The impeller cracked." if i == 7 else ""))
    conn = field.index_handle().conn
    field.index()
    assert keyword.pruned_terms(conn, ["pump", "impeller"]) == ["pump", "impeller"]  # small
    monkeypatch.setattr(keyword, "PRUNE_MIN_CHUNKS", 10)
    assert keyword.pruned_terms(conn, ["pump", "impeller"]) == ["impeller"]
    assert keyword.pruned_terms(conn, ["pump", "report"]) in (["pump"], ["report"])
    hits = field.search("pump impeller", mode="bm25").results
    assert hits[0].filename == "note-7.md"
    # Counts are cached per index generation and read again once the index changes.
    counts, index = keyword.TermCounts(), field.index_handle()
    both = ["pump", "impeller"]
    assert keyword.pruned_terms(conn, both, counts, index.generation()) == ["impeller"]
    assert counts.counts == {"pump": 40, "impeller": 1}
    for i in range(40):
        field.add(f"Spare {i}", "Another impeller in stock.")
    field.index()
    assert keyword.pruned_terms(conn, both, counts, index.generation()) == ["pump"]
    assert counts.counts == {"pump": 40, "impeller": 41}


def test_chunk_doc_table_matches_sqlite_and_follows_writes(
        keyword_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-lived index maps chunk ids to pages from arrays once SQL lookups in one index
    generation have cost as much as building them; the mapping equals SQLite's and is
    rebuilt when the index changes."""
    import deepfield.index as index_module

    field = keyword_store.create_field("table")
    for i in range(12):
        field.add(f"Note {i}", f"Pump log {i}.\n\nThe impeller number {i} was checked.")
    index = field.index_handle()
    field.index()
    ids = [row[0] for row in index.conn.execute("SELECT id FROM df_chunks")]
    monkeypatch.setattr(index_module, "CHUNK_TABLE_SECONDS_PER_ROW", 3600.0)
    from_sql = index.chunk_docs([*ids, 10**9])  # building would cost more: SQLite
    assert index._chunk_table is None and len(from_sql) == len(ids) == 12
    monkeypatch.setattr(index_module, "CHUNK_TABLE_SECONDS_PER_ROW", 0.0)
    assert index.chunk_docs([*ids, 10**9]) == from_sql  # from the arrays; unknown id left out
    assert index._chunk_table is not None
    before = [hit.filename for hit in field.search("impeller", mode="bm25", k=20).results]
    field.add("Spare", "A spare impeller arrived.")
    after = [hit.filename for hit in field.search("impeller", mode="bm25", k=20).results]
    assert "spare.md" in after and set(before) < set(after)
    assert index._chunk_table is not None and index._chunk_table[0] == index.generation()


def test_chunk_docs_from_the_dense_index_include_chunks_without_vectors(
        store: deepfield.Store) -> None:
    """The dense index's arrays hold embedded chunks only: a chunk still waiting for its
    vector is looked up in SQLite, so a fresh page is grouped (and found) at once."""
    field = store.create_field("mixed")
    field.add("Woks", "Carbon fibre woks heat unevenly.")
    field.index()
    index = field.index_handle()
    index.vectors()  # the dense arrays of this generation are loaded
    field.write("# Pans\n\nCast iron pans hold heat.\n")  # text indexed, no vector yet
    field.index(embed=False)
    ids = [row[0] for row in index.conn.execute("SELECT id FROM df_chunks")]
    sql = dict(index.conn.execute("SELECT id, doc_id FROM df_chunks").fetchall())
    index.vectors()
    assert index.pending_chunk_vectors() > 0
    assert index.chunk_docs(ids) == sql


def test_chunk_doc_tables_never_outlive_the_rows_they_map(
        keyword_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunk ids are reused once freed: after another connection replaces pages (each
    committed batch bumps the generation with its rows), and after clear(), a reader's
    lookups match SQLite again."""
    import deepfield.index as index_module

    monkeypatch.setattr(index_module, "CHUNK_TABLE_SECONDS_PER_ROW", 0.0)
    field = keyword_store.create_field("reuse")
    for i in range(6):
        field.add(f"Old {i}", f"Old page {i}.\n\nIt has a second paragraph {i}.")
    field.index()
    reader = deepfield.Field(field.path, None, name="reuse").index_handle()
    ids = [r[0] for r in reader.conn.execute("SELECT id FROM df_chunks")]
    assert reader.chunk_docs(ids) and reader._chunk_table is not None
    for name in [p.name for p in field.path.glob("old-*.md")][:4]:
        (field.path / name).unlink()
    for i in range(4):
        (field.path / f"new-{i}.md").write_text(f"# New {i}\n\nFresh text {i}.\n")
    field.index()  # the freed top ids go to the new pages' chunks
    ids = [r[0] for r in reader.conn.execute("SELECT id FROM df_chunks")]
    truth = dict(reader.conn.execute("SELECT id, doc_id FROM df_chunks").fetchall())
    assert reader.chunk_docs(ids) == truth
    field.index_handle().clear()
    field.index()
    ids = [r[0] for r in reader.conn.execute("SELECT id FROM df_chunks")]
    truth = dict(reader.conn.execute("SELECT id, doc_id FROM df_chunks").fetchall())
    assert reader.chunk_docs(ids) == truth


def test_chunk_doc_tables_are_right_between_the_batches_of_a_sync(
        keyword_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long sync commits batch by batch; a reader looking up chunk ids in between (another
    worker of the server) must not map a reused id to the page it had before."""
    import deepfield.index as index_module
    from deepfield.index import sync

    monkeypatch.setattr(index_module, "CHUNK_TABLE_SECONDS_PER_ROW", 0.0)
    monkeypatch.setattr(sync, "BATCH_DOCS", 1)
    field = keyword_store.create_field("batches")
    long_text = "\n\n".join(f"## Part {i}\n\n" + "Words about pumps. " * 40 for i in range(6))
    (field.path / "a.md").write_text("# A\n\nFirst page.\n")
    (field.path / "m.md").write_text(f"# M\n\n{long_text}\n")  # the highest chunk ids
    field.index()
    reader = deepfield.Field(field.path, None, name="batches").index_handle()
    reader.chunk_docs([r[0] for r in reader.conn.execute("SELECT id FROM df_chunks")])
    assert reader._chunk_table is not None
    time.sleep(0.01)
    (field.path / "m.md").write_text("# M\n\nNow short.\n")  # frees its top chunk ids …
    for name in ("x.md", "y.md", "z.md"):  # … which the new pages' chunks take
        (field.path / name).write_text(f"# {name}\n\nFresh text.\n")
    checked = []
    read_source = sync.read_source

    def read_and_check(source: Any) -> Any:
        truth = dict(reader.conn.execute("SELECT id, doc_id FROM df_chunks").fetchall())
        assert reader.chunk_docs(list(truth)) == truth, f"before {source.name}"
        checked.append(source.name)
        return read_source(source)

    monkeypatch.setattr(sync, "read_source", read_and_check)
    field.index()
    assert {"x.md", "y.md", "z.md"} <= set(checked)


def test_a_non_utf8_md_file_is_no_page_to_list_embed_or_pack(store: deepfield.Store,
                                                              tmp_path: Path) -> None:
    """The spec: pages are UTF-8. A Latin-1 or binary .md is kept on disk and reported, but
    gets no row in the spec's pages table, no line in listing.md and no place in a zip."""
    import zipfile

    from deepfield.portable.archive import pack_folder

    fld = store.create_field("mixed")
    fld.add("Good", "Plain UTF-8 text.")
    (fld.path / "latin.md").write_bytes(b"# Latin\n\ncaf\xe9 au lait\n")
    report = fld.index()
    assert any("latin.md" in w and "not valid UTF-8" in w for w in report.warnings)
    conn = fld.index_handle().conn
    assert [r[0] for r in conn.execute("SELECT filename FROM pages")] == ["good.md"]
    listing = (fld.path / "listing.md").read_text()
    assert "good.md" in listing and "latin.md" not in listing
    packed = pack_folder(fld.path, tmp_path / "mixed.memoryfield.zip")
    with zipfile.ZipFile(packed.path) as archive:
        assert "latin.md" not in archive.namelist() and "good.md" in archive.namelist()
    assert any("latin.md" in w and "UTF-8" in w for w in packed.warnings)
    assert (fld.path / "latin.md").read_bytes().endswith(b"caf\xe9 au lait\n")  # kept


def test_a_search_of_an_unchanged_field_leaves_the_index_file_as_it_was(
        tmp_path: Path, embedder: FakeEmbedder) -> None:
    """A field in a git checkout: reading and searching must not dirty the index file."""
    root = tmp_path / "mem"
    deepfield.init(root, EmbeddingConfig("fake")).close()

    def index_files() -> dict[str, bytes]:
        folder = root / "notes"
        return {p.name: p.read_bytes() for p in folder.iterdir() if ".sqlite3" in p.name}

    with deepfield.open(root, embedder=embedder) as store:
        page = store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
        path = root / "notes" / page.filenames[0]
        hour_ago = time.time() - 3600  # not "racy": older than the last sync by far
        os.utime(path, (hour_ago, hour_ago))
        store.field("notes").index()
    before = index_files()
    for _ in range(2):
        with deepfield.open(root, embedder=embedder) as store:
            assert store.search("carbon woks").results
            assert store.field("notes").read("woks").text
        assert index_files() == before


def test_a_search_after_a_write_fills_the_spec_pages_table(field: deepfield.Field,
                                                            embedder: FakeEmbedder) -> None:
    """Other memoryfield readers see the pages deepfield's own searches find: the page
    vectors are derived (no encoder pass) as soon as the chunks have theirs."""
    for title in ("Woks", "Kettles", "Knives"):
        field.add(title, f"Notes on {title.lower()} and their care.", review=False)
    assert field.search("care of knives").results
    conn = sqlite3.connect(field.path / f"{embedder.model_code}.sqlite3")
    listed = {row[0] for row in conn.execute("SELECT filename FROM pages")}
    conn.close()
    assert listed == {"woks.md", "kettles.md", "knives.md"}
    assert field.index_handle().pending().page_vectors == 0
