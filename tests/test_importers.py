"""Importing folders of notes (Obsidian, Claude Code, memory tool, basic-memory, Markdown) and
exporting a field back to a folder, on small realistic trees built in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import deepfield
from deepfield.errors import ExportTargetError, FieldExistsError, ImportFormatError
from deepfield.importers.basic_memory import import_basic_memory
from deepfield.importers.claude_code import at_imports, import_claude_code
from deepfield.importers.export import export_field
from deepfield.importers.links import heading_anchor
from deepfield.importers.markdown_dirs import import_dir
from deepfield.importers.memory_tool import import_memory_tool
from deepfield.importers.obsidian import import_obsidian
from deepfield.page import Page

from .conftest import Cli, run_deepfield


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


WELCOME = """---
tags: [start, home]   # kept as written
aliases:
  - Home Page
---
# Welcome

See [[Project Alpha]], [[Project Alpha#Next Steps|the plan]] and [[Home Page]].
Also [[Missing Note]], ![[diagram.png|300]] and [[#Intro]].
Code stays: `[[Not A Link]]`.

```
[[Also Not A Link]]
```
"""

VAULT = {
    ".obsidian/app.json": "{}",
    ".trash/Old.md": "deleted note\n",
    "Welcome.md": WELCOME,
    "Projects/Project Alpha.md":
        "Alpha.\n\n## Next Steps\nBack to [[Welcome]], or [w](../Welcome.md).\n",
    "Projects/Ideas.md": "---\ntitle: Idea Board\n---\nSome ideas.\n",
    "Archive/Ideas.md": "Old ideas.\n",
    "attachments/diagram.png": b"\x89PNG\r\n\x1a\n-fake-",
    "Legacy.md": b"caf\xe9 latin-1 text\n",
    "Empty.md": "",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "My Vault", VAULT)


def test_obsidian_vault(store: deepfield.Store, vault: Path) -> None:
    report = import_obsidian(store, vault)
    assert report.field == "my-vault" and report.created == 4 and report.attachments == 1
    folder = store.field("my-vault").path
    pages = sorted(p.name for p in folder.glob("*.md"))
    assert pages == ["archive-ideas.md", "listing.md", "project-alpha.md", "projects-ideas.md",
                     "welcome.md"]
    assert (folder / "diagram.png").read_bytes() == VAULT["attachments/diagram.png"]
    text = (folder / "welcome.md").read_text()
    assert "tags: [start, home]   # kept as written\naliases:\n  - Home Page\n" in text
    assert "source_path: Welcome.md\nimported_from: obsidian\n" in text
    page = Page.parse(text)
    assert page.title == "Welcome" and page.uuid
    assert "[Project Alpha](project-alpha.md)" in page.body
    assert "[the plan](project-alpha.md#next-steps)" in page.body
    assert "[Home Page](welcome.md)" in page.body  # resolved through the alias
    assert "![diagram.png](diagram.png)" in page.body and "[Intro](#intro)" in page.body
    assert "[[Missing Note]]" in page.body  # unresolved: kept as written
    assert "`[[Not A Link]]`" in page.body and "\n[[Also Not A Link]]\n" in page.body
    alpha = (folder / "project-alpha.md").read_text()
    assert "[Welcome](welcome.md)" in alpha and "[w](welcome.md)" in alpha
    assert Page.parse((folder / "projects-ideas.md").read_text()).title == "Idea Board"
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert "not UTF-8" in reasons["Legacy.md"] and reasons["Empty.md"] == "empty file"
    assert not any(".trash" in s["path"] or ".obsidian" in s["path"] for s in report.skipped)
    assert any("Missing Note" in w for w in report.warnings)


def test_reimport_is_idempotent_and_updates(store: deepfield.Store, vault: Path) -> None:
    dry = import_obsidian(store, vault, dry_run=True)
    assert dry.created == 4 and dry.attachments == 1 and "my-vault" not in store.field_names()
    import_obsidian(store, vault)
    folder = store.field("my-vault").path
    before = {p.name: p.read_bytes() for p in folder.glob("*.md")}
    again = import_obsidian(store, vault)  # same command again: no --into needed
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)
    assert {p.name: p.read_bytes() for p in folder.glob("*.md")} == before
    (vault / "Projects" / "Ideas.md").write_text("---\ntitle: Idea Board\n---\nNew ideas.\n")
    before_dry = {p.name: p.read_bytes() for p in folder.glob("*.md")}
    assert import_obsidian(store, vault, dry_run=True).updated == 1
    assert {p.name: p.read_bytes() for p in folder.glob("*.md")} == before_dry
    third = import_obsidian(store, vault)
    assert (third.created, third.updated, third.unchanged) == (0, 1, 3)
    assert "New ideas." in (folder / "projects-ideas.md").read_text()
    assert len(list(folder.glob("*.md"))) == len(before)


def test_page_edited_in_the_field_is_never_clobbered(store: deepfield.Store,
                                                      vault: Path) -> None:
    import_obsidian(store, vault)
    folder = store.field("my-vault").path
    edited = (folder / "project-alpha.md").read_text() + "\nMy own addition.\n"
    (folder / "project-alpha.md").write_text(edited)
    assert import_obsidian(store, vault).unchanged == 4  # source unchanged: edit kept
    (vault / "Projects" / "Project Alpha.md").write_text("Alpha, revised.\n")
    report = import_obsidian(store, vault)
    assert report.updated == 0 and "edited in the field" in report.skipped[-1]["reason"]
    assert (folder / "project-alpha.md").read_text() == edited
    forced = import_obsidian(store, vault, overwrite=True)
    assert forced.updated == 1
    assert "Alpha, revised." in (folder / "project-alpha.md").read_text()
    kept = list((folder / "archive").glob("project-alpha--edited-*.md"))
    assert len(kept) == 1 and kept[0].read_text() == edited
    store.field("my-vault").archive("welcome")  # removed by the user: not brought back
    assert "removed from the field" in import_obsidian(store, vault).skipped[-1]["reason"]
    assert not (folder / "welcome.md").exists()
    assert import_obsidian(store, vault, overwrite=True).created == 1


def test_existing_field_needs_into_and_user_pages_survive(store: deepfield.Store,
                                                          vault: Path) -> None:
    fld = store.create_field("notes")
    fld.add("Welcome", "My own welcome page.", name="welcome")
    mine = (fld.path / "welcome.md").read_bytes()
    with pytest.raises(FieldExistsError, match="--into"):
        import_obsidian(store, vault, field="notes")
    report = import_obsidian(store, vault, field="notes", into=True)
    assert (fld.path / "welcome.md").read_bytes() == mine
    assert {"path": "Welcome.md", "filename": "welcome-2.md",
            "reason": "the name is already used in the field"} in report.renamed
    alpha = (fld.path / "project-alpha.md").read_text()
    assert "[Welcome](welcome-2.md)" in alpha  # links follow the renamed page


def test_collisions_are_deterministic(store: deepfield.Store, tmp_path: Path) -> None:
    tree = {"a/Note.md": "one\n", "b/note.md": "two\n", "a-note.md": "three\n",
            "c/Ünïcode Nöte.md": "four\n", "d/日本語.md": "five\n", "index.md": "six\n"}
    src = make_tree(tmp_path / "src", tree)
    first = import_dir(store, src, field="one")
    second = import_dir(store, src, field="two")
    names = sorted((p["source_path"], p["filename"]) for p in first.pages)
    assert names == sorted((p["source_path"], p["filename"]) for p in second.pages)
    got = dict(names)
    assert got["a/Note.md"] == "a-note-2.md" and got["a-note.md"] == "a-note.md"
    assert got["b/note.md"] == "b-note.md" and got["c/Ünïcode Nöte.md"] == "unicode-note.md"
    assert got["d/日本語.md"].startswith("note-") and got["index.md"] == "index-page.md"
    assert len({p.name for p in store.field("one").path.glob("*.md")}) == 7  # + listing.md
    path_mode = import_dir(store, src, field="three", names="path")
    assert {p["filename"] for p in path_mode.pages} >= {"a-note-2.md", "b-note.md",
                                                          "c-unicode-note.md"}


def test_bad_sources(store: deepfield.Store, tmp_path: Path, vault: Path) -> None:
    with pytest.raises(ImportFormatError, match="no folder at"):
        import_dir(store, tmp_path / "missing")
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(ImportFormatError, match="is a file"):
        import_dir(store, tmp_path / "file.md")
    with pytest.raises(ImportFormatError, match=r"Legacy\.md: not UTF-8"):
        import_obsidian(store, vault, strict=True)
    assert "my-vault" not in store.field_names()  # refused before anything was written


def test_claude_code_project_and_auto_memory(store: deepfield.Store, tmp_path: Path) -> None:
    project = make_tree(tmp_path / "proj", {
        "CLAUDE.md": "# Project\n\nSee @docs/git-workflow.md and @~/.claude/mine.md.\n"
                     "Mail me at a@b.com. `@not/this.md`\n",
        "CLAUDE.local.md": "My sandbox URLs.\n",
        ".claude/rules/style.md": "Use 4 spaces.\n",
        "docs/git-workflow.md": "Rebase, then @../notes/deep.md\n",
        "notes/deep.md": "Deep notes.\n",
        "README.md": "Not memory.\n",
        "memory/deepfield.toml": "[embedding]\n",  # a store inside the project: left out
        "memory/notes/CLAUDE.md": "Not this one.\n",
        "src/app/CLAUDE.md": "App rules.\n",
    })
    report = import_claude_code(store, project, field="proj")
    assert sorted(p["source_path"] for p in report.pages) == [
        ".claude/rules/style.md", "CLAUDE.local.md", "CLAUDE.md", "docs/git-workflow.md",
        "notes/deep.md", "src/app/CLAUDE.md"]
    folder = store.field("proj").path
    names = {p["source_path"]: p["filename"] for p in report.pages}
    main = Page.parse((folder / names["CLAUDE.md"]).read_text())
    assert main.get("claude_memory") == "project-instructions"
    assert main.get("imports") == [{"path": "docs/git-workflow.md",
                                    "page": names["docs/git-workflow.md"]},
                                   {"path": "~/.claude/mine.md"}]
    assert "See @docs/git-workflow.md" in main.body  # recorded, not inlined
    roles = {rel: Page.parse((folder / n).read_text()).get("claude_memory")
             for rel, n in names.items()}
    assert roles["CLAUDE.local.md"] == "local-instructions"
    assert roles[".claude/rules/style.md"] == "rule"
    assert roles["src/app/CLAUDE.md"] == "folder-instructions"
    memory = make_tree(tmp_path / "memory", {
        "MEMORY.md": "# Memory\n\n- [debugging](debugging.md): flaky tests\n",
        "debugging.md": "# Debugging\n\nThe tests are flaky on CI.\n",
    })
    auto = import_claude_code(store, memory, field="auto")
    index = Page.parse((store.field("auto").path / "memory.md").read_text())
    assert index.get("claude_memory") == "index" and "first 200 lines" in (index.summary or "")
    assert auto.created == 2 and "[debugging](debugging.md)" in index.body
    with pytest.raises(ImportFormatError, match="no Claude Code memory"):
        import_claude_code(store, make_tree(tmp_path / "empty", {"x.md": "x\n"}))
    assert at_imports("@a.md, @b/c.md and `@d.md`\n```\n@e.md\n```\n") == ["a.md", "b/c.md"]


MEMORIES: dict[str, str | bytes] = {
    "notes/project.md": "# Project\n\nWe ship Friday.\n",
    "preferences.xml": "<prefs>\n  <editor>vim</editor>\n</prefs>\n",
    "state.json": '{"step": 3, "code": "```"}\n',
    "todo.txt": "---\nnot frontmatter: really\n---\n- buy milk\n",
    "blob.bin": b"\x00\x01\x02",
}


def test_memory_tool_round_trip(store: deepfield.Store, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "memories", MEMORIES)
    report = import_memory_tool(store, src, field="mem")
    assert report.created == 4 and report.skipped[0]["path"] == "blob.bin"
    folder = store.field("mem").path
    xml = Page.parse((folder / "preferences-xml.md").read_text())
    assert xml.get("memory_path") == "/memories/preferences.xml"
    assert xml.body == MEMORIES["preferences.xml"] and xml.title == "preferences.xml"
    state = Page.parse((folder / "state-json.md").read_text())
    assert state.body == MEMORIES["state.json"]  # the file's text, as the memory tool keeps it
    todo = Page.parse((folder / "todo-txt.md").read_text())
    assert todo.body == MEMORIES["todo.txt"]
    out = export_field(store.field("mem"), tmp_path / "out", original_paths=True, plain=True)
    assert out.pages == 4
    for rel, content in MEMORIES.items():
        if isinstance(content, str):
            assert (tmp_path / "out" / rel).read_text() == content, rel


def test_basic_memory(store: deepfield.Store, tmp_path: Path) -> None:
    coffee = ("---\ntitle: Coffee Brewing Methods\ntype: note\npermalink: coffee-brewing\n"
              "tags:\n- coffee\n---\n\n# Coffee Brewing Methods\n\n## Observations\n"
              "- [method] Pour over gives clarity #brewing\n- [tip] Grind fresh (always)\n\n"
              "## Relations\n- relates_to [[Coffee Bean Origins]]\n"
              "- requires [[grinder-setup]]\n- inspired_by [[Nowhere]]\n")
    src = make_tree(tmp_path / "bm", {
        "coffee/Coffee Brewing Methods.md": coffee,
        "coffee/origins.md": "---\ntitle: Coffee Bean Origins\n---\nEthiopia.\n",
        "gear/Grinder.md": "---\ntitle: Grinder\npermalink: grinder-setup\n---\nBurrs.\n",
        ".basic-memory/config.json": "{}",
    })
    report = import_basic_memory(store, src, field="bm")
    assert report.created == 3
    page = Page.parse((store.field("bm").path / "coffee-brewing-methods.md").read_text())
    assert page.get("relations") == [
        {"type": "relates_to", "target": "Coffee Bean Origins", "page": "origins.md"},
        {"type": "requires", "target": "grinder-setup", "page": "grinder.md"},
        {"type": "inspired_by", "target": "Nowhere"},
    ]
    assert page.body == coffee.split("---\n", 2)[2]  # observations and relations untouched
    for key, value in (("type", "note"), ("permalink", "coffee-brewing"), ("tags", ["coffee"])):
        assert page.get(key) == value


def test_markdown_export_round_trip(store: deepfield.Store, tmp_path: Path) -> None:
    files = {
        "README.md": "# Read me\n\nStart at [the guide](guides/Getting Started.md#setup).\n",
        "guides/Getting Started.md": "---\nowner: ops  # team\n---\n## Setup\nRun it.\n"
                                     "Back: [home](../README.md)\n",
        "guides/deep/Tips & Tricks.md": "Plain text, no frontmatter.\n",
        "Broken.md": "---\ntitle: [unclosed\n---\nBody kept.\n",
        "img/logo.svg": "<svg/>\n",
    }
    src = make_tree(tmp_path / "docs", files)
    report = import_dir(store, src, field="docs", attachments=True)
    assert report.created == 4 and report.links_rewritten == 2
    assert any("Broken.md: malformed YAML" in w and "```yaml code block" in w
               for w in report.warnings)
    fld = store.field("docs")
    broken = Page.parse((fld.path / "broken.md").read_text())
    assert broken.frontmatter is not None and broken.get("title") == "Broken"
    # Kept word for word, fenced: no "---" rule and setext heading under the new block.
    assert broken.body == "```yaml\ntitle: [unclosed\n```\nBody kept.\n"
    readme = (fld.path / "readme.md").read_text()
    assert "[the guide](getting-started.md#setup)" in readme
    out = export_field(fld, tmp_path / "out", original_paths=True, plain=True)
    assert sorted(out.files) == sorted(files)
    for rel, content in files.items():  # unedited: the links as written, not re-encoded
        assert (tmp_path / "out" / rel).read_text() == content, rel
    # A plain export copies pages byte for byte and leaves derived files behind.
    flat = export_field(fld, tmp_path / "flat")
    assert "listing.md" not in flat.files and not list((tmp_path / "flat").glob("*.sqlite3*"))
    assert (tmp_path / "flat" / "readme.md").read_bytes() == (fld.path / "readme.md").read_bytes()
    with pytest.raises(ExportTargetError, match="not empty"):
        export_field(fld, tmp_path / "flat")
    again = export_field(fld, tmp_path / "flat", force=True)
    assert again.replaced == again.pages + again.attachments


def test_plain_export_gives_an_unedited_vault_back_its_wikilinks(
        store: deepfield.Store, vault: Path, tmp_path: Path) -> None:
    """`[[Project Alpha]]` came back as `[Project Alpha](Projects/Project%20Alpha.md)`,
    though --plain promises unedited imports back as they were."""
    import_obsidian(store, vault, field="vault")
    fld = store.field("vault")
    alpha = fld.path / "project-alpha.md"
    alpha.write_text(alpha.read_text().replace("Alpha.\n", "Alpha, edited.\n"))
    export_field(fld, tmp_path / "out", original_paths=True, plain=True)
    for rel in ("Welcome.md", "Projects/Ideas.md", "Archive/Ideas.md"):
        assert (tmp_path / "out" / rel).read_bytes() == (vault / rel).read_bytes(), rel
    # An edited page keeps Markdown links (what was rewritten may be gone), re-pointed.
    edited = (tmp_path / "out" / "Projects/Project Alpha.md").read_text()
    assert "Alpha, edited." in edited and "[Welcome](../Welcome.md)" in edited
    # Without --original-paths the files are flat: links stay at the flat filenames.
    flat = export_field(fld, tmp_path / "flat", plain=True)
    assert "welcome.md" in flat.files
    assert "[Project Alpha](project-alpha.md)" in (tmp_path / "flat" / "welcome.md").read_text()


def test_plain_export_drops_bookkeeping_of_pages_written_here(store: deepfield.Store,
                                                               tmp_path: Path) -> None:
    fld = store.create_field("notes")
    fld.add("Pump noise", "The pump rattles above 2 bar.", summary="Pump rattle")
    fld.write("# Bare\n\nNo frontmatter given.\n", name="bare")
    export_field(fld, tmp_path / "out", plain=True)
    pump = Page.parse((tmp_path / "out" / "pump-noise.md").read_text())
    assert pump.frontmatter == {"title": "Pump noise", "summary": "Pump rattle"}
    bare = Page.parse((tmp_path / "out" / "bare.md").read_text())
    assert not {"uuid", "created", "updated"} & set(bare.frontmatter or {})


def test_big_note_is_split_and_reimport_stays_stable(store: deepfield.Store,
                                                     tmp_path: Path) -> None:
    big = "# Big\n\n" + "\n\n".join(f"## Part {i}\n" + "word " * 300 for i in range(8))
    src = make_tree(tmp_path / "big", {"Big Note.md": big})
    first = import_dir(store, src, field="big")
    assert len(first.pages[0]["files"]) >= 2
    again = import_dir(store, src, field="big")
    assert again.unchanged == 1
    out = export_field(store.field("big"), tmp_path / "out", original_paths=True, plain=True)
    assert "Big Note.md" in out.files and "Big Note-part-2.md" in out.files


def test_heading_anchor() -> None:
    assert heading_anchor("Next Steps!") == "next-steps"
    assert heading_anchor("Über  uns") == "über--uns"


# ---------------------------------------------------------------- CLI


def test_cli_import_and_export(cli: Cli, vault: Path, tmp_path: Path) -> None:
    data = cli.json("import", "obsidian", str(vault), "--field", "vault", "--no-index")
    assert data["created"] == 4 and data["imported"] == 4 and data["attachments"] == 1
    assert {s["path"] for s in data["skipped"]} == {"Legacy.md", "Empty.md"}
    again = cli.json("import", "obsidian", str(vault), "--field", "vault")
    assert again["unchanged"] == 4 and again["indexed"]["pages"] == 4
    text = cli("import", "markdown", str(vault), "--field", "vault", "--into")
    assert "0 pages created" in text.output and "unchanged" in text.output
    out = cli.json("export", "vault", str(tmp_path / "out"), "--original-paths", "--plain")
    assert out["pages"] == 4 and "Welcome.md" in out["files"]
    assert json.loads(json.dumps(out))["attachments"] == 1


def test_cli_errors_are_one_line(cli: Cli, vault: Path, tmp_path: Path) -> None:
    cli.json("import", "markdown", str(vault), "--field", "vault", "--no-index")
    cli.json("new", "other")
    for args, expected in (
        (["import", "obsidian", str(tmp_path / "nope")], "no folder at"),
        (["import", "obsidian", str(vault), "--field", "other"], "already exists"),
        (["export", "vault", str(vault)], "is not empty"),
    ):
        result = run_deepfield("--store", str(cli.store_path), "--embedder", "none", *args)
        err = result.stderr.decode()
        assert result.returncode == 1 and err.count("\n") == 1 and expected in err, err


def test_a_field_is_never_imported_into_itself(store: deepfield.Store) -> None:
    field = store.create_field("notes")
    field.add("One", "first page")
    before = {p.name: p.read_bytes() for p in field.path.iterdir() if p.suffix == ".md"}
    with pytest.raises(ImportFormatError, match="itself"):
        import_dir(store, field.path, field="notes", into=True)
    assert {p.name: p.read_bytes() for p in field.path.iterdir() if p.suffix == ".md"} == before


def test_titles_of_any_yaml_shape_survive_the_round_trip(store: deepfield.Store,
                                                         tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "A b.md").write_text("---\ntitle: [a, b]\n---\nbody one\n")
    (source / "numtitle.md").write_text("---\ntitle: 123\n---\nbody two\n")
    import_dir(store, source, field="rt")
    out = tmp_path / "out"
    export_field(store.field("rt"), out, original_paths=True, plain=True)
    for name in ("A b.md", "numtitle.md"):
        assert (out / name).read_bytes() == (source / name).read_bytes(), name


def test_an_empty_field_name_is_refused_not_replaced(store: deepfield.Store,
                                                     tmp_path: Path) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    (source / "a.md").write_text("# A\n\ntext\n")
    with pytest.raises(ImportFormatError, match="not a spec filename"):
        import_dir(store, source, field="")
    assert "notes" not in store.field_names()


def test_locomo_sessions_that_are_not_lists_are_reported(store: deepfield.Store,
                                                         tmp_path: Path) -> None:
    from deepfield.importers.locomo import import_locomo, turn_line

    data = [{"sample_id": "c1", "conversation": {
        "speaker_a": "A", "speaker_b": "B", "session_1": "notalist",
        "session_2": [{"speaker": None, "dia_id": "D2:1", "text": "hello"}]}}]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    report = import_locomo(store, path)
    assert report.sessions_skipped == 1 and any("session 1" in w for w in report.warnings)
    assert turn_line({"speaker": None, "dia_id": None, "text": "x"}) == "? (?): x"


def test_ambiguous_wikilinks_go_to_the_nearest_note_with_a_warning(
        store: deepfield.Store, tmp_path: Path) -> None:
    links = "[[Project Alpha]] [[Project Alpha#Goals|x]] [[Project Alpha#^abc123]] [[Alpha]]\n"
    src = make_tree(tmp_path / "v", {
        "Projects/Project Alpha.md": "---\naliases: [Alpha]\n---\n## Goals\n",
        "Archive/Project Alpha.md": "Old.\n",
        "Projects/Sub/Deep Note.md": links,
        "Archive/Old/Deeper/Note.md": "[[Project Alpha]]\n",
        "Projects/Ideas.md": "[[Project Alpha]]\n",
    })
    report = import_obsidian(store, src, field="v")
    folder = store.field("v").path
    deep = (folder / "deep-note.md").read_text()
    assert "archive-project-alpha" not in deep  # the nearer ancestor's note wins
    assert deep.count("(projects-project-alpha.md") == 4
    assert "(archive-project-alpha.md)" in (folder / "note.md").read_text()
    assert "(projects-project-alpha.md)" in (folder / "ideas.md").read_text()  # same folder
    warned = [w for w in report.warnings if "matches 2 notes" in w]
    assert any(w.startswith("Projects/Sub/Deep Note.md: [[Project Alpha]]")
               and "projects-project-alpha.md" in w for w in warned)
    assert not any("[[Alpha]]" in w for w in report.warnings)  # an alias is not ambiguous


def test_claude_code_and_memory_tool_rewrite_relative_links(
        store: deepfield.Store, tmp_path: Path) -> None:
    rule = "Follow [the workflow](../../docs/git-workflow.md#rebase).\n"
    project = make_tree(tmp_path / "proj", {
        "CLAUDE.md": "# Project\n\nSee @docs/git-workflow.md\n",
        ".claude/rules/testing.md": rule,
        "docs/git-workflow.md": "## Rebase\n",
    })
    report = import_claude_code(store, project, field="proj")
    assert report.links_rewritten == 1
    folder = store.field("proj").path
    assert "[the workflow](git-workflow.md#rebase)" in (folder / "testing.md").read_text()
    export_field(store.field("proj"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / ".claude/rules/testing.md").read_text() == rule
    mem = make_tree(tmp_path / "memories", {"a/index.md": "[b](../b/notes.md)\n",
                                            "b/notes.md": "B.\n",
                                            "c.txt": "[b](b/notes.md)\n"})
    report = import_memory_tool(store, mem, field="mem")
    names = {p["source_path"]: p["filename"] for p in report.pages}
    assert report.links_rewritten == 1
    index = (store.field("mem").path / names["a/index.md"]).read_text()
    assert f"[b]({names['b/notes.md']})" in index


def test_basic_memory_relations_with_labels_and_headings(store: deepfield.Store,
                                                         tmp_path: Path) -> None:
    src = make_tree(tmp_path / "bm", {
        "Ada.md": "- part_of [[Charles Babbage|Babbage's work]]\n"
                  "- mentions [[Charles Babbage#Engines]]\n",
        "Charles Babbage.md": "## Engines\n",
    })
    import_basic_memory(store, src, field="bm")
    page = Page.parse((store.field("bm").path / "ada.md").read_text())
    assert page.get("relations") == [
        {"type": "part_of", "target": "Charles Babbage", "page": "charles-babbage.md"},
        {"type": "mentions", "target": "Charles Babbage", "page": "charles-babbage.md"},
    ]


def test_reimport_remembers_attachments(store: deepfield.Store, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "md", {"a.md": "![logo](img/logo.svg)\n",
                                      "img/logo.svg": "<svg/>\n"})
    import_dir(store, src, field="md2", attachments=True)
    again = import_dir(store, src, field="md2", into=True)
    assert again.updated == 0 and again.unchanged == 1
    assert "![logo](logo.svg)" in (store.field("md2").path / "a.md").read_text()
    # A record from before the mode was kept: the copied attachments say it.
    record = store.field("md2").path / ".deepfield" / "imports.json"
    data = json.loads(record.read_text())
    for source in data["sources"].values():
        del source["attachments"]
    record.write_text(json.dumps(data))
    assert import_dir(store, src, field="md2", into=True).unchanged == 1


def test_reference_definitions_are_rewritten(store: deepfield.Store, tmp_path: Path) -> None:
    readme = "See the [FAQ][f] and [^1].\n\n[f]: ref/faq.md#top \"FAQ\"\n[^1]: ref/faq.md\n"
    src = make_tree(tmp_path / "docs", {"README.md": readme, "ref/faq.md": "# Top\n"})
    report = import_dir(store, src, field="docs")
    assert report.links_rewritten == 1
    text = (store.field("docs").path / "readme.md").read_text()
    assert '[f]: faq.md#top "FAQ"\n' in text and "[^1]: ref/faq.md\n" in text
    export_field(store.field("docs"), tmp_path / "out", original_paths=True, plain=True)
    assert (tmp_path / "out" / "README.md").read_text() == readme
    export_field(store.field("docs"), tmp_path / "tree", original_paths=True)
    assert '[f]: ref/faq.md#top "FAQ"' in (tmp_path / "tree" / "README.md").read_text()
