"""Fourth walk through import and export: defects a demanding user found, each pinned by a
test on a small realistic tree built in tmp_path."""

from __future__ import annotations

from pathlib import Path

import deepfield
from deepfield.importers.export import export_field
from deepfield.importers.obsidian import import_obsidian
from deepfield.page import Page

from .test_importers import make_tree

UUID = "3f0c9a52-8a4e-4d0b-9c55-2f1d7e9a4b61"


def test_note_that_gains_its_own_uuid_updates_its_page(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A note given a ``uuid:`` in the source after its first import was imported as a
    second page (``a-2.md``), leaving ``a.md`` behind."""
    vault = make_tree(tmp_path / "vault", {"a.md": "# A\n", "b.md": "# B\n"})
    import_obsidian(store, vault, field="notes")
    (vault / "a.md").write_text(f"---\nuuid: {UUID}\n---\n# A\n")
    report = import_obsidian(store, vault, field="notes", into=True)
    names = sorted(p.name for p in (store.root / "notes").glob("*.md"))
    assert "a-2.md" not in names and "a.md" in names
    assert report.updated == 1 and report.created == 0
    page = Page.parse((store.root / "notes" / "a.md").read_text())
    assert page.uuid == UUID
    again = import_obsidian(store, vault, field="notes", into=True)
    assert again.unchanged == 2 and again.created == 0 and not again.gone


def test_note_whose_new_uuid_is_another_pages_says_so(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """The uuid a note gains belongs to another page: the note's page is left, with a
    warning naming both, and no copy is made."""
    vault = make_tree(tmp_path / "vault", {"a.md": "# A\n"})
    import_obsidian(store, vault, field="notes")
    other = store.field("notes").write(f"---\ntitle: Other\nuuid: {UUID}\n---\nOther page.\n")
    (vault / "a.md").write_text(f"---\nuuid: {UUID}\n---\n# A\n")
    report = import_obsidian(store, vault, field="notes", into=True)
    names = sorted(p.name for p in (store.root / "notes").glob("*.md"))
    assert "a-2.md" not in names
    assert report.created == 0
    text = " ".join(report.warnings)
    assert "a.md" in text and other.pages[0].filename in text and UUID in text


def test_export_original_paths_gives_an_imported_index_note_its_path(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Imported ``--into`` a field with an introduction, a vault's own ``index.md`` note was
    exported by ``--original-paths`` as ``index-2.md``."""
    fld = store.create_field("notes")
    (fld.path / "index.md").write_text("# Notes\n\nThe field's introduction.\n")
    vault = make_tree(tmp_path / "vault", {"index.md": "# Home\n\nThe vault's home.\n",
                                           "a.md": "# A\n\nSee [[index]].\n"})
    import_obsidian(store, vault, field="notes", into=True)
    out = tmp_path / "out"
    report = export_field(store.field("notes"), out, original_paths=True, plain=True)
    assert (out / "index.md").read_text() == "# Home\n\nThe vault's home.\n"
    assert (out / "a.md").read_text() == "# A\n\nSee [[index]].\n"
    assert "The field's introduction." in (out / "index-2.md").read_text()
    assert report.intro and "index.md" in report.files


def test_link_to_a_heading_of_a_split_note_points_at_its_part(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A note over 8 KB is split into parts; ``[[Huge#Section 300]]`` pointed at
    ``huge.md#section-300`` though that heading is in a later part."""
    huge = "# Huge\n\nJump to [[#Section 300]].\n\n" + "".join(
        f"## Section {n}\n\nThe body of section {n} says something.\n\n" for n in range(1, 301))
    vault = make_tree(tmp_path / "vault", {
        "Huge.md": huge, "a.md": "# A\n\nSee [[Huge#Section 300]] and [[Huge#Section 1]].\n"})
    report = import_obsidian(store, vault, field="notes")
    parts = next(p["files"] for p in report.pages if p["source_path"] == "Huge.md")
    assert len(parts) > 1
    holder = next(name for name in parts
                  if "## Section 300\n" in (store.root / "notes" / name).read_text())
    text = (store.root / "notes" / "a.md").read_text()
    assert f"({holder}#section-300)" in text and f"({parts[0]}#section-1)" in text
    first = (store.root / "notes" / parts[0]).read_text()
    assert "](#section-300)" not in first and f"]({holder}#section-300)" in first
    again = import_obsidian(store, vault, field="notes", into=True)
    assert again.unchanged == 2 and not again.skipped
    out = tmp_path / "out"
    export_field(store.field("notes"), out, original_paths=True, plain=True)
    assert (out / "a.md").read_text() == vault.joinpath("a.md").read_text()


def test_link_follows_a_heading_to_its_new_part_when_the_note_is_split_anew(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """The linked note grows and is split anew, its heading now in another part: the linking
    page, itself unchanged, is re-pointed too."""
    sections = "".join(f"## Section {n}\n\nThe body of section {n} says something.\n\n"
                       for n in range(1, 301))
    vault = make_tree(tmp_path / "vault", {"Huge.md": "# Huge\n\n" + sections,
                                           "a.md": "# A\n\nSee [[Huge#Section 300]].\n"})
    import_obsidian(store, vault, field="notes")
    (vault / "Huge.md").write_text("# Huge\n\n" + "A long preface line.\n\n" * 400 + sections)
    report = import_obsidian(store, vault, field="notes", into=True)
    parts = next(p["files"] for p in report.pages if p["source_path"] == "Huge.md")
    holder = next(name for name in parts
                  if "## Section 300\n" in (store.root / "notes" / name).read_text())
    assert f"({holder}#section-300)" in (store.root / "notes" / "a.md").read_text()
    again = import_obsidian(store, vault, field="notes", into=True)
    assert again.unchanged == 2 and not again.skipped
