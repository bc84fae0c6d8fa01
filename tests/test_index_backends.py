"""Index backends: today's SQLite index and LanceDB on local disk, from the same pages.

Both are built from the same Markdown with the same chunking and fused the same way, so a
search gives the same JSON shape whichever backend a field uses, and vector searches the
same order and scores. BM25 is two implementations (LanceDB stems and weighs terms its own
way): keyword and hybrid searches are checked for the same best page on these queries only,
not for the same ranking. The LanceDB dataset is derived: `reindex`, deleting it or damaging it
rebuilds it from the pages.
"""

from __future__ import annotations

import shutil
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest

import deepfield
from deepfield import portable
from deepfield.config import EmbeddingConfig, load_config
from deepfield.errors import ConfigError
from deepfield.index.backend import (
    BackendContext,
    SqliteBackend,
    index_backend_names,
    register_index_backend,
)
from deepfield.index.lance_backend import LanceBackend

from .fakes import FakeEmbedder

PAGES = {
    "Battery decision": ("# Battery\n\n## Choice\n\nWe chose LiFePO4 cells for heat tolerance."
                         "\n\n## Cost\n\nNine dollars more per unit.\n"),
    "Sensor calibration": "Hold the probe in dry air, then in wet soil.\n\n- press once\n"
                          "- press twice\n",
    "Meeting": "Alice (D1:1): the valve stuck open\nBob (D1:2): grit in the seat\n"
               "Alice (D1:3): we ordered a new seat from the supplier\n",
    "Filler": "Nothing relevant here at all, only words about weather and rain.",
}
QUERIES = ["LiFePO4 heat", "valve stuck open", "probe in wet soil", "supplier seat",
           "深圳 供应商", "weather"]


def make_store(root: Path, backend: str, embedder: str = "fake") -> deepfield.Store:
    deepfield.init(root, EmbeddingConfig(embedder))
    with (root / "deepfield.toml").open("a") as handle:
        handle.write(f'\n[index]\nbackend = "{backend}"\n')
    store = deepfield.open(root, embedder=FakeEmbedder() if embedder == "fake" else None)
    field = store.create_field("notes")
    for title, text in PAGES.items():
        field.add(title, text, summary="LiFePO4 over NMC." if title.startswith("Bat") else None)
    field.write("---\ntitle: 深圳供应商\n---\n深圳的外壳供应商报价每个四美元，防护等级很高。\n")
    return store


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    sqlite_store = make_store(tmp_path / "a", "sqlite")
    lance_store = make_store(tmp_path / "b", "lancedb")
    yield sqlite_store.field("notes"), lance_store.field("notes")
    sqlite_store.close()
    lance_store.close()


def shape(data: dict[str, Any]) -> Any:
    """A search's JSON without what legitimately differs (scores, timings, uuids, dates)."""
    keep = {"title", "summary", "snippet", "snippet_line", "heading", "line_start", "line_end",
            "field"}  # not filenames: a page without a usable title is named from its uuid
    return {"keys": sorted(data), "results": [
        {k: v for k, v in hit.items() if k in keep} for hit in data["results"]]}


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
@pytest.mark.parametrize("unit", ["page", "chunk"])
def test_both_backends_give_the_same_json(pair: Any, mode: str, unit: str) -> None:
    sqlite_field, lance_field = pair
    assert isinstance(lance_field.search_backend(), LanceBackend)
    assert isinstance(sqlite_field.search_backend(), SqliteBackend)
    for query in QUERIES:
        one = sqlite_field.search(query, k=4, mode=mode, unit=unit).to_json(with_text=True)
        other = lance_field.search(query, k=4, mode=mode, unit=unit).to_json(with_text=True)
        assert set(one) == set(other) and one["mode"] == other["mode"] == mode
        assert [set(hit) for hit in one["results"]] == [set(hit) for hit in other["results"]]
        if mode == "vector":  # exact cosines on both sides: the same order, the same scores
            assert shape(one) == shape(other), query
            assert [h["score"] for h in one["results"]] == pytest.approx(
                [h["score"] for h in other["results"]], abs=1e-5)
        elif one["results"]:  # two BM25 implementations: the same best page
            assert one["results"][0]["title"] == other["results"][0]["title"], query


