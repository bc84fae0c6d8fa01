"""Writing, updating, splitting, archiving pages and keeping listing.md, on real files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import deepfield
from deepfield.errors import (
    InvalidNameError,
    InvalidPageError,
    PageConflictError,
    PageNotFoundError,
)
from deepfield.manage.activation_log import instance_id
from deepfield.manage.supersede import supersede
from deepfield.page import PAGE_LIMIT_BYTES, Page

ISO = re.compile(r"^'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ'$")


def frontmatter_lines(path: Path) -> dict[str, str]:
    text = path.read_text()
    block = text.split("---\n")[1]
    return dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)


def test_write_fills_missing_frontmatter(field: deepfield.Field) -> None:
    result = field.write("# Carbon Fibre Woks\n\nThey heat unevenly.\n")
    (page,) = result.pages
    assert page.filename == "carbon-fibre-woks.md" and page.action == "created"
    path = field.path / page.filename
    lines = frontmatter_lines(path)
    assert list(lines) == ["title", "uuid", "created", "updated"]
    assert lines["title"] == "Carbon Fibre Woks"
    assert ISO.match(lines["created"]) and ISO.match(lines["updated"])
    assert lines["uuid"] == page.uuid
    assert path.read_text().endswith("# Carbon Fibre Woks\n\nThey heat unevenly.\n")


def test_unknown_keys_kept_and_title_from_first_line(field: deepfield.Field) -> None:
    text = "---\nmood: calm   # keep me\nweird_Key: [1, 2]\n---\nplain text first line\n"
    (page,) = field.write(text).pages
    written = (field.path / page.filename).read_text()
    assert "mood: calm   # keep me\n" in written and "weird_Key: [1, 2]\n" in written
    assert page.title == "plain text first line"


def test_a_large_page_written_again_without_a_name_stays_one_page(
        field: deepfield.Field) -> None:
    # A page small enough came back `unchanged`; one over 8 KB (split into parts) made a
    # whole new set of parts each time: report-2.md, report-3.md … (an agent's retry).
    body = "# Report\n\n" + "\n\n".join(
        f"## Part {i}\n\n" + " ".join(f"Finding {i}.{j} is important." for j in range(40))
        for i in range(12))
    first = field.write(body)
    assert len(first.filenames) >= 2 and first.filenames[0] == "report.md"
    again = field.write(body)
    assert again.filenames == first.filenames
    assert {p.action for p in again.pages} == {"unchanged"}
    assert [p.uuid for p in again.pages] == [p.uuid for p in first.pages]
    assert not (field.path / "report-2.md").exists()
    tagged = "---\ntags: [q3]\n---\n" + body  # more values: not the same page
    assert field.write(tagged).filenames[0] == "report-2.md"
    assert field.write(tagged).filenames[0] == "report-2.md"
    changed = field.write(body + "\nOne more line.\n")
    assert changed.filenames[0] == "report-3.md" and changed.pages[0].action == "created"


def test_same_title_never_overwrites(field: deepfield.Field) -> None:
    names = [field.add("Same title", f"text {i}").pages[0].filename for i in range(3)]
    assert names == ["same-title.md", "same-title-2.md", "same-title-3.md"]
    assert {(field.path / n).read_text().split("---\n")[2] for n in names} == {
        "text 0\n", "text 1\n", "text 2\n"}


def test_a_second_page_of_one_title_is_said(field: deepfield.Field) -> None:
    assert field.add("Wok notes", "Carbon woks heat fast.").warnings == []
    second = field.add("wok  Notes", "Cast iron holds heat.")
    assert second.filenames == ["wok-notes-2.md"]
    assert second.warnings == ["wok-notes-2.md: a page titled 'wok Notes' is already in "
                               f"{field.name}: wok-notes.md (edit that page, or give --name to "
                               "keep both on purpose)"]
    # The same page again is no second page; a name given on purpose, or another title
    # that only shares the slug, is not warned about.
    assert field.add("Wok notes", "Carbon woks heat fast.").warnings == []
    assert field.add("Wok notes", "On purpose.", name="wok-v2").warnings == []
    assert field.add("Wok notes!", "Punctuated.").warnings == []
    # A superseded page is not current.
    supersede(field, "wok-notes", "wok-notes-2")
    third = field.add("Wok notes", "A third take.")
    assert third.warnings[0].endswith("wok-notes-2.md (edit that page, or give --name to keep "
                                      "both on purpose)")


def test_update_by_uuid_touches_updated_only_on_change(field: deepfield.Field) -> None:
    first = field.add("Plan", "version one", summary="the plan").pages[0]
    path = field.path / first.filename
    original = path.read_text()
    again = field.write(original).pages[0]
    assert again.action == "unchanged" and path.read_text() == original
    page = Page.parse(original)
    page.body = "version two\n"
    page.set("updated", "2000-01-01T00:00:00Z")  # ignored: deepfield stamps the change itself
    changed = field.write(page.render()).pages[0]
    assert changed.action == "updated" and changed.filename == first.filename
    after = Page.parse(path.read_text())
    assert after.uuid == first.uuid and after.body == "version two\n"
    assert after.get_str("created") == Page.parse(original).get_str("created")
    assert after.get_str("updated") != "2000-01-01T00:00:00Z"


def test_named_write_keeps_stored_uuid_and_rejects_another(field: deepfield.Field) -> None:
    first = field.add("Doc", "one", name="doc").pages[0]
    replaced = field.write("# Doc\n\ntwo\n", name="doc").pages[0]
    assert replaced.action == "updated" and replaced.uuid == first.uuid
    with pytest.raises(PageConflictError):
        field.write("---\nuuid: 11111111-2222-4333-8444-555555555555\n---\nthree\n", name="doc")
    other = field.add("Other", "x").pages[0]
    with pytest.raises(PageConflictError):
        field.write(f"---\nuuid: {first.uuid}\n---\nsteal\n", name=other.filename[:-3])
    assert "two" in (field.path / "doc.md").read_text()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", InvalidPageError),
        (b"   \n\n", InvalidPageError),
        (b"caf\xe9 au lait", InvalidPageError),
        (b"\x00\x01binary", InvalidPageError),
        (b"---\ntitle: [broken\n---\nbody\n", InvalidPageError),
    ],
)
def test_bad_input_writes_nothing(field: deepfield.Field, data: bytes, error: type) -> None:
    before = sorted(p.name for p in field.path.iterdir())
    with pytest.raises(error):
        field.write(data)
    assert sorted(p.name for p in field.path.iterdir()) == before


def test_invalid_name_rejected(field: deepfield.Field) -> None:
    with pytest.raises(InvalidNameError):
        field.write("text", name="Bad Name")


def test_a_field_name_in_capitals_points_at_the_field_that_exists(
        store: deepfield.Store) -> None:
    store.create_field("research")
    with pytest.raises(InvalidNameError) as taken:
        store.create_field("Research")
    assert "field 'research' already exists" in (taken.value.hint or "")
    with pytest.raises(InvalidNameError) as fresh:
        store.create_field("My Notes")
    assert "try `my-notes`" in (fresh.value.hint or "")


def test_too_large_rejected(field: deepfield.Field) -> None:
    with pytest.raises(InvalidPageError, match="bytes"):
        field.write(b"a" * (17 << 20))


def test_large_page_is_split_and_rewrite_is_idempotent(field: deepfield.Field) -> None:
    body = "# Report\n\n" + "\n\n".join(
        f"## Part {i}\n\n" + " ".join(f"Finding {i}.{j} is important." for j in range(40))
        for i in range(12)
    )
    result = field.write(body, name="report")
    names = result.filenames
    assert len(names) >= 2 and names[0] == "report.md"
    assert all((field.path / n).stat().st_size <= PAGE_LIMIT_BYTES for n in names)
    uuids = {p.uuid for p in result.pages}
    assert len(uuids) == len(names)
    again = field.write(body, name="report")
    assert again.filenames == names and {p.action for p in again.pages} == {"unchanged"}
    assert {p.uuid for p in again.pages} == uuids
    shorter = field.write("# Report\n\nNow short.\n", name="report")
    assert shorter.filenames == ["report.md"]
    # Old parts archived, not deleted; part 1's previous version too (replaced by name).
    assert sorted(field.archived()) == sorted(names)
    assert not (field.path / names[1]).exists()


def test_archive_and_restore(field: deepfield.Field) -> None:
    name = field.add("Temp", "short lived").pages[0].filename
    where = field.archive(name)
    assert where == f"archive/{name}" and not (field.path / name).exists()
    assert (field.path / where).read_text().endswith("short lived\n")
    assert [d.filename for d in field.pages()] == []
    assert field.search("short lived", mode="bm25").results == []
    field.add("Temp", "a new page with the same name")
    second = field.archive(name)
    assert second != where and (field.path / second).exists()
    field.add("Temp", "third page, live")
    with pytest.raises(PageConflictError):
        field.restore(name)  # a live page already has its name
    assert field.restore(name, as_name="temp-old") == "temp-old.md"  # the newest: second
    third = field.archive(name)  # may take the freed name of second (same second) or not
    assert field.restore(third.removeprefix("archive/")) == name
    with pytest.raises(PageNotFoundError):
        field.restore("never-existed")
    # A path is never followed out of archive/ nor used as the restored name.
    escaped = field.path.parent.parent / "temp.md"
    field.archive(name)
    assert field.restore(f"../../{name}") == name and not escaped.exists()


def test_listing_is_kept_up_to_date(field: deepfield.Field) -> None:
    field.add("Alpha", "a", summary="first memo")
    field.add("Beta", "b")
    listing = (field.path / "listing.md").read_text()
    assert "- [Alpha](alpha.md) — first memo" in listing and "- [Beta](beta.md)" in listing
    (field.path / "gamma.md").write_text("# Gamma\n\nhand written\n")
    field.index()
    assert "- [Gamma](gamma.md)" in (field.path / "listing.md").read_text()
    field.archive("beta")
    assert "beta.md" not in (field.path / "listing.md").read_text()


def test_listing_is_rendered_only_when_what_it_shows_changes(
        field: deepfield.Field, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new body under the same title and memo does not render listing.md again (that reads
    every page's row: ~35 ms at 10k pages); a new memo, a new page or a page gone does."""
    from deepfield import listing as listing_module

    rendered: list[int] = []
    real_render = listing_module.render_listing
    monkeypatch.setattr(listing_module, "render_listing",
                        lambda *a: rendered.append(1) or real_render(*a))
    field.add("Alpha", "a", summary="first memo")
    assert rendered == [1]
    field.write("---\ntitle: Alpha\nsummary: first memo\n---\nNew body.\n", name="alpha")
    assert rendered == [1]
    field.write("---\ntitle: Alpha\nsummary: second memo\n---\nNew body.\n", name="alpha")
    assert rendered == [1, 1] and "second memo" in (field.path / "listing.md").read_text()
    (field.path / "alpha.md").write_bytes(b"\xff\xfe not text")
    field.index()
    assert "alpha.md" not in (field.path / "listing.md").read_text()  # no longer a page


