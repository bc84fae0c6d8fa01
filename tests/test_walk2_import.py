"""Second walk through the importers and ``export``: defects a demanding user found, each
pinned by a test on a small realistic tree built in tmp_path."""

from __future__ import annotations

from pathlib import Path

import deepfield
from deepfield.importers.export import export_field
from deepfield.importers.memory_tool import import_memory_tool
from deepfield.integrations.memory_files import MemoryFiles

from .test_importers import make_tree


def test_memory_tool_import_reads_back_through_the_memory_tool(
    store: deepfield.Store, tmp_path: Path
) -> None:
    """The memory tool shows a page's body as the file: an import must not wrap it in a code
    fence or split a long file into parts (the model saw fences, or only one part)."""
    long_notes = "# Notes\n" + "".join(f"## Day {i}\n" + "we met and agreed. " * 40 + "\n"
                                       for i in range(30))
    files = {"notes.md": long_notes, "prefs.json": '{"editor": "vim"}',
             "conf.yaml": "# editor settings\nkey: value\n"}
    src = make_tree(tmp_path / "memories", files)
    report = import_memory_tool(store, src, field="mem")
    assert report.created == 3 and not report.skipped
    fld = store.field("mem")
    assert sorted(p.name for p in fld.path.glob("*.md") if p.name != "listing.md") == [
        "conf-yaml.md", "notes.md", "prefs-json.md"]
    memory = MemoryFiles(fld)
    for rel, text in files.items():
        assert memory.text(rel) == text, rel
    assert memory.load("conf.yaml")[1].title == "conf.yaml"  # a YAML comment is no heading
    out = export_field(fld, tmp_path / "out", original_paths=True, plain=True)
    assert out.pages == 3
    for rel, text in files.items():
        assert (tmp_path / "out" / rel).read_text() == text, rel
