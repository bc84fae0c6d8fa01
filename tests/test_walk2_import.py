"""Second walk through the importers and ``export``: defects a demanding user found, each
pinned by a test on a small realistic tree built in tmp_path."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest

import deepfield
from deepfield.errors import ExportTargetError, ImportFormatError
from deepfield.fsutil import file_sha256
from deepfield.importers.basic_memory import import_basic_memory, relations
from deepfield.importers.claude_code import import_claude_code
from deepfield.importers.export import export_field
from deepfield.importers.locomo import import_locomo
from deepfield.importers.markdown_dirs import import_dir
from deepfield.importers.memory_tool import import_memory_tool
from deepfield.importers.obsidian import import_obsidian
from deepfield.integrations.memory_files import MemoryFiles
from deepfield.page import Page

from .conftest import MainCli
from .test_importers import make_tree


def test_memory_tool_import_reads_back_through_the_memory_tool(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """The memory tool shows a page's body as the file: an import must not wrap it in a code
    fence or split a long file into parts (the model saw fences, or only one part)."""
    long_notes = "# Notes\n" + "".join(f"## Day {i}\n" + "we met and agreed. " * 40 + "\n"
                                       for i in range(30))
    files = {"notes.md": long_notes, "prefs.json": '{"editor": "vim"}',
             "conf.yaml": "# editor settings\nkey: value\n",
             "plan.md": "---\nstatus: draft\n---\n# Plan\n"}  # its "---" block is text too
    src = make_tree(tmp_path / "memories", files)
    report = import_memory_tool(store, src, field="mem")
    assert report.created == 4 and not report.skipped
    fld = store.field("mem")
    assert sorted(p.name for p in fld.path.glob("*.md") if p.name != "listing.md") == [
        "conf-yaml.md", "notes.md", "plan.md", "prefs-json.md"]
    memory = MemoryFiles(fld)
    for rel, text in files.items():
        assert memory.text(rel) == text, rel
    assert memory.load("conf.yaml")[1].title == "conf.yaml"  # a YAML comment is no heading
    out = export_field(fld, tmp_path / "out", original_paths=True, plain=True)
    assert out.pages == 4
    for rel, text in files.items():
        assert (tmp_path / "out" / rel).read_text() == text, rel


def test_obsidian_note_with_only_a_created_date_exports_back_byte_for_byte(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A note with just ``created: 2024-01-05`` got ``updated`` set to the import time (not
    recorded as added, so ``export --plain`` kept it) and its date quoted for good."""
    plan = ("---\ntags:\n  - project\ncreated: 2024-01-05   # when we started\n---\n"
            "# Plan\n\nShip it.\n")
    log = "---\nupdated: 2024-02-01 10:30:00\n---\nDone.\n"
    src = make_tree(tmp_path / "vault", {"Projects/Plan.md": plan, "Log.md": log})
    os.utime(src / "Projects/Plan.md", (1_700_000_000, 1_700_000_000))
    import_obsidian(store, src, field="vault")
    page = Page.parse((store.field("vault").path / "plan.md").read_text())
    assert page.get("created") == "2024-01-05"  # the spec's quoted string in the field
    assert page.get("updated") == "2023-11-14T22:13:20Z"  # the file's mtime, not the import's
    logged = Page.parse((store.field("vault").path / "log.md").read_text())
    assert logged.get("created") == logged.get("updated") == "2024-02-01T10:30:00Z"
    again = import_obsidian(store, src, field="vault")
    assert again.unchanged == 2 and again.updated == 0
    export_field(store.field("vault"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / "Projects/Plan.md").read_text() == plan
    assert (tmp_path / "out" / "Log.md").read_text() == log


def test_basic_memory_relation_to_a_permalink_with_a_folder_is_resolved(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """basic-memory permalinks carry their folder; a relation naming one had no ``page``."""
    brewing = ("---\ntitle: Coffee Brewing\ntype: note\npermalink: coffee/coffee-brewing\n---\n"
               "# Coffee Brewing\n- uses [[gear/burr-grinder]]\n")
    grinder = "---\ntitle: Grinder\ntype: note\npermalink: gear/burr-grinder\n---\nBurr.\n"
    src = make_tree(tmp_path / "bm", {"coffee/Coffee Brewing.md": brewing,
                                      "gear/Grinder.md": grinder})
    import_basic_memory(store, src, field="bm")
    page = Page.parse((store.field("bm").path / "coffee-brewing.md").read_text())
    assert page.get("relations") == [
        {"type": "uses", "target": "gear/burr-grinder", "page": "grinder.md"}]
    assert relations("- uses [[Grinder\\|the grinder]]\n") == [  # a pipe escaped as in tables
        {"type": "uses", "target": "Grinder"}]


def test_obsidian_wikilink_with_an_escaped_pipe_in_a_table_is_rewritten(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Obsidian writes ``[[Note\\|text]]`` inside tables (a bare ``|`` would end the cell);
    the link was left unresolved, its target read as ``Note\\``."""
    table = "| who | page |\n|---|---|\n| Ann | [[People/Ann Lee\\|Ann]] |\n"
    src = make_tree(tmp_path / "vault", {"Team.md": table, "People/Ann Lee.md": "# Ann\n"})
    report = import_obsidian(store, src, field="vault")
    assert not [w for w in report.warnings if "not in the import" in w]
    body = Page.parse((store.field("vault").path / "team.md").read_text()).body
    assert body == "| who | page |\n|---|---|\n| Ann | [Ann](ann-lee.md) |\n"
    export_field(store.field("vault"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / "Team.md").read_text() == table


def test_reimport_reports_pages_whose_source_note_is_gone(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A note renamed or deleted in the vault left its old page behind without a word, so a
    renamed note silently became two pages."""
    src = make_tree(tmp_path / "vault", {"One.md": "# One\n", "Two.md": "# Two\n",
                                         "old.png": b"\x89PNG"})
    import_obsidian(store, src, field="vault")
    assert import_obsidian(store, src, field="vault").gone == []
    (src / "old.png").unlink()
    assert import_obsidian(store, src, field="vault").gone == [
        {"source_path": "old.png", "filename": "old.png"}]
    (src / "Two.md").rename(src / "Deux.md")
    old = {"source_path": "old.png", "filename": "old.png"}
    report = import_obsidian(store, src, field="vault", dry_run=True)
    assert report.gone == [{"source_path": "Two.md", "filename": "two.md"}, old]
    report = import_obsidian(store, src, field="vault")
    assert report.created == 1 and report.unchanged == 1
    assert report.to_json()["gone"] == [{"source_path": "Two.md", "filename": "two.md"}, old]
    assert any("Two.md: no longer in the source" in w and "deepfield rm vault two" in w
               for w in report.warnings)
    assert (store.field("vault").path / "two.md").is_file()  # kept: deepfield deletes nothing
    assert "old.png: no longer in the source (or no longer imported from it); its copy " \
        "old.png is kept" in report.warnings
    store.field("vault").archive("two")
    assert import_obsidian(store, src, field="vault").gone == [old]


def _locomo_file(path: Path, words: str, turns: int) -> Path:
    said = [{"speaker": "Ann" if i % 2 else "Bo", "dia_id": f"D1:{i}",
             "text": f"turn {i}: {words} " * 6} for i in range(1, turns + 1)]
    conversation = {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": said,
                    "session_1_date_time": "1:56 pm on 8 May, 2023"}
    path.write_text(json.dumps([{"sample_id": "c1", "conversation": conversation}]))
    return path


def test_locomo_reimport_of_a_long_or_changed_session_is_no_edit(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A session over 8 KB is split; importing the same file again warned that the page "was
    edited since it was imported" (and counted it unchanged), and a corrected dataset never
    reached pages nobody had touched."""
    source = _locomo_file(tmp_path / "c.json", "we walked the dog by the river", 80)
    first = import_locomo(store, source)
    assert first.pages_written > 1  # split into parts
    again = import_locomo(store, source)
    assert again.warnings == [] and again.pages_kept == 0
    assert again.pages_written == 0 and again.pages_unchanged == first.pages_written
    _locomo_file(source, "we walked the cat by the lake", 80)
    fixed = import_locomo(store, source)
    assert fixed.warnings == [] and fixed.pages_written >= 1
    field = store.field("c1")
    assert "the cat by the lake" in (field.path / "session-01.md").read_text()
    part = field.path / "session-01-part-2.md"
    part.write_text(part.read_text() + "\nMY NOTE\n")
    _locomo_file(source, "we fed the fish", 80)
    kept = import_locomo(store, source)
    assert kept.pages_kept == 1 and kept.to_json()["pages_kept"] == 1
    assert any("session-01.md was edited" in w for w in kept.warnings)
    assert part.read_text().endswith("MY NOTE\n")


def test_crlf_note_with_a_byte_order_mark_exports_back_byte_for_byte(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Pages are stored with ``\\n`` and no BOM; ``export --plain --original-paths`` promised
    an unedited import its very bytes back, but a Windows note came back with ``\\n``."""
    windows = "\ufeff---\r\ntags: [win]\r\n---\r\n# Win\r\n\r\nSee [[Other]].\r\n".encode()
    other = b"# Other\r\nplain\r\n"
    src = tmp_path / "vault"
    src.mkdir()
    (src / "Win.md").write_bytes(windows)
    (src / "Other.md").write_bytes(other)
    import_obsidian(store, src, field="vault")
    assert b"\r" not in (store.field("vault").path / "win.md").read_bytes()
    export_field(store.field("vault"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / "Win.md").read_bytes() == windows
    assert (tmp_path / "out" / "Other.md").read_bytes() == other
    edited = store.field("vault").path / "other.md"  # edited since: the field's own text
    edited.write_text(edited.read_text() + "more\n")
    export_field(store.field("vault"), tmp_path / "out2", original_paths=True, plain=True)
    assert (tmp_path / "out2" / "Other.md").read_bytes() == b"# Other\nplain\nmore\n"


def test_importing_a_page_the_field_already_has_does_not_claim_it_was_edited(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Importing an export of a field back into it skipped each page "edited in the field
    since the last import", though no import had made it."""
    fld = store.create_field("notes")
    fld.write("# One\n\nbody one\n")
    export_field(fld, tmp_path / "copy")
    report = import_dir(store, tmp_path / "copy", field="notes", into=True)
    assert report.created == 0 and len(report.skipped) == 1
    reason = report.skipped[0]["reason"]
    assert "has its uuid and was not imported from here" in reason and "since" not in reason


def test_export_force_refuses_a_clash_before_writing_anything(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """``--force`` into a folder holding a folder where a page goes failed halfway, leaving
    part of the export written."""
    src = make_tree(tmp_path / "vault", {"A.md": "# A\n", "B.md": "# B\n", "Sub/C.md": "# C\n"})
    import_obsidian(store, src, field="vault")
    target = tmp_path / "out"
    (target / "B.md").mkdir(parents=True)
    with pytest.raises(ExportTargetError, match="is a folder"):
        export_field(store.field("vault"), target, original_paths=True, force=True)
    assert sorted(p.name for p in target.iterdir()) == ["B.md"]
    (target / "B.md").rmdir()
    (target / "Sub").write_text("a file")
    with pytest.raises(ExportTargetError, match="is a file"):
        export_field(store.field("vault"), target, original_paths=True, force=True)
    assert sorted(p.name for p in target.iterdir()) == ["Sub"]


def test_a_file_that_cannot_be_read_is_skipped_not_the_whole_import(
    store: deepfield.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One note or attachment without read permission stopped the whole import with an
    error, though unreadable files are documented as skipped with a reason."""
    src = make_tree(tmp_path / "vault", {"A.md": "# A\n![[pic.png]]\n", "B.md": "# B\n",
                                         "pic.png": b"\x89PNG", "doc.pdf": b"%PDF"})
    read = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self.name in ("B.md", "doc.pdf"):
            raise PermissionError(13, "Permission denied", str(self))
        return read(self)

    def refuse_hash(path: Path) -> str:  # attachments are read a chunk at a time
        if path.name == "doc.pdf":
            raise PermissionError(13, "Permission denied", str(path))
        return file_sha256(path)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    monkeypatch.setattr("deepfield.importers.attach.file_sha256", refuse_hash)
    report = import_obsidian(store, src, field="vault")
    assert report.created == 1 and report.attachments == 1
    assert sorted((s["path"], s["reason"]) for s in report.skipped) == [
        ("B.md", "cannot be read (Permission denied)"),
        ("doc.pdf", "cannot be read (Permission denied)")]


def test_every_note_skipped_while_writing_is_in_the_pages_list(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """``pages`` lists each note with its action, skipped ones too; a note skipped for
    sharing another's uuid was counted in ``skipped`` but missing from ``pages``."""
    shared = "---\nuuid: 11111111-1111-4111-8111-111111111111\n---\n"
    src = make_tree(tmp_path / "notes", {"a.md": shared + "A\n", "b.md": shared + "B\n"})
    report = import_dir(store, src, field="notes").to_json()
    assert [(p["source_path"], p["action"]) for p in report["pages"]] == [
        ("a.md", "created"), ("b.md", "skipped")]
    assert [s["path"] for s in report["skipped"]] == ["b.md"]


def test_reimporting_a_moved_vault_finds_its_pages_again(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Page uuids are derived from the source folder's path, so a vault moved (or synced to
    another machine) and imported again with --into became a second copy of every note
    (``a-2.md``) and attachment."""
    vault = make_tree(tmp_path / "Vault", {"A.md": "# A\n", "B.md": "# B\n[[A]] ![[p.png]]\n",
                                           "p.png": b"\x89PNG"})
    import_obsidian(store, vault, field="vault")
    moved = vault.rename(tmp_path / "Documents-Vault")
    report = import_obsidian(store, moved, field="vault", into=True)
    assert report.created == 0 and report.unchanged == 2 and report.renamed == []
    assert report.attachments == 0 and report.gone == []
    assert not (store.field("vault").path / "archive").exists()
    assert report.warnings == [f"2 note(s) taken for the pages imported from {vault}, which is "
                               "gone (moved here?)"]
    (moved / "A.md").write_text("# A\nchanged\n")
    again = import_obsidian(store, moved, field="vault")  # now this folder's own import
    assert again.updated == 1 and again.created == 0
    other = make_tree(tmp_path / "Other", {"A.md": "# Another A\n"})
    moved.rename(tmp_path / "deleted")  # a folder taken for a vanished one: keep what it had
    taken = import_obsidian(store, other, field="vault", into=True)
    assert taken.updated == 1
    kept = list((store.field("vault").path / "archive").glob("a*.md"))
    assert len(kept) == 1 and "changed" in kept[0].read_text()
    names = sorted(p.name for p in store.field("vault").path.iterdir()
                   if not p.name.startswith(".") and p.suffix in (".md", ".png"))
    assert names == ["a.md", "b.md", "listing.md", "p.png"]


def test_a_wrong_source_or_a_dry_run_creates_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--store typo import obsidian /missing`` left a new store behind before failing, and
    ``--dry-run`` ("write nothing") created the store it reported on."""
    vault = make_tree(tmp_path / "vault", {"A.md": "# A\n"})
    store_path = tmp_path / "new-store"
    cli = MainCli(store_path, capsys, monkeypatch)
    failed = cli("import", "obsidian", str(tmp_path / "missing"))
    assert failed.exit_code == 1 and "no folder at" in failed.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1}')
    assert cli("import", "locomo", str(bad)).exit_code == 1
    dry = cli("import", "obsidian", str(vault), "--dry-run", "--json")
    report = json.loads(dry.stdout)
    assert report["created"] == 1 and report["field_created"] is True and report["dry_run"]
    assert not store_path.exists()


def test_locomo_conversation_without_sessions_is_reported_not_an_empty_field(
    store: deepfield.Store, tmp_path: Path
) -> None:
    source = tmp_path / "c.json"
    source.write_text(json.dumps([{"sample_id": "empty", "conversation": {"speaker_a": "A"}}]))
    report = import_locomo(store, source)
    assert report.fields == [] and "empty" not in store.field_names()
    assert report.warnings == ["empty: no sessions (session_1, session_2, …), nothing imported"]


def test_a_utf16_note_is_named_as_such_not_binary(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A note saved as "Unicode" by Windows tools (UTF-16 with a byte order mark) was skipped
    as a "binary file (contains NUL bytes)"; the reason now says what to do."""
    src = make_tree(tmp_path / "vault", {"A.md": "# A\n",
                                         "Win.md": "\ufeff# Win\r\n".encode("utf-16-le")})
    report = import_obsidian(store, src, field="vault")
    assert report.skipped == [{"path": "Win.md", "reason": "UTF-16 text; re-save it as UTF-8"}]


def test_importing_the_store_folder_itself_is_refused(tmp_path: Path) -> None:
    """``--store vault import obsidian vault`` copied the store's deepfield.toml into the new
    field as an attachment (the field then looked like a store of its own)."""
    vault = make_tree(tmp_path / "vault", {"A.md": "# A\n"})
    store = deepfield.init(vault)
    with pytest.raises(ImportFormatError, match="is the store itself"):
        import_obsidian(store, vault, field="notes")
    assert "notes" not in store.field_names()


def test_a_deepfield_toml_in_the_source_is_not_copied_into_the_field(
    store: deepfield.Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "copy", {"A.md": "# A\n", "deepfield.toml": "[embedding]\n"})
    report = import_obsidian(store, src, field="notes")
    assert report.attachments == 0
    assert report.skipped == [{"path": "deepfield.toml",
                               "reason": "a deepfield store's settings, not a note"}]
    assert not (store.field("notes").path / "deepfield.toml").exists()


def test_plain_export_copies_a_page_that_is_not_utf8_as_it_is(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A page put in the field by hand in Latin-1 came out of ``export --plain`` with each
    accented letter replaced by U+FFFD, without a word."""
    fld = store.create_field("notes")
    latin = b"---\ntitle: Latin\n---\ncaf\xe9 au lait\n"
    (fld.path / "latin.md").write_bytes(latin)
    report = export_field(fld, tmp_path / "out", plain=True, original_paths=True)
    assert (tmp_path / "out" / "latin.md").read_bytes() == latin
    assert report.warnings == ["latin.md: not UTF-8, exported as it is (links and keys "
                               "unchanged)"]


def test_api_paths_with_a_tilde_mean_the_home_folder(
    store: deepfield.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/API.md shows ``import_obsidian(store, "~/Vault", ...)``: from Python no shell
    expands ``~``, so it failed ("no folder at ~/Vault"), and an export to ``~/copy`` made a
    folder named ``~`` in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path / "Vault", {"A.md": "# A\n"})
    assert import_obsidian(store, "~/Vault", field="vault").created == 1
    export_field(store.field("vault"), "~/copy")
    assert (tmp_path / "copy" / "a.md").is_file() and not (tmp_path / "~").exists()


def test_claude_md_that_is_a_link_to_agents_md_is_imported(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """``CLAUDE.md -> AGENTS.md`` is a common layout (Claude Code reads through the link);
    the import refused the project as having "no Claude Code memory"."""
    project = make_tree(tmp_path / "proj", {"AGENTS.md": "# Agents\nUse pnpm.\n"})
    (project / "CLAUDE.md").symlink_to("AGENTS.md")
    report = import_claude_code(store, project)
    assert report.created == 1 and report.skipped == []
    page = Page.parse((store.field("proj").path / "claude.md").read_text())
    assert page.body == "# Agents\nUse pnpm.\n" and page.get("source_path") == "CLAUDE.md"
    elsewhere = make_tree(tmp_path / "other", {"x.md": "x\n"})
    (elsewhere / "CLAUDE.md").symlink_to(project / "AGENTS.md")  # outside: not followed
    with pytest.raises(ImportFormatError, match=r"CLAUDE\.md: a link to a file outside it"):
        import_claude_code(store, elsewhere)


def test_importing_a_fields_folder_takes_its_pages_only(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Importing a copy of a field's folder copied its index database in as an attachment
    (``bm25-only.sqlite3``, beside the new field's own) and its generated ``listing.md`` and
    ``archive/`` old versions in as notes."""
    fld = store.create_field("old")
    fld.write("# Woks\n\nCarbon steel.\n", name="woks")
    fld.write("# Woks\n\nCarbon steel heats fast.\n", name="woks")  # an archived version
    assert (fld.path / "archive").is_dir() and (fld.path / "listing.md").is_file()
    index_files = [p.name for p in fld.path.iterdir() if p.name.endswith(".sqlite3")]
    report = import_obsidian(store, fld.path, field="copy")
    assert [p["source_path"] for p in report.pages] == ["woks.md"] and report.attachments == 0
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert reasons["archive/"] == "a deepfield field's own folder, not notes"
    assert reasons["listing.md"] == "a deepfield field's generated catalogue"
    for name in index_files:
        assert reasons[name] == "a deepfield index, rebuilt from the pages"


def test_a_damaged_imports_json_is_read_as_far_as_it_goes(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """A hand-edited ``.deepfield/imports.json`` with a list where a mapping belongs crashed
    every import and export of the field with a TypeError traceback."""
    src = make_tree(tmp_path / "vault", {"A.md": "# A\n"})
    import_obsidian(store, src, field="vault")
    record = store.field("vault").path / ".deepfield" / "imports.json"
    record.write_text('{"version": 1, "sources": [1, 2], "pages": [1], "attachments": "x"}')
    report = import_obsidian(store, src, field="vault", into=True)
    assert report.created == 0 and len(report.skipped) == 1  # its page: not known as ours
    export_field(store.field("vault"), tmp_path / "out", original_paths=True, plain=True)
    record.write_text('{"pages": {"u": {"kind": "obsidian", "root": "/r", "source_path": "a",'
                      ' "digest": "d", "added_keys": "x", "had_frontmatter": true, "files": 3}}}')
    assert import_obsidian(store, src, field="vault", into=True).created == 0
    export_field(store.field("vault"), tmp_path / "out2", original_paths=True, plain=True)


def test_links_find_a_note_whose_file_name_is_decomposed_unicode(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Files from a Mac often spell "é" as "e" + combining accent (NFD) while the links typed
    in them use "é" (NFC): ``[[Café]]`` and ``[x](Café.md)`` were reported as links to notes
    not in the import."""
    nfd = unicodedata.normalize("NFD", "Café.md")
    src = make_tree(tmp_path / "vault", {nfd: "# Café\n",
                                         "Menu.md": "See [[Café]] and [menu](Café.md).\n"})
    report = import_obsidian(store, src, field="vault")
    assert not [w for w in report.warnings if "not in the import" in w]
    body = Page.parse((store.field("vault").path / "menu.md").read_text()).body
    assert body == "See [Café](cafe.md) and [menu](cafe.md).\n"


def test_html_image_sources_follow_their_attachment(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """Notes size images with HTML (``<img src="attachments/x.png" width="300">``); the
    attachment moved to the field root but the ``src`` kept pointing at the old folder."""
    note = ('# Trip\n<img src="attachments/map one.png" width="300">\n'
            "<a href='Notes/Day.md'>day one</a>\n")
    src = make_tree(tmp_path / "vault", {"Trip.md": note, "Notes/Day.md": "# Day\n",
                                         "attachments/map one.png": b"\x89PNG"})
    import_obsidian(store, src, field="vault")
    body = Page.parse((store.field("vault").path / "trip.md").read_text()).body
    assert body == ('# Trip\n<img src="map-one.png" width="300">\n'
                    "<a href='day.md'>day one</a>\n")
    export_field(store.field("vault"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / "Trip.md").read_text() == note


def test_a_pdf_page_link_keeps_its_fragment(store: deepfield.Store, tmp_path: Path) -> None:
    """``[[paper.pdf#page=3]]`` became ``paper.pdf#page3`` (made a heading anchor), which no
    PDF viewer opens at page 3."""
    src = make_tree(tmp_path / "vault", {"Read.md": "See [[paper.pdf#page=3]].\n",
                                         "paper.pdf": b"%PDF"})
    import_obsidian(store, src, field="vault")
    body = Page.parse((store.field("vault").path / "read.md").read_text()).body
    assert body == "See [paper.pdf](paper.pdf#page=3).\n"


def test_an_imported_sqlite_attachment_is_exported(store: deepfield.Store, tmp_path: Path) -> None:
    """A vault's ``data.sqlite3`` was copied into the field but left out of every export,
    silently, taken for one of the field's index files."""
    src = make_tree(tmp_path / "vault", {"A.md": "# A\n[db](data.sqlite3)\n",
                                         "data.sqlite3": b"SQLite format 3\x00"})
    import_obsidian(store, src, field="vault")
    report = export_field(store.field("vault"), tmp_path / "out", original_paths=True)
    assert (tmp_path / "out" / "data.sqlite3").read_bytes() == b"SQLite format 3\x00"
    assert report.attachments == 1
    assert not [f for f in report.files if f.endswith(".sqlite3") and f != "data.sqlite3"]
