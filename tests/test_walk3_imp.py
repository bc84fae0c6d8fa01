"""Third walk through import, export, the memory tool and ``deepfield add``: defects a
demanding user found, each pinned by a test on a small realistic tree built in tmp_path."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import deepfield
from deepfield.errors import InvalidPageError
from deepfield.importers.claude_code import import_claude_code
from deepfield.importers.export import export_field
from deepfield.importers.markdown_dirs import import_dir
from deepfield.importers.memory_tool import MEMORY_TOOL, import_memory_tool
from deepfield.importers.obsidian import import_obsidian
from deepfield.integrations.memory_files import MemoryFiles
from deepfield.page import Page

from .conftest import Cli
from .test_importers import make_tree


def test_add_with_piped_frontmatter_takes_its_keys_not_a_second_block(
    cli: Cli, tmp_path: Path
) -> None:
    """``printf -- '---\\ntitle: X\\n---\\nBody' | deepfield add f --title T -`` stored the
    block as body text under the page's own frontmatter."""
    cli.json("new", "notes")
    note = "---\ntitle: X\ntags: [wok]\nsummary: Inner\n---\nBody\n"
    added = cli.json("add", "notes", "--title", "T", "-", input=note)
    page = Page.parse((cli.store_path / "notes" / added["pages"][0]["filename"]).read_text())
    assert page.body == "Body\n"
    assert page.frontmatter is not None
    assert page.frontmatter["title"] == "T" and page.frontmatter["tags"] == ["wok"]
    assert page.frontmatter["summary"] == "Inner"
    added = cli.json("add", "notes", "--title", "U", "--summary", "Mine", "-", input=note)
    page = Page.parse((cli.store_path / "notes" / added["pages"][0]["filename"]).read_text())
    assert page.frontmatter is not None and page.frontmatter["summary"] == "Mine"
    with pytest.raises(InvalidPageError, match="deepfield write"):
        cli("add", "notes", "--title", "V", "-", input="---\nuuid: 12\n---\nBody\n")
    with pytest.raises(InvalidPageError, match="cannot be read"):
        cli("add", "notes", "--title", "W", "-", input="---\ntitle: [\n---\nBody\n")
    with pytest.raises(InvalidPageError, match="only a frontmatter block"):
        cli("add", "notes", "--title", "X", "-", input="---\ntags: [a]\n---\n")
    prose = "---\nIntro\n---\nBody\n"  # a rule and a setext heading: Markdown, kept
    added = cli.json("add", "notes", "--title", "Y", "-", input=prose)
    page = Page.parse((cli.store_path / "notes" / added["pages"][0]["filename"]).read_text())
    assert page.body == prose