def test_lancedb_keeps_up_with_writes_edits_and_removals(pair: Any) -> None:
    _, field = pair
    field.add("Wok", "Carbon fibre woks heat unevenly.")
    assert field.search("carbon fibre woks", mode="bm25").results[0].filename == "wok.md"
    (field.path / "wok.md").write_text("---\ntitle: Wok\n---\nCast iron pans keep heat.\n")
    field.mark_changed(["wok.md"])
    hits = field.search("cast iron pans", mode="bm25").results
    assert hits[0].filename == "wok.md" and "Cast iron" in hits[0].snippet
    assert not [h for h in field.search("carbon fibre", mode="bm25").results
                if h.filename == "wok.md"]
    field.archive("wok")
    assert "wok.md" not in {h.filename for h in field.search("cast iron", mode="bm25").results}
    backend = field.search_backend()
    assert backend.filenames(["wok.md", "meeting.md"]) == {"meeting.md"}


def test_the_dataset_is_derived_reindex_delete_and_damage_rebuild_it(pair: Any) -> None:
    _, field = pair
    backend = field.search_backend()
    expected = [h.filename for h in field.search("valve stuck", k=3).results]
    folder = Path(backend.uri)
    assert (folder / "chunks.lance").is_dir()
    field.reindex()
    assert [h.filename for h in field.search("valve stuck", k=3).results] == expected
    rebuilt = backend.dataset.rebuilt
    shutil.rmtree(folder)  # deleted: the next search writes it again from the catalogue
    assert [h.filename for h in field.search("valve stuck", k=3).results] == expected
    assert (folder / "chunks.lance").is_dir() and backend.dataset.rebuilt == rebuilt + 1
    for data in (folder / "chunks.lance" / "data").glob("*.lance"):
        data.write_bytes(b"\0garbage\0" * 8)  # damaged: unreadable data files
    assert [h.filename for h in field.search("valve stuck", k=3).results] == expected
    assert backend.dataset.rebuilt == rebuilt + 2


def test_per_field_choice_and_unknown_backends(tmp_path: Path) -> None:
    root = tmp_path / "s"
    deepfield.init(root, EmbeddingConfig("fake"))
    with (root / "deepfield.toml").open("a") as handle:
        handle.write('\n[index]\nbackend = "sqlite"\n\n[index.fields]\nbig = "lancedb"\n'
                     'odd = "faiss"\n')
    config = load_config(root)
    assert (config.index.backend_for("big"), config.index.backend_for("small")) == \
        ("lancedb", "sqlite")
    store = deepfield.open(root, embedder=FakeEmbedder())
    big, small, odd = (store.create_field(n) for n in ("big", "small", "odd"))
    big.add("Wok", "Carbon fibre woks heat unevenly.")
    small.add("Wok", "Carbon fibre woks heat unevenly.")
    assert big.search("woks").results[0].filename == small.search("woks").results[0].filename
    assert isinstance(big.search_backend(), LanceBackend)
    assert isinstance(small.search_backend(), SqliteBackend)
    with pytest.raises(ConfigError, match="no index backend named 'faiss'"):
        odd.search("woks")
    store.close()
    (root / "deepfield.toml").write_text('[index]\nbackend = 3\n')
    with pytest.raises(ConfigError, match="index backends are names"):
        load_config(root)


def test_a_third_party_backend_registers_by_name(tmp_path: Path) -> None:
    class Echo(SqliteBackend):
        """The SQLite index under another name, counting its calls."""

        name = "echo"
        calls = 0

        def candidates(self, *args: Any, **kwargs: Any) -> Any:
            Echo.calls += 1
            return super().candidates(*args, **kwargs)

    def factory(context: BackendContext) -> Echo:
        return Echo(context)

    register_index_backend("echo", factory)
    assert "echo" in index_backend_names() and "lancedb" in index_backend_names()
    store = make_store(tmp_path / "s", "echo")
    assert store.field("notes").search("valve").results[0].filename == "meeting.md"
    assert Echo.calls == 1
    store.close()


def test_keyword_only_store_on_lancedb(tmp_path: Path) -> None:
    store = make_store(tmp_path / "k", "lancedb", embedder="none")
    field = store.field("notes")
    response = field.search("valve stuck")
    assert response.mode == "bm25" and response.results[0].filename == "meeting.md"
    store.close()


def test_pack_still_writes_the_spec_pages_table(pair: Any, tmp_path: Path) -> None:
    _, field = pair
    field.index()
    packed = portable.pack(field, tmp_path / "n.memoryfield.zip", with_index=True)
    with zipfile.ZipFile(packed.path) as archive:
        index_name = next(n for n in archive.namelist() if n.endswith(".sqlite3"))
        (tmp_path / "x.sqlite3").write_bytes(archive.read(index_name))
        assert not any("lancedb" in n for n in archive.namelist())
    conn = sqlite3.connect(tmp_path / "x.sqlite3")
    rows = conn.execute("SELECT filename, length(embedding) FROM pages").fetchall()
    assert len(rows) == len(PAGES) + 1 and all(size == 64 * 4 for _, size in rows)


