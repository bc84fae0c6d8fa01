"""Unpack keeps what pack could have written: crafted zips (real files) with what it never does."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

import deepfield
from deepfield import portable
from deepfield.errors import ArchiveError, UnsafeArchiveError

PAGE = b"---\ntitle: P\n---\n# P\nhello wok\n"


def make_zip(path: Path, entries: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return path


def test_a_senders_usage_log_and_index_sidecars_are_left_out(
        store: deepfield.Store, tmp_path: Path) -> None:
    event = json.dumps({"t": "2026-11-30T07:00:00Z", "page": "p.md", "event": "cite"}) + "\n"
    zip_path = make_zip(tmp_path / "act.memoryfield.zip", [
        ("p.md", PAGE), ("q.md", PAGE), ("activation/sender.jsonl", (event * 50).encode()),
        ("bm25-only.sqlite3-wal", b"garbage"), ("x.sqlite3-shm", b"garbage"),
        ("img/a.png", b"png")])
    result = portable.unpack(store, zip_path, name="copy")
    folder = store.root / "copy"
    assert not (folder / "activation").exists()
    assert not list(folder.glob("*.sqlite3-*"))
    assert (folder / "img" / "a.png").is_file()
    assert result.files == 3 and result.pages == 2
    assert len([w for w in result.warnings if "left out" in w]) == 3


def test_page_names_the_spec_forbids_are_left_out(store: deepfield.Store, tmp_path: Path) -> None:
    zip_path = make_zip(tmp_path / "up.memoryfield.zip",
                        [("Upper_Case.md", PAGE), ("good-page.md", PAGE)])
    result = portable.unpack(store, zip_path, name="copy")
    assert [p.name for p in (store.root / "copy").glob("*.md")] == ["good-page.md"]
    assert result.pages == 1
    assert any("Upper_Case.md" in w and "upper-case.md" in w for w in result.warnings)
    only_bad = make_zip(tmp_path / "bad.memoryfield.zip", [("Upper_Case.md", PAGE)])
    with pytest.raises(ArchiveError, match="holds no pages") as caught:
        portable.unpack(store, only_bad, name="bad")
    assert "Upper_Case.md" in (caught.value.hint or "")
    assert not (store.root / "bad").exists()


def test_names_in_another_case_are_refused_on_every_platform(
        store: deepfield.Store, tmp_path: Path) -> None:
    zip_path = make_zip(tmp_path / "case.memoryfield.zip",
                        [("p.md", PAGE), ("img/A.png", b"1"), ("img/a.png", b"2")])
    with pytest.raises(UnsafeArchiveError, match="another case"):
        portable.unpack(store, zip_path, name="copy")


def test_a_name_not_marked_utf8_and_content_not_utf8_are_left_out(
        store: deepfield.Store, tmp_path: Path) -> None:
    raw = tmp_path / "raw.zip"
    make_zip(raw, [("p.md", PAGE), ("cafX.png", b"img"), ("bad.md", b"\xff\xfe bad\n")])
    data = raw.read_bytes().replace(b"cafX.png", b"caf\xe9.png")  # flag bit 11 stays clear
    zip_path = tmp_path / "n.memoryfield.zip"
    zip_path.write_bytes(data)
    result = portable.unpack(store, zip_path, name="copy")
    names = sorted(p.name for p in (store.root / "copy").iterdir() if p.is_file())
    assert names == ["p.md"]
    assert result.pages == 1 and result.files == 1
    assert any("not marked as UTF-8" in w for w in result.warnings)
    assert any("bad.md: not valid UTF-8" in w for w in result.warnings)


@pytest.mark.parametrize("folder", ["listing.md", "bm25-only.sqlite3", "p.md", "x.sqlite3-wal"])
def test_a_folder_named_like_a_fields_own_file_is_refused(
        store: deepfield.Store, tmp_path: Path, folder: str) -> None:
    zip_path = make_zip(tmp_path / "d.memoryfield.zip", [("q.md", PAGE), (f"{folder}/y", b"z")])
    with pytest.raises(UnsafeArchiveError, match="folder named like a page or an index"):
        portable.unpack(store, zip_path, name="copy")
    assert not (store.root / "copy").exists()


def test_a_zip_mirror_leaves_out_page_names_the_spec_forbids(
        store: deepfield.Store, tmp_path: Path) -> None:
    zip_path = make_zip(tmp_path / "m.memoryfield.zip",
                        [("Upper_Case.md", PAGE), ("good-page.md", PAGE)])
    remote = portable.open_remote(str(zip_path), cache=tmp_path / "cache")
    assert [p.name for p in remote.path.glob("*.md") if p.name != "listing.md"] == [
        "good-page.md"]
    assert remote.refresh_report is not None
    assert any("Upper_Case.md" in w for w in remote.refresh_report.warnings)