def test_hand_written_listing_is_left_alone(field: deepfield.Field) -> None:
    (field.path / "listing.md").write_text("# My own catalogue\n")
    report = field.write("# New\n\ntext\n")
    assert (field.path / "listing.md").read_text() == "# My own catalogue\n"
    assert report.pages[0].action == "created"
    assert any("listing.md" in w for w in field.index().warnings)


def test_resolve_by_name_stem_and_uuid(field: deepfield.Field) -> None:
    page = field.add("Lookup me", "x").pages[0]
    assert field.resolve("lookup-me") == field.resolve("lookup-me.md") == page.filename
    assert field.resolve(page.uuid) == page.filename
    assert field.resolve(page.uuid[:8]) == page.filename
    with pytest.raises(PageNotFoundError):
        field.resolve("nope")
    with pytest.raises(PageNotFoundError):
        field.resolve("../etc/passwd")


def test_foreign_field_opens_as_is(tmp_path: Path, embedder: object) -> None:
    folder = tmp_path / "someone-elses"
    folder.mkdir()
    (folder / "index.md").write_text("# Intro\n\nNot a page.\n")
    (folder / "plain.md").write_text("No frontmatter, just words about tomatoes.\n")
    (folder / "with-fm.md").write_text("---\ntitle: Tomatoes\nx-custom: 1\n---\nRed fruit.\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    (folder / "plain.md~").write_text("editor backup about tomatoes\n")
    (folder / "image.png").write_bytes(b"\x89PNG")
    (folder / "sub").mkdir()
    (folder / "sub" / "hidden.md").write_text("tomatoes in a sub-folder\n")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    field = deepfield.open_field(folder, embedder)  # type: ignore[arg-type]
    report = field.index()
    assert sorted(d.filename for d in field.pages()) == ["plain.md", "with-fm.md"]
    assert any("sub/" in w for w in report.warnings)
    hits = field.search("tomatoes", mode="bm25").results
    assert {h.filename for h in hits} == {"plain.md", "with-fm.md"}
    for name, data in before.items():  # indexing changed none of the author's files
        assert (folder / name).read_bytes() == data
    assert field.intro() == "# Intro\n\nNot a page.\n"


def test_hand_edited_pages_with_odd_yaml_never_break_the_field(field: deepfield.Field) -> None:
    """An impossible date or a self-referencing alias written by hand: the field still lists,
    searches and reads; the bad block is reported, never raised."""
    (field.path / "dated.md").write_text("---\ntitle: Dated\nupdated: 2020-13-45\n---\nplums\n")
    (field.path / "alias.md").write_text("---\ntitle: Alias\na: &a [*a]\n---\nplums too\n")
    assert sorted(d.filename for d in field.pages()) == ["alias.md", "dated.md"]
    found = {h.filename for h in field.search("plums", mode="bm25").results}
    assert found == {"alias.md", "dated.md"}
    assert field.read("dated").frontmatter["updated"] == "2020-13-45"
    assert any("alias.md" in w and "too deep" in w for w in field.warnings())


def test_a_symbolic_link_is_never_read_as_a_page(field: deepfield.Field, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    (field.path / "link.md").symlink_to(secret)
    with pytest.raises(InvalidPageError, match="symbolic link"):
        field.read("link.md")
    assert "link.md" not in [d.filename for d in field.pages()]


def test_reindex_recovers_from_an_index_file_sqlite_cannot_open(field: deepfield.Field) -> None:
    field.add("Plums", "Plums ripen in August.")
    index_path = field.index_handle().path
    field.close()
    index_path.write_bytes(b"this is not a database" * 100)
    reopened = deepfield.Field(field.path, field.embedder, name=field.name)
    # The file is moved aside and the index rebuilt from the pages (issue 18 item 1).
    assert [d.filename for d in reopened.pages()] == ["plums.md"]
    assert list((field.path / ".deepfield").glob(f"{index_path.name}.corrupt-*"))
    reopened.close()
    index_path.write_bytes(b"this is not a database" * 100)
    reopened = deepfield.Field(field.path, field.embedder, name=field.name)
    reopened.reindex()
    assert [h.filename for h in reopened.search("plums", mode="bm25").results] == ["plums.md"]
    reopened.close()


def test_index_and_listing_are_never_written_as_pages(field: deepfield.Field) -> None:
    for name in ("index", "listing"):
        with pytest.raises(InvalidNameError, match=f"{name}.md is not a page name"):
            field.write("# Mine\n\ntext\n", name=name)
    written = field.add("Index", "A page that happens to be called Index.").pages[0]
    assert written.filename == "index-page.md"
    assert not (field.path / "index.md").exists() or "A page that happens" not in (
        field.path / "index.md").read_text()


def test_the_same_uuid_in_capitals_is_no_conflict(field: deepfield.Field) -> None:
    written = field.add("Woks", "Carbon steel woks.").pages[0]
    text = f"---\ntitle: Woks\nuuid: {written.uuid.upper()}\n---\nSeasoned woks.\n"
    again = field.write(text, name="woks").pages[0]
    assert again.filename == "woks.md" and again.action == "updated"


def test_write_together_renames_only_after_every_file_is_written(tmp_path: Path) -> None:
    from deepfield.fsutil import write_together

    (tmp_path / "taken.md").write_text("someone else's\n")
    (tmp_path / "old.md").write_text("old\n")
    landed = write_together([(tmp_path / "new.md", b"new\n", True),
                             (tmp_path / "taken.md", b"mine\n", True),
                             (tmp_path / "old.md", b"replaced\n", False)])
    assert landed == [True, False, True]
    assert (tmp_path / "taken.md").read_text() == "someone else's\n"  # never clobbered
    assert (tmp_path / "new.md").read_text() == "new\n"
    assert (tmp_path / "old.md").read_text() == "replaced\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.md", "old.md", "taken.md"]


def test_a_write_warns_of_keys_the_spec_would_not_accept(field: deepfield.Field) -> None:
    text = "---\ntitle: Odd\nuuid: not-a-uuid\ncreated: yesterday\n---\nBody.\n"
    result = field.write(text, name="odd")
    assert result.warnings == [
        f"{field.name}/odd.md: uuid 'not-a-uuid' is not a UUID",
        f"{field.name}/odd.md: created 'yesterday' is not an ISO 8601 datetime such as "
        "2026-03-01T09:00:00Z"]
    assert (field.path / "odd.md").is_file()  # stored all the same
    clean = field.add("Fine", "A page deepfield dates and names itself.")
    assert clean.warnings == []


def test_a_write_never_goes_through_a_symbolic_link(field: deepfield.Field,
                                                    tmp_path: Path) -> None:
    """read and search skip links; a write by that name is refused, so nothing outside the
    field is copied into archive/ or replaced."""
    outside = tmp_path / "secret.txt"
    outside.write_text("SECRET outside text\n")
    (field.path / "notes.md").symlink_to(outside)
    with pytest.raises(PageConflictError, match=r"notes\.md in .* is a symbolic link"):
        field.write("new body\n", name="notes")
    assert outside.read_text() == "SECRET outside text\n"
    assert (field.path / "notes.md").is_symlink()
    assert not (field.path / "archive").exists()


def test_a_new_field_ignores_its_derived_files_in_git(store: deepfield.Store) -> None:
    """Committed, the index conflicts on every merge and blocks `git checkout`; the use log
    (one file per machine, made to merge) is kept."""
    import shutil
    import subprocess

    fld = store.create_field("gitted")
    ignore = (fld.path / ".gitignore").read_text()
    assert {"*.sqlite3", "*.sqlite3-*", ".deepfield/"} <= set(ignore.split())
    fld.add("Woks", "Carbon fibre woks heat unevenly.")
    fld.read("woks")  # a use: activation/
    assert [p.name for p in fld.path.glob("*.sqlite3")] and (fld.path / "activation").is_dir()
    assert {d.filename for d in fld.pages()} == {"woks.md"}  # not a page
    git = shutil.which("git")
    if git is not None:
        subprocess.run([git, "init", "-q"], cwd=fld.path, check=True)
        listed = subprocess.run([git, "ls-files", "--others", "--exclude-standard"],
                                cwd=fld.path, check=True, capture_output=True, text=True)
        assert sorted(listed.stdout.split()) == [".gitignore", f"activation/{instance_id()}.jsonl",
                                                 "listing.md", "woks.md"]
    # A person's own .gitignore is left as it is.
    (store.root / "mine").mkdir()
    (store.root / "mine" / ".gitignore").write_text("*.tmp\n")
    store.create_field("mine", exist_ok=True)
    assert (store.root / "mine" / ".gitignore").read_text() == "*.tmp\n"
