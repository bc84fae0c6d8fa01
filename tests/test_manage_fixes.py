"""Exit statuses of the console script, and what rm / restore / write / remember keep.

Each test here is a defect a tester found: a failure that exited 0, a restore that brought
back an older version, a write by uuid that left no previous version, a page hidden for good
by an archived successor, two pages with one uuid, a back-dated session page, a split page
archived in part, a duplicated heading that could not be read, a page restored as index.md.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import deepfield
from deepfield.cli import main
from deepfield.config import EmbeddingConfig
from deepfield.errors import InvalidNameError, PageConflictError, SectionNotFoundError
from deepfield.manage.forget import forget
from deepfield.memorize import remember
from deepfield.page import Page

from .test_taxonomy import HEADINGS

BROKEN = "---\ntitle: [broken\n---\nbody\n"


@pytest.fixture
def kstore(tmp_path: Path) -> Path:
    path = tmp_path / "kstore"
    deepfield.init(path, EmbeddingConfig("none"))
    store = deepfield.open(path)
    store.create_field("n")
    store.close()
    return path


def run_main(store: Path, *args: str, capsys: pytest.CaptureFixture[str]
             ) -> tuple[int, str, str]:
    """The console script's entry point in this process: (exit status, stdout, stderr)."""
    try:
        main(["--store", str(store), *args])
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return status, out, err


def _field(store: Path) -> deepfield.Field:
    return deepfield.open(store).field("n")


# ---------------------------------------------------------------- 1: exit statuses


def test_index_strict_json_fails_with_status_1(kstore: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (kstore / "n" / "broken.md").write_text(BROKEN, encoding="utf-8")
    status, out, _err = run_main(kstore, "index", "--strict", "--json", capsys=capsys)
    assert status == 1 and "--strict" in json.loads(out)["error"]["message"]
    status, _out, _err = run_main(kstore, "index", "--strict", capsys=capsys)
    assert status == 1
    assert run_main(kstore, "index", "--json", capsys=capsys)[0] == 0  # a warning only


def test_forget_that_cannot_archive_fails(kstore: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    field = _field(kstore)
    old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 400 * 86_400))
    field.add("Old", "Old notes.", frontmatter={"created": old, "updated": old}, review=False)
    moment = time.time() - 400 * 86_400  # the file as old as its date (forget takes the later)
    os.utime(field.path / "old.md", (moment, moment))
    field.index()
    (field.path / "archive").write_text("a file where the archive folder goes\n")
    for json_flag in ((), ("--json",)):
        status, out, _err = run_main(kstore, "forget", "n", "--older-than", "30", *json_flag,
                                     capsys=capsys)
        assert status == 1, out
    assert json.loads(out)["not_archived"] == ["old.md"]