def test_keyword_search_does_not_wait_for_vectors(tmp_path: Path) -> None:
    store = make_store(tmp_path / "p", "lancedb")
    field = store.field("notes")
    field.index(embed=False)  # the text is in the dataset, the vectors not yet
    backend = field.search_backend()
    assert backend.pending_chunk_vectors() > 0
    assert field.search("valve stuck", mode="bm25").results[0].filename == "meeting.md"
    field.embed()
    assert backend.pending_chunk_vectors() == 0
    response = field.search("valve stuck", mode="vector")
    assert response.results[0].filename == "meeting.md" and not response.warnings
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "lancedb"])
def test_hybrid_places_a_chunk_without_a_vector_by_its_keywords(
        tmp_path: Path, backend: str) -> None:
    """A page whose vectors are not computed yet is not scored 0 for its unknown similarity:
    the best keyword match comes first in hybrid search too."""
    from deepfield.search import search_fields

    store = make_store(tmp_path / backend, backend)
    field = store.field("notes")
    field.embed()
    (field.path / "wok.md").write_text("---\ntitle: Wok\n---\nCarbon fibre woks heat "
                                       "unevenly on induction hobs.\n")
    field.index(embed=False)
    response = search_fields([field], "carbon fibre woks induction", mode="hybrid", sync=False)
    assert response.pending_vectors > 0
    assert response.results[0].filename == "wok.md"
    store.close()


def test_superseded_pages_are_hidden_on_both_backends(pair: Any) -> None:
    for field in pair:
        field.write("---\ntitle: Battery, again\nsupersedes: battery-decision\n---\n"
                    "We moved from LiFePO4 to sodium cells.\n")
        names = [h.filename for h in field.search("LiFePO4 cells").results]
        assert "battery-again.md" in names and "battery-decision.md" not in names, names
        shown = field.search("LiFePO4 cells", include_superseded=True).results
        assert "battery-decision.md" in [h.filename for h in shown]


def test_a_damaged_catalogue_of_a_lancedb_field_heals(tmp_path: Path) -> None:
    """The SQLite catalogue under a LanceDB field is healed as any index (field_index.py):
    moved aside, rebuilt from the pages, and searches answer from the dataset as before."""
    from .test_heal import damage

    store = make_store(tmp_path, "lancedb")
    field = store.field("notes")
    for number in range(40):
        field.add(f"Filler {number}", f"Filler page {number} about gaskets and rain {number}.")
    expected = [h.filename for h in field.search("valve stuck", k=3).results]
    index_file = field.index_path()
    store.close()
    damage(index_file)
    with deepfield.open(tmp_path, embedder=FakeEmbedder()) as again:
        response = again.field("notes").search("valve stuck", k=3)
        assert [h.filename for h in response.results] == expected
        assert any("damaged" in w for w in response.warnings), response.warnings
        assert isinstance(again.field("notes").search_backend(), LanceBackend)


def test_a_chunk_the_model_cannot_encode_on_lancedb(tmp_path: Path) -> None:
    """A chunk without a word (index/vectors.py stores an empty vector for it) is written to
    the dataset as never searched by vector, and its page is complete, not pending."""
    store = make_store(tmp_path, "lancedb")
    field = store.field("notes")
    field.write("---\ntitle: Rule\n---\n# Rule\n\nA horizontal rule follows.\n\n"
                "## —\n\n---- ==== ----\n\n*** … ***\n")
    backend = field.search_backend()
    assert isinstance(backend, LanceBackend)
    response = field.search("horizontal rule", k=3)
    assert response.results and response.results[0].filename == "rule.md"
    field.index()
    catalogue = field.index_handle().conn
    assert catalogue.execute("SELECT count(*) FROM df_chunks WHERE embedding = x''")\
        .fetchone()[0] >= 1  # the chunk the model could not encode
    assert backend.pending_chunk_vectors() == 0
    assert field.search("valve stuck", k=3, mode="vector").results
    store.close()


def test_a_dataset_deleted_again_and_again_is_rebuilt_each_time(pair: Any) -> None:
    """MAX_REBUILDS bounds rebuilds in a row that do not make the dataset readable, not the
    rebuilds of a long-running process."""
    _, field = pair
    backend = field.search_backend()
    folder = Path(backend.uri)
    assert field.search("valve stuck", k=1).results[0].filename == "meeting.md"
    for _ in range(LanceBackend.MAX_REBUILDS + 2):
        shutil.rmtree(folder)  # deleted by hand, now and then: the next search rebuilds it
        assert field.search("valve stuck", k=1).results[0].filename == "meeting.md"
    assert backend.dataset.rebuilt >= LanceBackend.MAX_REBUILDS + 2
