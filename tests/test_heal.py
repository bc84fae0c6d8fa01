"""A damaged index heals itself and a write is reported by what happened to the page (issue 18
items 1 and 2): real SQLite files overwritten in the middle, real CLI processes, a real
server app."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield import field_index
from deepfield.config import EmbeddingConfig
from deepfield.index import db
from deepfield.server import create_app

from .conftest import Cli, run_deepfield

PAGES = {f"page-{i}.md": f"# Page {i}\n\nPage {i} is about woks, gaskets and Mombasa {i}.\n"
         for i in range(40)}


def damage(path: Path) -> None:
    """8 KiB of noise into the middle of the file, leaving the header intact (the issue's
    trial); fixed noise, so every run damages the same way."""
    size = path.stat().st_size
    assert size > 16384
    with path.open("r+b") as handle:
        handle.seek(size // 2 - 4096)
        handle.write(bytes((i * 97 + 13) % 251 for i in range(8192)))


@pytest.fixture
def kstore(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    deepfield.init(path, EmbeddingConfig("none"))
    with deepfield.open(path) as store:
        fld = store.create_field("notes")
        for name, text in PAGES.items():
            (fld.path / name).write_text(text)
        fld.index()
    return path


def _index(store: Path) -> Path:
    return store / "notes" / "bm25-only.sqlite3"


def _corrupt_copies(store: Path) -> list[Path]:
    return sorted(p for p in (store / "notes" / ".deepfield").glob("bm25-only.sqlite3.corrupt-*")
                  if not p.name.endswith(("-wal", "-shm")))


@pytest.mark.parametrize("command", [("search", "gaskets"), ("index",), ("status",),
                                     ("reindex",)])
def test_every_command_heals_a_damaged_index(kstore: Path, command: tuple[str, ...]) -> None:
    damage(_index(kstore))
    done = run_deepfield("--store", str(kstore), *command)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "damaged" in line]
    assert len(lines) == 1, err  # one line says so
    assert "moved to .deepfield/bm25-only.sqlite3.corrupt-" in lines[0]
    assert len(_corrupt_copies(kstore)) == 1
    with deepfield.open(kstore) as store:  # rebuilt from the pages
        assert len(store.field("notes").pages()) == len(PAGES)
        assert store.search("gaskets", k=50).results


def test_library_heals_and_reports_it(kstore: Path) -> None:
    damage(_index(kstore))
    with deepfield.open(kstore) as store:
        found = store.field("notes").search("Mombasa", k=5)
        assert found.results
        assert any("the index was damaged" in w for w in found.warnings)
    damage(_index(kstore))
    with deepfield.open(kstore) as store:
        report = store.field("notes").reindex()
        assert report.added == len(PAGES)


def test_a_field_folder_deleted_under_an_open_field_makes_no_index_elsewhere(
        kstore: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replaced-file check used to reopen the index of a deleted folder in ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(field_index, "REPLACED_CHECK_S", 0.0)
    with deepfield.open(kstore) as store:
        fld = store.field("notes")
        assert fld.search("Mombasa", k=1).results
        shutil.rmtree(fld.path)
        with pytest.raises(deepfield.UnknownFieldError, match="is gone"):
            fld.index_handle()
    assert not list((tmp_path / "cache").rglob("*.sqlite3"))


def _served(store: deepfield.Store) -> TestClient:
    return TestClient(create_app(store), client=("127.0.0.1", 5000),
                      base_url="http://127.0.0.1:8765")


def test_http_search_and_put_heal(kstore: Path) -> None:
    damage(_index(kstore))
    with deepfield.open(kstore) as store, _served(store) as http:
        hits = http.get("/notes/search", params={"q": "gaskets", "k": 50})
        assert hits.status_code == 200, hits.text
        assert len(hits.json()["results"]) == len(PAGES)
        assert any("damaged" in w for w in hits.json()["warnings"])
    damage(_index(kstore))
    with deepfield.open(kstore) as store, _served(store) as http:
        put = http.put("/notes/new-page.md", content=b"# New\n\nA new page about gaskets.\n")
        assert put.status_code == 201, put.text
        found = http.get("/notes/search", params={"q": "new page gaskets", "mode": "bm25"})
        assert found.json()["results"][0]["filename"] == "new-page.md"
    assert len(_corrupt_copies(kstore)) == 2


@contextlib.contextmanager
def write_locked(store: Path) -> Iterator[None]:
    """Another process holds the index's write lock: reads work, writes time out (after the
    busy timeout the ``short_busy`` fixture shortens)."""
    holder = sqlite3.connect(_index(store), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def short_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 200)


@pytest.mark.usefixtures("short_busy")
def test_a_write_whose_index_fails_is_a_warning_not_an_error(kstore: Path) -> None:
    with deepfield.open(kstore) as store:
        fld = store.field("notes")
        fld.pages()  # the index is open (opening it takes the write lock briefly)
        with write_locked(kstore):
            result = fld.add("Retry me", "The gasket order ships Friday.", review=False)
            assert [p.action for p in result.pages] == ["created"]
            assert (fld.path / "retry-me.md").is_file()
            assert any("not updated (database is locked); the page is saved" in w
                       for w in result.warnings)
            again = fld.add("Retry me", "The gasket order ships Friday.", review=False)
            assert [(p.filename, p.action) for p in again.pages] == [
                ("retry-me.md", "unchanged")]
        assert not (kstore / "notes" / "retry-me-2.md").exists()
        assert _corrupt_copies(kstore) == []  # busy is not damage: nothing moved aside
        assert "retry-me.md" in {d.filename for d in fld.pages()}  # the next sync has it


def test_cli_add_reports_the_page_and_exits_0(kstore: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from deepfield.index import FieldIndex

    def busy(self: FieldIndex, *args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("database is locked")  # as after 30 s of waiting

    cli = Cli(kstore)
    with monkeypatch.context() as patch:
        patch.setattr(FieldIndex, "sync_names", busy)
        done = cli("add", "notes", "--title", "Retry me", "The gasket order ships Friday.")
    assert done.exit_code == 0, done.output
    assert "created notes/retry-me.md" in done.stdout
    assert ("warning: notes/bm25-only.sqlite3: not updated (database is locked); the page is "
            "saved") in done.stderr
    again = cli("add", "notes", "--title", "Retry me", "The gasket order ships Friday.")
    assert again.exit_code == 0 and "unchanged notes/retry-me.md" in again.stdout
    assert not (kstore / "notes" / "retry-me-2.md").exists()


@pytest.mark.usefixtures("short_busy")
def test_put_stored_with_a_failing_index_is_201_with_a_warning_header(kstore: Path) -> None:
    with deepfield.open(kstore) as store, _served(store) as http:
        assert http.get("/notes/listing.md").status_code == 200  # the writer's index is open
        with write_locked(kstore):
            put = http.put("/notes/locked.md", content=b"# Locked\n\nWritten while locked.\n")
        assert put.status_code == 201, put.text
        assert "not updated (database is locked); the page is saved" in put.headers[
            "x-deepfield-warning"]
        assert (kstore / "notes" / "locked.md").is_file()
        again = http.put("/notes/locked.md", content=b"# Locked\n\nWritten while locked.\n")
        assert again.status_code == 204


def test_a_damaged_index_after_the_page_is_stored_is_healed_with_a_warning(
        kstore: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deepfield.index import FieldIndex

    real = FieldIndex.sync_names
    calls = {"n": 0}

    def damaged_once(self: FieldIndex, *args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 1:  # the file is found damaged just as the page is indexed
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(FieldIndex, "sync_names", damaged_once)
    with deepfield.open(kstore) as store:
        fld = store.field("notes")
        result = fld.add("After damage", "Stored before the index failed.", review=False)
        assert [p.action for p in result.pages] == ["created"]
        assert [w for w in result.warnings if "the index was damaged" in w]
        assert len(_corrupt_copies(kstore)) == 1
        assert "after-damage.md" in {d.filename for d in fld.pages()}


def _alter(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


SCHEMA_DAMAGE = {
    "no df_chunks": ("DROP TABLE df_chunks",),
    "no df_docs": ("DROP TABLE df_docs",),
    "no df_chunks_fts": ("DROP TABLE df_chunks_fts",),
    "no trigger": ("DROP TRIGGER df_chunks_ai",),
    "a column short": ("ALTER TABLE df_docs DROP COLUMN warnings",),
}


@pytest.mark.parametrize("command", [("search", "gaskets"), ("index",), ("reindex",)])
@pytest.mark.parametrize("statements", SCHEMA_DAMAGE.values(), ids=SCHEMA_DAMAGE.keys())
def test_an_index_without_its_schema_is_moved_aside_and_rebuilt(
        kstore: Path, command: tuple[str, ...], statements: tuple[str, ...]) -> None:
    # Valid SQLite, so nothing said "corrupt": every command failed with "no such table"
    # and `reindex`, the fix the error named, failed the same way.
    _alter(_index(kstore), *statements)
    done = run_deepfield("--store", str(kstore), *command)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert [line for line in err.splitlines() if "damaged" in line and "moved to" in line]
    assert len(_corrupt_copies(kstore)) == 1  # kept, never deleted
    with deepfield.open(kstore) as store:
        assert len(store.field("notes").pages()) == len(PAGES)
        assert len(store.search("gaskets", k=50).results) == len(PAGES)


def test_a_table_dropped_under_an_open_index_is_healed(kstore: Path) -> None:
    with deepfield.open(kstore) as store:
        fld = store.field("notes")
        assert fld.search("gaskets", k=1).results  # the connection is open from here on
        _alter(_index(kstore), "DROP TABLE df_chunks")
        found = fld.search("gaskets", k=50)
        assert len(found.results) == len(PAGES)
        assert any("the index was damaged" in w for w in found.warnings)
    assert len(_corrupt_copies(kstore)) == 1


def test_a_query_of_a_missing_table_on_a_sound_index_moves_nothing(kstore: Path) -> None:
    with deepfield.open(kstore) as store, pytest.raises(sqlite3.OperationalError,
                                                        match="no such table"):
        store.field("notes").with_index(
            lambda index: index.conn.execute("SELECT * FROM no_such_table"))
    assert not _corrupt_copies(kstore)


def test_a_leftover_pages_table_of_another_schema_is_moved_aside(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "The office is in Berlin.", "--title", "Office")
    (path,) = (cli.store_path / "notes").glob("*.sqlite3")
    _alter(path, "DROP TABLE pages", "CREATE TABLE pages (filename TEXT, body TEXT)")
    hits = cli.json("search", "office", "--mode", "bm25")
    assert [h["filename"] for h in hits["results"]] == ["office.md"]
    assert list((cli.store_path / "notes" / ".deepfield").glob(f"{path.name}.corrupt-*"))
    with deepfield.open(cli.store_path) as store:  # the spec's table is whole again
        conn = store.field("notes").index_handle().conn
        columns = {row[1] for row in conn.execute("PRAGMA table_info(pages)")}
        assert {"frontmatter", "embedding"} <= columns


def test_a_folder_in_the_index_files_place_is_moved_aside(kstore: Path) -> None:
    _index(kstore).unlink()
    _index(kstore).mkdir()
    (_index(kstore) / "keep.txt").write_text("someone's file")
    done = run_deepfield("--store", str(kstore), "reindex")
    assert done.returncode == 0, done.stderr.decode()
    (moved,) = _corrupt_copies(kstore)
    assert (moved / "keep.txt").read_text() == "someone's file"
    assert _index(kstore).is_file()
    with deepfield.open(kstore) as store:
        assert len(store.field("notes").pages()) == len(PAGES)
