"""A long-lived Field reads only what changed when its folder changes within the sync interval.

Two Field objects on one folder stand for two server workers (or a server and a CLI): each
sees the other's writes at its next search, by comparing the folder's listing with the last
one instead of checking every file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import deepfield
from deepfield import field as field_module
from deepfield import field_sync, freshness
from deepfield.config import EmbeddingConfig
from deepfield.field import Field
from deepfield.scan import ScanResult


@pytest.fixture()
def two(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Field, Field, list[int]]]:
    """Two Fields on one folder of 30 pages, both synced; ``scans`` counts full scans."""
    deepfield.init(tmp_path / "store", EmbeddingConfig("none"))
    store = deepfield.open(tmp_path / "store")
    folder = store.create_field("notes").path
    for i in range(30):
        (folder / f"page-{i}.md").write_text(f"# Page {i}\n\nOrdinary text number {i}.\n")
    writer, reader = Field(folder, None), Field(folder, None)
    writer.review_on_write = False
    scans: list[int] = []
    real_scan = field_module.scan_field

    def counting_scan(path: Path) -> ScanResult:
        scans.append(1)
        return real_scan(path)

    writer.ensure_synced(embed=False)
    reader.ensure_synced(embed=False)
    monkeypatch.setattr(field_module, "scan_field", counting_scan)  # Field.batch
    monkeypatch.setattr(field_sync, "scan_field", counting_scan)  # syncs
    monkeypatch.setattr(freshness, "SYNC_INTERVAL", 60.0)  # no full scan falls due
    yield writer, reader, scans
    writer.close()
    reader.close()


def found(fld: Field, query: str) -> list[str]:
    return [hit.filename for hit in fld.search(query, k=3, mode="bm25").results]


def test_anothers_write_is_found_without_a_full_scan(two: tuple[Field, Field, list[int]]) -> None:
    writer, reader, scans = two
    writer.add("Walnut oil", "Walnut oil finishes the chopping board.")
    assert found(reader, "walnut") == ["walnut-oil.md"]
    (writer.path / "page-3.md").unlink()
    assert reader.ensure_synced(embed=False).removed == 1
    assert found(reader, "number 3") != ["page-3.md"]
    assert scans == []


def test_an_editors_atomic_save_is_found(two: tuple[Field, Field, list[int]]) -> None:
    """Editors save by writing a new file and renaming it over the old one: a new inode."""
    _, reader, scans = two
    temporary = reader.path / ".page-7.md.swp"
    temporary.write_text("# Page 7\n\nNow about sourdough starters.\n")
    os.replace(temporary, reader.path / "page-7.md")
    assert found(reader, "sourdough") == ["page-7.md"]
    assert scans == []


def test_a_reported_edit_in_place_is_read(two: tuple[Field, Field, list[int]]) -> None:
    """An edit in place keeps the inode and may keep the folder's mtime: a file watcher names
    the file, and the next sync reads it; names that are not pages are ignored."""
    _, reader, scans = two
    with (reader.path / "page-5.md").open("r+") as handle:  # in place: same inode
        handle.write("# Page 5\n\nQuinces poach slowly.    \n")
    reader.mark_changed({"page-5.md", "index.md", "listing.md", "notes.txt"})
    assert found(reader, "quinces") == ["page-5.md"]
    assert scans == []
    assert "index.md" not in {doc.filename for doc in reader.pages()}


def test_many_changes_or_an_unknown_change_scan_every_file(
        two: tuple[Field, Field, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader, scans = two
    monkeypatch.setattr(freshness, "QUICK_SYNC_PAGES", 4)
    for i in range(5):
        (writer.path / f"new-{i}.md").write_text(f"# New {i}\n\nFresh page {i}.\n")
    assert reader.ensure_synced(embed=False).added == 5
    assert scans == [1]
    reader.mark_changed()  # changed, but nobody knows which: every file
    reader.ensure_synced(embed=False)
    assert scans == [1, 1]


def test_edits_in_place_nobody_reported_wait_for_the_interval(
        two: tuple[Field, Field, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Syncs by name do not put off the full scan that finds them."""
    writer, reader, scans = two
    with (reader.path / "page-9.md").open("r+") as handle:
        handle.write("# Page 9\n\nMedlars ripen late.  \n")
    writer.add("Cider", "Pressing apples for cider.")
    assert found(reader, "cider") == ["cider.md"]  # by name: page-9 not read yet
    monkeypatch.setattr(freshness, "SYNC_INTERVAL", 0.0)
    monkeypatch.setattr(freshness, "SYNC_COST_FACTOR", 0)
    assert found(reader, "medlars") == ["page-9.md"]
    assert scans == [1]


def test_a_link_or_fifo_in_a_pages_place_is_never_read(
        two: tuple[Field, Field, list[int]], tmp_path: Path) -> None:
    """Found by name, as by a full scan: a symbolic link or a FIFO is no page (reading a
    FIFO would wait forever)."""
    _, reader, _ = two
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\nA secret kept outside the field.\n")
    (reader.path / "page-1.md").unlink()
    os.symlink(outside, reader.path / "page-1.md")
    (reader.path / "page-2.md").unlink()
    os.mkfifo(reader.path / "page-2.md")
    reader.mark_changed({"page-1.md", "page-2.md"})
    assert found(reader, "secret") == []
    assert {"page-1.md", "page-2.md"}.isdisjoint(d.filename for d in reader.pages())


def test_listing_catches_up_with_a_sync_whose_report_was_dropped(
        two: tuple[Field, Field, list[int]]) -> None:
    """A write of a page with a uuid first syncs the whole folder (for the uuid lookup) and
    drops that report; a page deleted by hand meanwhile must still leave listing.md."""
    writer, _, _ = two
    uuid = writer.add("Beta", "b").pages[0].uuid
    (writer.path / "page-4.md").unlink()
    writer.write(f"---\ntitle: Beta\nuuid: {uuid}\n---\n# Beta\n\nedited\n", name="beta")
    listing = (writer.path / "listing.md").read_text()
    assert "page-4.md" not in listing and "30 pages." in listing