def test_claude_user_memory_is_user_instructions_and_todo_is_no_import(
    store: deepfield.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing ``~/.claude`` called its CLAUDE.md (the user's memory, loaded in every
    project) ``project-instructions``; ``@TODO`` in prose was recorded as an import."""
    home = make_tree(tmp_path / "claude", {
        "CLAUDE.md": "# Me\n\n- Use British spelling. @TODO tidy this. See @README too.\n",
        "README": "Readme.\n",
        "rules/style.md": "# Style\n\nShort lines.\n"})
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    project = make_tree(tmp_path / "proj", {"CLAUDE.md": "# Proj\n\nSee @TODO.\n"})
    import_claude_code(store, home, field="me")
    import_claude_code(store, project, field="proj")
    mine = Page.parse((store.root / "me" / "claude.md").read_text())
    assert mine.frontmatter is not None
    assert mine.frontmatter["claude_memory"] == "user-instructions"
    assert [i["path"] for i in mine.frontmatter["imports"]] == ["README"]
    theirs = Page.parse((store.root / "proj" / "claude.md").read_text())
    assert theirs.frontmatter is not None
    assert theirs.frontmatter["claude_memory"] == "project-instructions"
    assert "imports" not in theirs.frontmatter


def test_attachments_are_hashed_and_copied_without_reading_them_whole(
    store: deepfield.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attachment was read into memory whole to be hashed and copied, on import and on
    export: a vault with multi-GB videos needed that much memory."""
    video = bytes(range(256)) * 20_000  # 5 MB standing in for a film
    vault = make_tree(tmp_path / "vault", {"Trip.md": "# Trip\n\n![[clip.mp4]]\n"})
    (vault / "media").mkdir()
    (vault / "media" / "clip.mp4").write_bytes(video)
    real = Path.read_bytes

    def read_bytes(path: Path) -> bytes:
        assert path.suffix != ".mp4", f"{path} read whole"
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    report = import_obsidian(store, vault, field="trip")
    assert report.attachments == 1 and not report.skipped
    fld = store.field("trip")
    monkeypatch.setattr(Path, "read_bytes", real)
    assert (fld.path / "clip.mp4").read_bytes() == video
    again = import_obsidian(store, vault, field="trip", into=True)
    assert again.attachments == 0 and not again.skipped
    (vault / "media" / "clip.mp4").write_bytes(video[::-1])
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert import_obsidian(store, vault, field="trip", into=True).attachments == 1
    out = export_field(fld, tmp_path / "out", original_paths=True, plain=True)
    assert out.attachments == 1
    monkeypatch.setattr(Path, "read_bytes", real)
    assert (tmp_path / "out" / "media" / "clip.mp4").read_bytes() == video[::-1]


def test_memory_tool_files_export_back_at_their_memory_paths(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Files the memory tool wrote (no import record) exported as ``prefs-json.md`` with
    their frontmatter even with ``--plain --original-paths``; ``memory_path`` says where."""
    fld = store.create_field("mem")
    memory = MemoryFiles(fld)
    files = {"prefs.json": '{"editor": "vim"}', "projects/a.md": "# A\n\nhello\n"}
    for rel, text in files.items():
        memory.create(rel, text)
    out = export_field(fld, tmp_path / "out", original_paths=True, plain=True)
    assert sorted(out.files) == ["prefs.json", "projects/a.md"]
    for rel, text in files.items():
        assert (tmp_path / "out" / rel).read_text() == text, rel


def test_memory_file_an_older_import_split_is_one_page_after_a_reimport(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A memory-tool field an older deepfield imported split into parts stayed split after
    a re-import ("unchanged"): the memory tool read only part 1 of the model's file, and
    the parts all claimed the same memory_path."""
    notes = "# Notes\n" + "".join(f"## Day {i}\n" + "we met and agreed. " * 40 + "\n"
                                  for i in range(30))
    src = make_tree(tmp_path / "memories", {"notes.md": notes})
    import_dir(store, src, dataclasses.replace(MEMORY_TOOL, split=True), field="mem")
    fld = store.field("mem")
    assert (fld.path / "notes-part-2.md").is_file()
    report = import_memory_tool(store, src, field="mem", into=True)
    assert report.updated == 1 and any("old parts" in w for w in report.warnings)
    assert sorted(p.name for p in fld.path.glob("*.md")) == ["listing.md", "notes.md"]
    assert MemoryFiles(fld).text("notes.md") == notes
    assert import_memory_tool(store, src, field="mem", into=True).unchanged == 1


def test_memory_tool_reads_part_one_of_a_page_still_split(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Every part of a split page claims its memory_path, and the first by filename won:
    ``notes-part-2.md`` sorts before ``notes.md``, so the model read the file's middle."""
    notes = "# Notes\n" + "".join(f"## Day {i}\n" + "we met and agreed. " * 40 + "\n"
                                  for i in range(30))
    src = make_tree(tmp_path / "memories", {"notes.md": notes})
    import_dir(store, src, dataclasses.replace(MEMORY_TOOL, split=True), field="mem")
    memory = MemoryFiles(store.field("mem"))
    assert memory.files()["notes.md"].filename == "notes.md"
    assert memory.text("notes.md").startswith("# Notes\n")


def test_a_numeric_uuid_exports_back_byte_for_byte(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """``uuid: 12345`` (a number) is written as ``uuid: '12345'``; ``export --plain
    --original-paths`` gave that back instead of the note's own line."""
    note = "---\nuuid: 12345\ntags: [a]\n---\nq\n"
    vault = make_tree(tmp_path / "vault", {"IntUuid.md": note})
    import_obsidian(store, vault, field="v")
    export_field(store.field("v"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / "IntUuid.md").read_text() == note
    assert import_obsidian(store, vault, field="v", into=True).unchanged == 1


def test_a_note_ending_in_its_closing_fence_exports_back_byte_for_byte(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A note that is only frontmatter, its file ending in ``---`` with no line break,
    exported back with a line break added."""
    notes = {"Tagged.md": "---\ntags: [x]\n---", "Crlf.md": "---\r\ntags: [y]\r\n---",
             "Body.md": "---\ntags: [z]\n---\nno break"}
    vault = make_tree(tmp_path / "vault", notes)
    import_obsidian(store, vault, field="v")
    export_field(store.field("v"), tmp_path / "out", original_paths=True, plain=True)
    for rel, text in notes.items():
        assert (tmp_path / "out" / rel).read_bytes() == text.encode(), rel


def test_a_home_relative_import_inside_the_imported_folder_is_followed(
    store: deepfield.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``@~/.claude/style.md`` in ``~/.claude/CLAUDE.md`` (the form Claude Code's docs show)
    was never followed when ``~/.claude`` itself was imported: the file is inside it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    home = make_tree(tmp_path / ".claude", {
        "CLAUDE.md": "# Me\n\n- Style: @~/.claude/notes/style.md\n",
        "notes/style.md": "# Style\n\nShort lines.\n"})
    report = import_claude_code(store, home, field="me")
    assert report.created == 2
    mine = Page.parse((store.root / "me" / "claude.md").read_text())
    assert mine.frontmatter is not None
    assert mine.frontmatter["imports"] == [{"path": "~/.claude/notes/style.md",
                                            "page": "style.md"}]
