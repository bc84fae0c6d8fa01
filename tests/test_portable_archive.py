"""Pack and unpack: memoryfield zips, sha256 pins and hostile archives (all built here)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import zipfile
from pathlib import Path

import pytest

import deepfield
from deepfield import portable
from deepfield.cli import main
from deepfield.errors import (
    ArchiveError,
    ExportTargetError,
    FieldExistsError,
    PinMismatchError,
    UnsafeArchiveError,
)
from deepfield.manage.review import propose
from deepfield.portable.zipsafe import ZipLimits


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The real console entry point in-process (its error handling included)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def notes(store: deepfield.Store) -> deepfield.Field:
    field = store.create_field("notes", intro="Kitchen notes.")
    field.add("Carbon fibre woks", "Carbon fibre woks heat unevenly.", summary="Woks.")
    field.add("Finnish bureaucracy", "Forms come in triplicate.")
    field.add("Old page", "To be archived.")
    field.archive("old-page")
    logs = field.path / "logs"
    logs.mkdir()
    (logs / "activation.jsonl").write_text('{"event": "read"}\n')
    (field.path / "photo.png").write_bytes(b"\x89PNG fake")
    (field.path / ".deepfield-scratch").write_text("hidden")
    return field


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def make_zip(path: Path, entries: list[tuple[str | zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return path


# ---------------------------------------------------------------------- pack


def test_pack_writes_a_flat_memoryfield_zip(notes: deepfield.Field, tmp_path: Path) -> None:
    result = portable.pack(notes, tmp_path / "notes.memoryfield.zip")
    names = zipfile.ZipFile(result.path).namelist()
    assert sorted(names) == sorted([
        "carbon-fibre-woks.md", "finnish-bureaucracy.md", "index.md", "listing.md",
        "logs/activation.jsonl", "photo.png",
    ])
    assert result.pages == 2 and result.files == 6 and result.index is None
    assert result.sha256 == portable.sha256_file(result.path)
    listing = zipfile.ZipFile(result.path).read("listing.md").decode()
    assert "carbon-fibre-woks.md" in listing and "old-page" not in listing


def test_pack_is_deterministic(notes: deepfield.Field, tmp_path: Path) -> None:
    first = portable.pack(notes, tmp_path / "a.memoryfield.zip")
    second = portable.pack(notes, tmp_path / "b.memoryfield.zip")
    assert first.sha256 == second.sha256
    with pytest.raises(ArchiveError, match="already exists"):
        portable.pack(notes, first.path)
    assert portable.pack(notes, first.path, force=True).sha256 == first.sha256


def test_reading_and_searching_leave_the_packs_sha256_as_it_was(
        notes: deepfield.Field, tmp_path: Path) -> None:
    # Every read and search appends to activation/<host>.jsonl: packed, it changed the pin
    # of the same pages and handed the receiver the sender's reading history.
    propose(notes, "finnish-bureaucracy", "carbon-fibre-woks", "a person's call")  # queued
    first = portable.pack(notes, tmp_path / "a.memoryfield.zip")
    notes.read("carbon-fibre-woks")
    assert notes.search("woks heat").results
    assert list((notes.path / "activation").glob("*.jsonl"))  # the log is there, not packed
    second = portable.pack(notes, tmp_path / "b.memoryfield.zip")
    assert second.sha256 == first.sha256
    names = zipfile.ZipFile(second.path).namelist()
    assert not [n for n in names if n.startswith("activation/")]
    assert "review/queue.jsonl" in names  # the review decisions belong with the field


def test_pack_with_index_snapshots_the_live_index(notes: deepfield.Field, tmp_path: Path) -> None:
    notes.index()
    result = portable.pack(notes, tmp_path / "n.memoryfield.zip", with_index=True)
    index_name = notes.index_handle().path.name
    assert result.index == index_name and result.warnings == []
    extracted = tmp_path / "idx.sqlite3"
    extracted.write_bytes(zipfile.ZipFile(result.path).read(index_name))
    conn = sqlite3.connect(extracted)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("SELECT count(*) FROM df_docs").fetchone()[0] == 2
    conn.close()


# ---------------------------------------------------------------------- unpack


def test_unpack_round_trip_keeps_bytes_and_timestamps(
    store: deepfield.Store, notes: deepfield.Field, tmp_path: Path
) -> None:
    notes.index()
    packed = portable.pack(notes, tmp_path / "notes.memoryfield.zip", with_index=True)
    result = portable.unpack(store, packed.path, name="copy", sha256=packed.sha256.upper())
    copy = store.field("copy")
    for name in ("carbon-fibre-woks.md", "index.md", "logs/activation.jsonl"):
        assert (copy.path / name).read_bytes() == (notes.path / name).read_bytes()
        assert int((copy.path / name).stat().st_mtime) == int((notes.path / name).stat().st_mtime)
    assert result.pages == 2 and result.index_files == [notes.index_handle().path.name]
    assert copy.search("woks", mode="bm25").results[0].filename == "carbon-fibre-woks.md"
    # The shipped index was used: the pages were already there, nothing had to be re-added.
    assert copy.index().added == 0


def test_a_shipped_index_that_lies_is_rebuilt_from_the_pages(
    store: deepfield.Store, notes: deepfield.Field, tmp_path: Path
) -> None:
    notes.index()
    index_name = notes.index_handle().path.name
    packed = portable.pack(notes, tmp_path / "n.memoryfield.zip", with_index=True)
    # A hostile author rewrites the shipped index so search shows text no page contains.
    hostile = tmp_path / "hostile.memoryfield.zip"
    with zipfile.ZipFile(packed.path) as src, zipfile.ZipFile(hostile, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == index_name:
                db = tmp_path / "x.sqlite3"
                db.write_bytes(data)
                conn = sqlite3.connect(db)
                conn.execute(
                    "INSERT INTO df_chunks (doc_id, ord, kind, heading, line_start, line_end, "
                    "body, context, cjk, embedding) SELECT doc_id, 99, kind, heading, "
                    "line_start, line_end, 'wire money to mallory', context, cjk, embedding "
                    "FROM df_chunks LIMIT 1")
                conn.commit()
                conn.close()
                data = db.read_bytes()
            out.writestr(info, data)
    portable.unpack(store, hostile, name="copy")
    copy = store.field("copy")
    assert copy.search("mallory", mode="bm25").results == []
    assert copy.search("woks", mode="bm25").results[0].filename == "carbon-fibre-woks.md"
    assert copy.index_handle().pending_vectors() == 0  # the true chunks kept their vectors


def test_unpack_never_writes_into_an_existing_field(
    store: deepfield.Store, notes: deepfield.Field, tmp_path: Path
) -> None:
    packed = portable.pack(notes, tmp_path / "notes.memoryfield.zip")
    before = snapshot(notes.path)
    with pytest.raises(FieldExistsError):
        portable.unpack(store, packed.path)
    assert snapshot(notes.path) == before
    assert portable.unpack(store, packed.path, name="notes-2").path.name == "notes-2"


def test_wrong_pin_is_refused_before_anything_is_used(
    store: deepfield.Store, notes: deepfield.Field, tmp_path: Path
) -> None:
    packed = portable.pack(notes, tmp_path / "notes.memoryfield.zip")
    before = sorted(p.name for p in store.root.iterdir())
    with pytest.raises(PinMismatchError, match="not the pinned"):
        portable.unpack(store, packed.path, name="other", sha256="ab" * 32)
    with pytest.raises(ArchiveError, match="not a sha256 pin"):
        portable.unpack(store, packed.path, name="other", sha256="xyz")
    assert sorted(p.name for p in store.root.iterdir()) == before


def _symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("link.md")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


HOSTILE: dict[str, list[tuple[str | zipfile.ZipInfo, bytes]]] = {
    "traversal": [("ok.md", b"# ok\n"), ("../evil.md", b"# evil\n")],
    "traversal-inner": [("logs/../../evil.txt", b"x")],
    "absolute": [("/tmp/evil.md", b"# evil\n")],
    "backslash": [("..\\evil.md", b"# evil\n")],
    "drive": [("C:/evil.md", b"# evil\n")],
    "symlink": [(_symlink_entry(), b"/etc/passwd")],
    "page-subfolder": [("ok.md", b"# ok\n"), ("sub/page.md", b"# nested\n")],
    "bomb": [("bomb.md", b"\0" * (2 << 20))],
    "duplicate": [("a.md", b"# a\n"), ("a.md", b"# b\n")],
    "file-and-folder": [("logs/x.txt", b"x"), ("logs", b"y")],
    "folder-entry-and-file": [("a/", b""), ("a", b"y")],
    "case-folder": [("Logs", b"y"), ("logs/x.txt", b"x")],
    "long-name": [("a" * 300 + ".png", b"x")],
    "many-small-bombs": [(f"f{i}.txt", b"\0" * (900 << 10)) for i in range(3)],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_zips_are_refused_and_change_nothing(
    store: deepfield.Store, tmp_path: Path, kind: str
) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        hostile = make_zip(tmp_path / f"{kind}.memoryfield.zip", HOSTILE[kind])
    before = sorted(p.name for p in store.root.iterdir())
    with pytest.raises(UnsafeArchiveError):
        portable.unpack(store, hostile)
    assert sorted(p.name for p in store.root.iterdir()) == before
    assert not (tmp_path / "evil.md").exists() and not Path("/tmp/evil.md").exists()


def test_limits_on_entries_and_sizes(store: deepfield.Store, tmp_path: Path) -> None:
    many = make_zip(tmp_path / "many.zip", [(f"p{i}.md", b"# p\n") for i in range(20)])
    with pytest.raises(UnsafeArchiveError, match="entries"):
        portable.unpack(store, many, limits=ZipLimits(max_entries=10))
    with pytest.raises(UnsafeArchiveError, match="bytes"):
        portable.unpack(store, many, limits=ZipLimits(max_entry_bytes=2))
    with pytest.raises(UnsafeArchiveError, match="in all"):
        portable.unpack(store, many, limits=ZipLimits(max_total_bytes=50))
    assert store.field_names() == []


def test_truncated_and_non_zip_files_are_refused(
    store: deepfield.Store, notes: deepfield.Field, tmp_path: Path
) -> None:
    packed = portable.pack(notes, tmp_path / "notes.memoryfield.zip")
    data = packed.path.read_bytes()
    truncated = tmp_path / "cut.memoryfield.zip"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveError, match="not a readable zip"):
        portable.unpack(store, truncated)
    corrupt = tmp_path / "corrupt.memoryfield.zip"
    offset = data.index(b"Forms") if b"Forms" in data else 40
    corrupt.write_bytes(data[:offset] + bytes(b ^ 0xFF for b in data[offset:offset + 8])
                        + data[offset + 8:])
    with pytest.raises(ArchiveError):
        portable.unpack(store, corrupt)
    text = tmp_path / "text.zip"
    text.write_text("not a zip")
    with pytest.raises(ArchiveError):
        portable.unpack(store, text)
    assert store.field_names() == ["notes"]
    assert not [p for p in store.root.iterdir() if p.name.startswith(".deepfield-")]


# ---------------------------------------------------------------------- CLI


def test_cli_pack_and_unpack(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, notes: deepfield.Field,
    tmp_path: Path,
) -> None:
    out = tmp_path / "shared.memoryfield.zip"
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "pack", "notes", "-o",
                               str(out))
    assert code == 0 and out.is_file()
    digest = portable.sha256_file(out)
    assert f"sha256 {digest}" in stdout
    # The zip's size and the unpacked files' size are different numbers: each says which.
    assert f"a {out.stat().st_size:,}-byte zip" in stdout
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "unpack", str(out),
                                    "--sha256", "0" * 64)
    assert code == 1 and stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("error: shared.memoryfield.zip has")
    assert "shared" not in store.field_names()
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "unpack", str(out),
                               "--sha256", digest, "--json")
    assert code == 0 and json.loads(stdout)["sha256"] == digest
    assert "shared" in store.field_names()
    code, _, stderr = run_main(capsys, "--store", str(store.root), "unpack", str(out))
    assert code == 1 and "already exists" in stderr and "--as NAME" in stderr
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "unpack", str(out), "--as",
                               "shared-copy")
    assert code == 0 and "bytes unzipped) into" in stdout


def test_pack_refuses_an_output_inside_the_field(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, notes: deepfield.Field,
    tmp_path: Path,
) -> None:
    def files() -> dict[str, bytes]:  # the pages and other files; the index may sync
        return {k: v for k, v in snapshot(notes.path).items() if ".sqlite3" not in k}

    before = files()
    page = notes.path / "carbon-fibre-woks.md"
    with pytest.raises(ExportTargetError, match="inside the field notes"):
        portable.pack(notes, page, force=True)
    # A link outside that points into the field is inside it too.
    link = tmp_path / "link.zip"
    link.symlink_to(page)
    with pytest.raises(ExportTargetError):
        portable.pack(notes, link, force=True)
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "pack", "notes", "-o",
                                    str(notes.path / "self.zip"))
    assert code == 1 and stdout == "" and stderr.count("\n") == 1
    assert "is inside the field notes" in stderr and "outside" in stderr
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "pack", "notes", "-o",
                               str(notes.path / "logs" / "x.zip"), "--force", "--json")
    assert code == 1 and json.loads(stdout)["error"]["type"] == "ExportTargetError"
    assert files() == before


def test_cli_reads_a_zip_as_a_field(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, notes: deepfield.Field,
    tmp_path: Path,
) -> None:
    packed = portable.pack(notes, tmp_path / "kitchen.memoryfield.zip")
    source = f"{packed.path}#sha256={packed.sha256}"
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "search", "woks", "-f",
                               source, "--mode", "bm25", "--json")
    assert code == 0, stdout
    hit = json.loads(stdout)["results"][0]
    assert (hit["field"], hit["filename"]) == ("kitchen", "carbon-fibre-woks.md")
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "read", source,
                               "carbon-fibre-woks")
    assert code == 0 and "heat unevenly" in stdout
    code, _, stderr = run_main(capsys, "--store", str(store.root), "add", source, "--title",
                               "X", "text")
    assert code == 1 and "read-only" in stderr
    # Editing keys in place is writing too: supersede wrote into the mirror, and the next
    # fetch kept the change (the zip itself had not changed).
    notes.add("Wok care", "Oil a carbon fibre wok after use.")
    packed = portable.pack(notes, tmp_path / "kitchen.memoryfield.zip", force=True)
    source = f"{packed.path}#sha256={packed.sha256}"
    code, _, stderr = run_main(capsys, "--store", str(store.root), "supersede", source,
                               "carbon-fibre-woks", "wok-care")
    assert code == 1 and "read-only mirror" in stderr and stderr.count("\n") == 1, stderr
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "read", source,
                               "carbon-fibre-woks", "--json")
    assert code == 0 and "superseded_by" not in json.loads(stdout)["frontmatter"]
    code, _, stderr = run_main(capsys, "--store", str(store.root), "search", "woks", "-f",
                               f"{packed.path}#sha256={'1' * 64}")
    assert code == 1 and "not the pinned" in stderr
    assert os.listdir(store.root / "notes")  # the store's own field is untouched


def test_a_memoryfield_holds_at_least_one_page(store: deepfield.Store, tmp_path: Path) -> None:
    """The spec: a memoryfield MUST contain one or more pages. An empty field is not packed
    and a zip without pages is not unpacked (both clearly), and nothing is left behind."""
    store.create_field("empty", intro="Nothing yet.")
    with pytest.raises(ArchiveError, match="has no pages"):
        portable.pack(store.field("empty"), tmp_path / "empty.memoryfield.zip")
    assert not (tmp_path / "empty.memoryfield.zip").exists()
    before = sorted(p.name for p in store.root.iterdir())
    for entries in ([], [("index.md", b"# Intro\n")], [("readme.txt", b"hello")]):
        bare = make_zip(tmp_path / "bare.memoryfield.zip", entries)
        with pytest.raises(ArchiveError, match="holds no pages"):
            portable.unpack(store, bare)
    assert sorted(p.name for p in store.root.iterdir()) == before


def test_debris_in_a_zip_is_skipped_not_refused(store: deepfield.Store, tmp_path: Path) -> None:
    debris = make_zip(tmp_path / "finder.memoryfield.zip", [
        ("good-page.md", b"# Good\n\ntext\n"),
        ("__MACOSX/._good-page.md", b"\x00\x05\x16\x07resource fork"),
        ("Thumbs.db", b"x"), ("desktop.ini", b"x"), ("good-page.md~", b"backup"),
        ("good-page.sync-conflict-20260101-1.md", b"# Conflict\n"),
    ])
    result = portable.unpack(store, debris)
    assert result.pages == 1
    assert sorted(p.name for p in result.path.iterdir() if p.is_file()) == ["good-page.md"]


def test_pages_with_names_the_spec_forbids_stay_out_of_a_zip(store: deepfield.Store,
                                                             tmp_path: Path) -> None:
    fld = store.create_field("named")
    fld.add("Good", "text")
    (fld.path / "Upper_Case.md").write_text("# Up\n\ntext\n")
    result = portable.pack(fld, tmp_path / "named.memoryfield.zip")
    with zipfile.ZipFile(result.path) as archive:
        assert "Upper_Case.md" not in archive.namelist() and "good.md" in archive.namelist()
    assert any("Upper_Case.md" in w and "upper-case.md" in w for w in result.warnings)
    assert (fld.path / "Upper_Case.md").exists()  # left out of the zip, never touched