def test_interrupted_reindex_json_exits_130(kstore: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _field(kstore).add("Note", "Some text.")

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(deepfield.Field, "index", interrupted)
    status, out, err = run_main(kstore, "reindex", "--json", capsys=capsys)
    assert status == 130 and json.loads(out)["interrupted"] is True and "pending" in err


def test_taxonomy_lint_strict_json_fails(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dstore"
    deepfield.init(path, EmbeddingConfig("none"))
    assert run_main(path, "domain", "new", "agents", capsys=capsys)[0] == 0
    (path / "agents" / "taxonomy.md").write_text(HEADINGS, encoding="utf-8")
    run_main(path, "domain", "add", "agents", "--kind", "blog", "--title", "Elsewhere",
             "--category", "Agents", capsys=capsys)
    status, out, _err = run_main(path, "taxonomy", "agents", "--lint", "--strict", "--json",
                                 capsys=capsys)
    assert status == 1 and json.loads(out)["issues"]
    assert run_main(path, "taxonomy", "agents", "--json", capsys=capsys)[0] == 0


# ---------------------------------------------------------------- 3: write by uuid


def test_write_by_uuid_keeps_the_previous_version(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    first = field.add("Note", "The original, carefully written note.", summary="Important")
    uuid = first.pages[0].uuid
    result = field.write(f"---\ntitle: Note\nuuid: {uuid}\n---\noops\n")
    page = result.pages[0]
    assert page.filename == "note.md" and page.action == "updated"
    assert page.previous == "archive/note.md"
    assert "carefully written" in (field.path / "archive" / "note.md").read_text()
    again = field.write(f"---\ntitle: Note\nuuid: {uuid}\n---\noops\n")  # unchanged: no copy
    assert again.pages[0].previous is None and field.archived() == ["note.md"]


# ---------------------------------------------------------------- 2, 5, 8: restore


def test_restore_brings_back_the_newest_version(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    field.add("G", "Version one.", name="g")
    field.add("G", "Version two.", name="g")  # version one -> archive/g.md
    field.archive("g")
    result = field.restore_page("g")
    assert result.filename == "g.md" and result.source.startswith("archive/g--archived-")
    assert result.others == ["g.md"]
    assert (field.path / "g.md").read_text().endswith("Version two.\n")
    # The older one is still there, and `archive/NAME.md` names it exactly.
    older = field.restore_page("archive/g.md", as_name="g-old")
    assert older.source == "archive/g.md"
    assert (field.path / "g-old.md").read_text().endswith("Version one.\n")


def test_restore_cli_says_which_file(kstore: Path, capsys: pytest.CaptureFixture[str]) -> None:
    field = _field(kstore)
    field.add("G", "Version one.", name="g")
    field.add("G", "Version two.", name="g")
    field.archive("g")
    status, out, _err = run_main(kstore, "restore", "n", "g", capsys=capsys)
    assert status == 0 and "from archive/g--archived-" in out and "archive/g.md" in out


def test_restore_as_another_name_gets_a_fresh_uuid(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    uuid = field.add("T", "First.", name="t").pages[0].uuid
    field.add("T", "Second.", name="t")  # the first version, same uuid, into archive/
    result = field.restore_page("t", as_name="t-copy")
    assert result.new_uuid and result.new_uuid != uuid
    assert Page.parse((field.path / "t-copy.md").read_text()).uuid == result.new_uuid
    assert field.read(uuid).filename == "t.md"  # one page per uuid
    field.archive("t")
    back = field.restore_page("t")  # nobody has its uuid now: it keeps it
    assert back.new_uuid is None and field.read(uuid).filename == "t.md"


def test_restore_with_a_fresh_uuid_keeps_the_layout_and_refuses_bytes_not_utf8(
    keyword_store: deepfield.Store,
) -> None:
    field = keyword_store.create_field("n")
    uuid = "11111111-2222-4333-8444-555555555555"
    crlf = f"\ufeff---\r\nuuid: {uuid}\r\n---\r\nline one\r\n".encode()
    latin = f"---\nuuid: {uuid}\n---\ncaf\xe9\n".encode("latin-1")
    for name, data in (("c", crlf), ("l", latin)):
        (field.path / f"{name}.md").write_bytes(data)
        field.ensure_synced(embed=False)
        field.archive(name)
    (field.path / "live.md").write_text(f"---\nuuid: {uuid}\n---\nlive\n")  # takes the uuid
    result = field.restore_page("c", as_name="c-copy")
    assert result.new_uuid
    assert (field.path / "c-copy.md").read_bytes() == crlf.replace(
        uuid.encode(), result.new_uuid.encode())
    with pytest.raises(deepfield.InvalidPageError, match="not valid UTF-8"):
        field.restore_page("l", as_name="l-copy")
    assert not (field.path / "l-copy.md").exists()
    assert latin in [p.read_bytes() for p in (field.path / "archive").iterdir()]


@pytest.mark.parametrize("special", ["index", "listing", "index.md"])
def test_restore_refuses_index_and_listing(keyword_store: deepfield.Store,
                                           special: str) -> None:
    field = keyword_store.create_field("n")
    field.add("T", "Text.", name="t")
    field.archive("t")
    with pytest.raises(InvalidNameError, match="not a page name"):
        field.restore("t", as_name=special)
    assert field.archived() == ["t.md"] and not (field.path / "index.md").exists()


# ---------------------------------------------------------------- 9: split pages

BIG = "# Big\n\n" + "\n\n".join(f"## S{i}\n\n" + "lorem ipsum dolor " * 60 for i in range(20))


def test_rm_archives_every_part_and_restore_brings_them_back(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    names = field.add("Big", BIG).filenames
    assert len(names) > 2
    result = field.archive_page(names[1])  # any part: the whole page goes
    assert sorted(result.archived) == sorted(f"archive/{n}" for n in names)
    assert result.archived[0] == f"archive/{names[1]}"
    assert field.pages() == [] and sorted(field.archived()) == sorted(names)
    with pytest.raises(InvalidNameError, match="split"):
        field.restore("big", as_name="other")
    back = field.restore_page("big")
    assert back.restored == names and field.archived() == []
    assert [d.filename for d in field.pages()] == sorted(names)
    field.add("Big", "Now a short page.", name="big-part-2", review=False)
    field.archive("big")
    with pytest.raises(PageConflictError, match=r"big-part-2\.md"):
        field.restore("big")  # a part's name is taken: nothing moves
    assert "big.md" in field.archived()


def test_forget_takes_a_split_page_whole_or_not_at_all(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    names = field.add("Big", BIG).filenames
    report = forget(field, older_than_days=1, now=time.time() + 30 * 86_400)
    assert sorted(report.archived) == sorted(f"archive/{n}" for n in names)
    assert report.not_archived == [] and field.pages() == []
    field.restore("big")
    # A part in use keeps the whole page.
    field.read(names[0])
    report = forget(field, keep_top=1, dry_run=True)  # one page, ranked once: all kept
    assert report.forgotten == [] and report.kept == []


# ---------------------------------------------------------------- 4: supersession


def test_archived_successor_no_longer_hides_the_old_page(kstore: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    field = _field(kstore)
    field.add("Kiwi", "Kiwis are flightless birds from New Zealand.")
    field.add("Penguin", "Penguins cannot fly either.")
    assert run_main(kstore, "supersede", "n", "kiwi", "penguin", capsys=capsys)[0] == 0
    assert run_main(kstore, "search", "kiwis flightless", "--json", capsys=capsys)[1].count(
        "kiwi.md") == 0
    status, out, _err = run_main(kstore, "rm", "n", "penguin", capsys=capsys)
    assert status == 0 and "kiwi.md is no longer marked superseded" in out
    assert "superseded_by" not in (field.path / "kiwi.md").read_text()
    hits = json.loads(run_main(kstore, "search", "kiwis flightless", "--json",
                               capsys=capsys)[1])["results"]
    assert [h["filename"] for h in hits] == ["kiwi.md"]
    # Restoring the successor hides the old page again.
    status, out, _err = run_main(kstore, "restore", "n", "penguin", "--json", capsys=capsys)
    assert json.loads(out)["superseded_again"] == ["kiwi.md"]
    assert "superseded_by: penguin.md" in (field.path / "kiwi.md").read_text()


# ---------------------------------------------------------------- 6: remember


def test_remember_dates_the_page_now_and_keeps_the_session_date(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    text = ("---\ndate: 2024-03-05\n---\nAlice: the kite festival is on Saturday\n"
            "Bob: I will bring the red kite\n")
    result = remember(field, "chat.md", text=text)
    front = Page.parse((field.path / result.filename).read_text()).frontmatter or {}
    assert front["session_date"] == "2024-03-05"
    assert str(front["created"]).startswith(time.strftime("%Y-", time.gmtime()))
    assert str(front["created"]).endswith("Z") and front["updated"] == front["created"]
    assert forget(field, older_than_days=30, dry_run=True).forgotten == []


# ---------------------------------------------------------------- 7: repeated headings


def test_a_repeated_heading_is_read_by_its_line(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    field.write("# Doc\n\n## Notes\n\nfirst\n\n## Other\n\nx\n\n## Notes\n\nsecond\n")
    with pytest.raises(SectionNotFoundError, match="matches 2 sections") as info:
        field.read("doc", section="Notes")
    assert "Notes@" in info.value.hint
    text = (field.path / "doc.md").read_text().split("\n")
    second = max(i for i, line in enumerate(text, start=1) if line == "## Notes")
    first = min(i for i, line in enumerate(text, start=1) if line == "## Notes")
    assert field.read("doc", section=f"Notes@{second}").text == "## Notes\n\nsecond\n"
    assert field.read("doc", section=f"Doc > Notes@{first}").text == "## Notes\n\nfirst\n"
    with pytest.raises(SectionNotFoundError, match=f"on lines {first}, {second}"):
        field.read("doc", section="Notes@2")
