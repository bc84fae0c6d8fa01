"""Library API edges found by walking docs/API.md: odd frontmatter values, stores that are
not stores, failed inits, read-only folders, argument shapes and the backend registries."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import deepfield


def _nan_store(tmp_path: Path) -> tuple[deepfield.Store, deepfield.Field, Path]:
    store = deepfield.open(tmp_path / "s", create=True, embedder=None)
    field = store.create_field("a")
    page = field.path / "score.md"
    page.write_text("---\ntitle: Score\nx: .nan\ny: -.inf\n---\nThe model score page.\n")
    return store, field, page


def test_nan_and_inf_frontmatter_is_searchable_and_page_untouched(tmp_path: Path) -> None:
    store, field, page = _nan_store(tmp_path)
    before = page.read_bytes()
    with store:
        hits = field.search("model score")
        assert [h.filename for h in hits.results] == ["score.md"]
        out = json.dumps(hits.to_json(), allow_nan=False)
        assert '"x": "nan"' in out and '"y": "-inf"' in out
        assert [h.filename for h in store.search("model score").results] == ["score.md"]
        written = field.add("Other", "model other page", frontmatter={"score": float("inf")})
        assert written.pages[0].action == "created" and not written.warnings
        assert len(field.search("model").results) == 2
    assert page.read_bytes() == before


def test_index_that_stored_bare_nan_still_searches_and_reindex_heals(tmp_path: Path) -> None:
    store, field, page = _nan_store(tmp_path)
    before = page.read_bytes()
    with store:
        field.search("model")
        index_file = next(p for p in field.path.iterdir() if p.suffix == ".sqlite3")
        # What an index written before the fix holds: the bare token NaN, not JSON.
        with sqlite3.connect(index_file) as conn:
            conn.execute("UPDATE df_docs SET frontmatter = ? WHERE filename = 'score.md'",
                         ('{"title": "Score", "x": NaN, "y": -Infinity}',))
        conn.close()
        hits = field.search("model score")
        assert [h.filename for h in hits.results] == ["score.md"]
        json.dumps(hits.to_json(), allow_nan=False)
        field.reindex()
        with sqlite3.connect(index_file) as conn:
            stored = conn.execute(
                "SELECT frontmatter FROM df_docs WHERE filename = 'score.md'").fetchone()[0]
        conn.close()
        assert json.loads(stored)["x"] == "nan"
    assert page.read_bytes() == before


def test_page_view_to_json_is_plain_json_for_yaml_dates_bytes_sets_and_nan(
        tmp_path: Path) -> None:
    with deepfield.open(tmp_path / "s", create=True, embedder=None) as store:
        field = store.create_field("n")
        field.write("---\ntitle: Dated\ndate: 2023-07-03\nwhen: 2023-07-03T10:00:00\n"
                    "blob: !!binary aGk=\ntags: !!set {a: null}\nx: .nan\n---\nThe kettle.\n",
                    name="dated.md")
        front = json.loads(json.dumps(field.read("dated").to_json(), allow_nan=False))
        assert front["frontmatter"]["date"] == "2023-07-03"
        assert front["frontmatter"]["when"] == "2023-07-03T10:00:00"
        assert front["frontmatter"]["blob"] == "hi"
        assert front["frontmatter"]["tags"] == ["a"]
        assert front["frontmatter"]["x"] == "nan"
        hit = field.search("kettle").results[0]
        assert json.dumps(hit.to_json(), allow_nan=False)


def test_cli_read_json_prints_no_nan(tmp_path: Path) -> None:
    from .conftest import Cli

    deepfield.open(tmp_path / "s", create=True, embedder=None).close()
    with deepfield.open(tmp_path / "s", embedder=None) as store:
        store.create_field("n").write("---\ntitle: T\nx: .nan\n---\nBody.\n", name="t.md")
    result = Cli(tmp_path / "s")("read", "n", "t", "--json")
    assert result.exit_code == 0, result.output
    assert "NaN" not in result.output
    assert json.loads(result.output)["frontmatter"]["x"] == "nan"


def test_open_refuses_a_folder_with_sub_folders_but_no_config(tmp_path: Path) -> None:
    project = tmp_path / "plainproj"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "src" / "notes.md").write_text("# readme\n")
    with pytest.raises(deepfield.StoreNotFoundError, match=r"no deepfield\.toml"):
        deepfield.open(project, embedder=None)
    assert sorted(p.name for p in (project / "src").iterdir()) == ["notes.md"]
    assert not (project / "deepfield.toml").exists()
    with deepfield.open(project, create=True, embedder=None) as store:  # asked for: adopted
        assert store.field_names() == ["src"]
