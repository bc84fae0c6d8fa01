"""Dense retrieval: exact scan, the two-stage page prefilter, and the memory-mapped cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import deepfield
from deepfield.index import dense
from deepfield.index.dense import DenseIndex, _read_cache, _write_cache


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def index() -> DenseIndex:
    rng = np.random.default_rng(7)
    pages = unit(rng.standard_normal((6, 16)))
    chunk_rows, docs = [], []
    for doc in range(6):  # 3 chunks per page, close to their page vector
        for _ in range(3):
            chunk_rows.append(pages[doc] + 0.3 * rng.standard_normal(16))
            docs.append(doc + 1)
    ids = np.arange(10, 10 + len(docs), dtype=np.int64)
    return DenseIndex(1, ids, np.asarray(docs, np.int64), unit(np.asarray(chunk_rows)),
                      np.arange(1, 6, dtype=np.int64), pages[:5])  # page 6 has no page vector


def test_exact_scan_ranks_by_cosine(index: DenseIndex) -> None:
    query = index.matrix[4]
    found = index.search(query, 3)
    assert found[0] == (14, pytest.approx(1.0))
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    assert len(found) == 3


def test_two_stage_scores_only_probed_pages(index: DenseIndex, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.setattr(dense, "TWO_STAGE_MIN_ROWS", 0)
    monkeypatch.setattr(dense, "PROBE_PAGES", 1)
    query = index.pages[2]  # page 3
    found = index.search(query, 100)
    pages = {int(index.docs[np.searchsorted(index.ids, cid)]) for cid, _ in found}
    assert pages == {3, 6}  # the best page, and the page without a page vector
    exact = dict(index.search(query, 0, include=[10]))  # keyword candidates: exact cosine
    assert exact[10] == pytest.approx(float(index.matrix[0] @ query))


def test_cache_round_trip(index: DenseIndex, tmp_path: Path) -> None:
    arrays = {"ids": index.ids, "docs": index.docs, "matrix": index.matrix,
              "page_docs": index.page_docs, "pages": index.pages}
    path = tmp_path / ".deepfield" / "m.vectors"
    _write_cache(path, 5, "abc", arrays)
    loaded = _read_cache(path, 5, "abc")
    assert loaded is not None
    for name, array in arrays.items():
        assert np.array_equal(np.asarray(loaded[name]), array)
    assert _read_cache(path, 6, "abc") is None and _read_cache(path, 5, "other") is None


def test_search_matches_after_reload_and_change(field: deepfield.Field) -> None:
    for i in range(6):
        field.add(f"Note {i}", f"topic {i} " * 5 + "shared words here")
    def ranking() -> list[tuple[str, float]]:
        hits = field.search("topic 3", mode="vector").results
        return [(h.filename, round(h.score, 5)) for h in hits]

    first = ranking()
    cache = field.path / ".deepfield" / f"{field.index_handle().model_code}.vectors"
    assert cache.exists()
    field.close()  # a new process maps the cache instead of reading SQLite
    assert ranking() == first
    field.add("Note 7", "topic 3 " * 8)  # new vectors: a new generation, the cache is rebuilt
    assert field.search("topic 3", mode="vector").results[0].filename == "note-7.md"
