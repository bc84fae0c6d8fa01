"""The OpenAI-compatible embedding backend against a real HTTP server on 127.0.0.1.

Nothing is mocked below the socket: the fake server (fake_openai.py) scripts replies, failures,
delays and dropped connections. Waits between retries go through an injected ``sleep`` so
backoff is checked exactly without making the suite slow.
"""

from __future__ import annotations

import base64
import math
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.embed.base import create_embedder
from deepfield.embed.openai_compat import OpenAIEmbedder, default_model_code
from deepfield.errors import ConfigError, EmbeddingInputError, EmbeddingServiceError

from . import fake_openai
from .fake_openai import FakeOpenAIServer
from .fakes import FakeEmbedder

Make = Callable[..., OpenAIEmbedder]


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make(openai_server: FakeOpenAIServer, sleeps: list[float]) -> Iterator[Make]:
    """Builds embedders pointed at the fake server (closed after the test); waits are recorded
    in ``sleeps`` instead of slept."""
    built: list[OpenAIEmbedder] = []

    def build(**options: Any) -> OpenAIEmbedder:
        options = {"url": openai_server.url, "model": "text-embedding-3-small",
                   "sleep": sleeps.append, **options}
        embedder = OpenAIEmbedder(**options)
        built.append(embedder)
        return embedder

    yield build
    for embedder in built:
        embedder.close()


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def embeddings_json(vectors: list[list[float]], indexes: list[int] | None = None) -> dict[str, Any]:
    order = indexes if indexes is not None else list(range(len(vectors)))
    pairs = zip(order, vectors, strict=True)
    return {"object": "list", "data": [{"index": i, "embedding": v} for i, v in pairs]}


# -- request and reply --------------------------------------------------------------------------


def test_request_shape_and_vectors(make: Make, openai_server: FakeOpenAIServer) -> None:
    embedder = make(api_key="sk-test")
    vectors = embedder.embed(["carbon fibre wok", "cast iron pan"])
    [request] = openai_server.requests
    assert (request.method, request.path) == ("POST", "/v1/embeddings")
    assert request.json == {
        "model": "text-embedding-3-small",
        "input": ["carbon fibre wok", "cast iron pan"],
        "encoding_format": "float",
    }
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    expected = unit(FakeEmbedder().embed_batch(["carbon fibre wok", "cast iron pan"], "document"))
    assert vectors.dtype == np.float32 and vectors.shape == (2, 64)
    assert np.allclose(vectors, expected, atol=1e-6)
    assert embedder.dim == 64 and embedder.model_code == "text-embedding-3-small"


def test_api_key_from_named_env_var_and_none_without(
    make: Make, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_EMBED_KEY", "sk-env")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make(api_key_env="MY_EMBED_KEY").embed(["a"])
    make().embed(["b"])
    first, second = openai_server.requests
    assert first.headers["authorization"] == "Bearer sk-env"
    assert "authorization" not in second.headers


def test_key_never_shown(make: Make) -> None:
    embedder = make(api_key="sk-secret-123")
    assert "sk-secret" not in repr(embedder) + repr(embedder.describe())


def test_a_url_password_is_posted_but_never_shown(
        make: Make, openai_server: FakeOpenAIServer) -> None:
    url = openai_server.url.replace("http://", "http://me:sk-URLSECRET@")
    embedder = make(url=url)
    shown = repr(embedder) + repr(embedder.describe()) + embedder.endpoint
    assert "URLSECRET" not in shown and embedder.url == openai_server.url
    embedder.embed(["a"])  # the endpoint still gets the credentials
    assert openai_server.requests[-1].headers["authorization"].startswith("Basic ")
    openai_server.enqueue(status=500, body="boom")
    openai_server.enqueue(status=500, body="boom")
    with pytest.raises(EmbeddingServiceError) as failed:
        make(url=url, max_retries=1).embed(["b"])
    assert "URLSECRET" not in str(failed.value)


def test_vectors_follow_index_not_reply_order(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(json=embeddings_json([[0.0, 1.0], [1.0, 0.0]], indexes=[1, 0]))
    vectors = make().embed(["first", "second"])
    assert np.allclose(vectors, [[1.0, 0.0], [0.0, 1.0]])


def test_batches_split_into_requests(make: Make, openai_server: FakeOpenAIServer) -> None:
    texts = [f"note {i}" for i in range(5)]
    vectors = make(batch_size="2").embed(texts)  # strings come from config and env
    assert [len(r.json["input"]) for r in openai_server.requests] == [2, 2, 1]
    assert np.allclose(vectors, unit(FakeEmbedder().embed_batch(texts, "document")), atol=1e-6)


def test_default_batch_is_64(make: Make, openai_server: FakeOpenAIServer) -> None:
    make().embed([f"note {i}" for i in range(70)])
    assert [len(r.json["input"]) for r in openai_server.requests] == [64, 6]


def test_usage_and_latency_recorded(make: Make, openai_server: FakeOpenAIServer) -> None:
    embedder = make()
    embedder.embed(["one two three", "four"])
    openai_server.enqueue(status=503)
    embedder.embed(["five six"])
    stats = embedder.stats
    assert (stats.requests, stats.retries, stats.texts) == (2, 1, 3)
    assert (stats.prompt_tokens, stats.total_tokens) == (6, 6)
    assert stats.seconds > 0 and 0 < stats.last_seconds <= stats.seconds
    assert embedder.describe()["stats"]["requests"] == 2


def test_base64_embeddings_are_decoded(make: Make, openai_server: FakeOpenAIServer) -> None:
    packed = base64.b64encode(np.array([3.0, 4.0], dtype="<f4").tobytes()).decode()
    openai_server.enqueue(json={"data": [{"index": 0, "embedding": packed}]})
    assert np.allclose(make().embed(["x"]), [[0.6, 0.8]])


def test_dimensions_option(make: Make, openai_server: FakeOpenAIServer) -> None:
    embedder = make(dimensions="16")
    assert embedder.model_code == "text-embedding-3-small-16d"
    assert embedder.embed(["x"]).shape == (1, 16)
    assert openai_server.requests[0].json["dimensions"] == 16


# -- model codes and prefixes -------------------------------------------------------------------


@pytest.mark.parametrize("model", ["nomic-embed-text", "nomic-embed-text:latest",
                                   "nomic-embed-text:v1.5", "nomic-ai/nomic-embed-text-v1.5"])
def test_nomic_gets_versioned_code_and_prefixes(
    make: Make, openai_server: FakeOpenAIServer, model: str
) -> None:
    embedder = make(model=model)
    assert embedder.model_code == "nomic-embed-text-v1.5"
    embedder.embed(["wok seasoning"])
    embedder.embed_query("how to season a wok")
    documents, queries = openai_server.requests
    assert documents.json["model"] == model  # the server's own name is sent unchanged
    assert documents.json["input"] == ["search_document: wok seasoning"]
    assert queries.json["input"] == ["search_query: how to season a wok"]


def test_prefixes_can_be_set_or_disabled(make: Make, openai_server: FakeOpenAIServer) -> None:
    make(model="nomic-embed-text", document_prefix="", query_prefix="").embed_query("q")
    make(model="e5-small", document_prefix="passage: ", query_prefix="query: ").embed(["d"])
    make(model="e5-small").embed(["plain"])
    assert [r.json["input"] for r in openai_server.requests] == [["q"], ["passage: d"], ["plain"]]


@pytest.mark.parametrize(("model", "code"), [
    ("text-embedding-3-small", "text-embedding-3-small"),
    ("mxbai-embed-large:335m", "mxbai-embed-large-335m"),
    ("BAAI/bge-small-en-v1.5", "bge-small-en-v1.5"),
    ("NOMIC-EMBED-TEXT", "nomic-embed-text-v1.5"),
])
def test_default_model_codes(model: str, code: str) -> None:
    assert default_model_code(model) == code


def test_explicit_model_code_names_the_index(make: Make) -> None:
    assert make(model="my-embedder", model_code="my-embedder-v2.1").model_code == "my-embedder-v2.1"
    with pytest.raises(ConfigError, match="cannot name an index file"):
        make(model_code="../escape")


@pytest.mark.parametrize(("options", "message"), [
    ({"model": None}, "needs a model name"),
    ({"model": "  "}, "needs a model name"),
    ({"url": "localhost:11434/v1"}, "not an http"),
    ({"timeout": "soon"}, "timeout must be a number"),
    ({"timeout": "0"}, "timeout must be at least"),
    ({"max_retries": "-1"}, "max_retries must be at least 0"),
    ({"batch_size": "2.5"}, "batch_size must be a whole number"),
    ({"modle": "x"}, "unknown option"),
])
def test_bad_options_are_config_errors(make: Make, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(**options)


def test_options_the_cli_passes_to_every_backend_are_accepted(make: Make) -> None:
    assert make(threads=4, url="http://127.0.0.1:9/v1/embeddings/").url == "http://127.0.0.1:9/v1"


def test_registered_under_openai(openai_server: FakeOpenAIServer) -> None:
    embedder = create_embedder("openai", url=openai_server.url, model="nomic-embed-text")
    assert isinstance(embedder, OpenAIEmbedder) and embedder.name == "openai"
    embedder.close()


# -- retries ------------------------------------------------------------------------------------


def test_retries_on_429_and_503_then_succeeds(
    make: Make, openai_server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    openai_server.enqueue(status=429)
    openai_server.enqueue(status=503)
    vectors = make(backoff=1, max_backoff=60).embed(["retry me"])
    assert vectors.shape == (1, 64)
    assert len(openai_server.requests) == 3 and openai_server.pending() == 0
    # Exponential with jitter: step 1 s then 2 s, each at least half its step.
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0


def test_backoff_is_capped(
    make: Make, openai_server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    for _ in range(4):
        openai_server.enqueue(status=500)
    make(backoff=1, max_backoff=1.5, max_retries=4).embed(["x"])
    assert len(sleeps) == 4 and max(sleeps) <= 1.5


def test_retry_after_is_honoured(
    make: Make, openai_server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    openai_server.enqueue(status=429, headers={"Retry-After": "7"})
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 20))
    openai_server.enqueue(status=503, headers={"Retry-After": date})
    make(backoff=0.001).embed(["x"])
    assert sleeps[0] == 7.0
    assert 15 <= sleeps[1] <= 21


def test_retry_after_beyond_max_backoff_fails_at_once(
    make: Make, openai_server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    openai_server.enqueue(status=429, headers={"Retry-After": "3600"})
    with pytest.raises(EmbeddingServiceError, match="asks to wait 3600 s") as info:
        make().embed(["x"])
    assert sleeps == [] and "max_backoff" in info.value.hint


def test_real_retries_stay_fast(openai_server: FakeOpenAIServer) -> None:
    embedder = OpenAIEmbedder(url=openai_server.url, model="m", backoff=0.01)
    openai_server.enqueue(status=502)
    openai_server.enqueue(disconnect=True)  # no reply at all: a dropped connection
    started = time.monotonic()
    assert embedder.embed(["x"]).shape == (1, 64)
    assert time.monotonic() - started < 2 and embedder.stats.retries == 2
    embedder.close()


def test_gives_up_after_max_retries(make: Make, openai_server: FakeOpenAIServer) -> None:
    for _ in range(3):
        openai_server.enqueue(status=503, json={"error": {"message": "model is loading"}})
    with pytest.raises(EmbeddingServiceError) as info:
        make(model="nomic-embed-text", max_retries=2).embed(["x"])
    error = info.value
    assert f"{openai_server.url}/embeddings" in error.message
    assert "'nomic-embed-text'" in error.message
    assert "HTTP 503: model is loading" in error.message and "3 attempts" in error.message
    assert "--embedder none" in error.hint and "--mode bm25" in error.hint
    assert len(openai_server.requests) == 3 and openai_server.pending() == 0


def test_max_retries_zero_tries_once(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(status=500)
    with pytest.raises(EmbeddingServiceError, match="after 1 attempt"):
        make(max_retries=0).embed(["x"])
    assert len(openai_server.requests) == 1


def test_connection_refused_is_a_clear_error(sleeps: list[float]) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    embedder = OpenAIEmbedder(url=url, model="nomic-embed-text", max_retries=1,
                              sleep=sleeps.append)
    with pytest.raises(EmbeddingServiceError) as info:
        embedder.embed(["x"])
    embedder.close()
    error = info.value
    assert f"{url}/embeddings" in error.message and "'nomic-embed-text'" in error.message
    assert "cannot connect" in error.message and "2 attempts" in error.message
    assert "ollama serve" in error.hint and "--embedder none" in error.hint
    assert len(sleeps) == 1


# -- failures that are not retried ---------------------------------------------------------------


def test_timeout(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(delay=5)
    started = time.monotonic()
    with pytest.raises(EmbeddingServiceError, match=r"no reply within 0\.3 s") as info:
        make(timeout="0.3").embed(["x"])
    assert time.monotonic() - started < 3
    assert "timeout" in info.value.hint and len(openai_server.requests) == 1


@pytest.mark.parametrize(("status", "key", "said"), [
    (401, "sk-wrong", "the API key was refused"),
    (403, None, "no API key was sent ($OPENAI_API_KEY is not set)"),
])
def test_auth_failures(
    make: Make, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
    status: int, key: str | None, said: str,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_server.enqueue(status=status, json={"error": {"message": "Incorrect API key"}})
    with pytest.raises(EmbeddingServiceError) as info:
        make(api_key=key).embed(["x"])
    assert f"HTTP {status}" in info.value.message and said in info.value.message
    assert "Incorrect API key" in info.value.message
    assert "$OPENAI_API_KEY" in info.value.hint and len(openai_server.requests) == 1


def test_unknown_model_404_names_the_fix(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(status=404, json={"error": 'model "nomic" not found, try pulling it'})
    with pytest.raises(EmbeddingServiceError, match='model "nomic" not found') as info:
        make(model="nomic").embed(["x"])
    assert "/v1" in info.value.hint and "ollama pull" in info.value.hint


def test_wrong_path_404(openai_server: FakeOpenAIServer) -> None:
    embedder = OpenAIEmbedder(url=openai_server.base, model="m")  # forgot the /v1
    with pytest.raises(EmbeddingServiceError, match="HTTP 404") as info:
        embedder.embed(["x"])
    embedder.close()
    assert f"{openai_server.base}/embeddings" in info.value.message


def test_redirect_is_not_followed(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(status=301, body="", headers={"Location": "https://example.test/v1"})
    with pytest.raises(EmbeddingServiceError, match=r"redirected to https://example\.test/v1"):
        make().embed(["x"])


def test_slow_reply_within_timeout(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(delay=0.2)
    assert make(timeout=5).embed(["x"]).shape == (1, 64)


def test_bad_request_shows_the_server_message(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(status=400, body="input too long")
    with pytest.raises(EmbeddingServiceError, match="HTTP 400: input too long"):
        make().embed(["x"])
    # A refusal of the text itself: the index skips that text instead of failing the batch.
    openai_server.enqueue(status=400, body="input too long")
    with pytest.raises(EmbeddingInputError):
        make().embed(["x"])
    openai_server.enqueue(status=400, body="unknown parameter: dimensions")
    with pytest.raises(EmbeddingServiceError) as refused:
        make().embed(["x"])
    assert not isinstance(refused.value, EmbeddingInputError)


@pytest.mark.parametrize(("reply", "message"), [
    ({"body": "<html>Welcome to nginx</html>"}, "not JSON"),
    ({"body": '{"data": [{"index": 0, "embedding": [0.1, 0.'}, "not JSON"),
    ({"body": ""}, "not JSON"),
    ({"json": {"result": []}}, "no `data` list"),
    ({"json": [1, 2]}, "no `data` list"),
    ({"json": {"data": "nope"}}, "no `data` list"),
    ({"json": {"error": "out of memory"}}, "reported an error: out of memory"),
    ({"json": {"data": [{"index": 0}]}}, "has no `embedding`"),
    ({"json": {"data": [{"index": 0, "embedding": ["a", "b"]}]}}, "not a list of numbers"),
    ({"json": {"data": [{"index": 0, "embedding": [True]}]}}, "not a list of numbers"),
    ({"json": {"data": [{"index": 0, "embedding": []}]}}, "shape"),
    ({"json": {"data": [{"index": 0, "embedding": "!!"}]}}, "not base64"),
    ({"json": {"data": [{"index": 0, "embedding": [math.nan, 1.0]}]}}, "NaN"),
    ({"json": {"data": [{"index": 5, "embedding": [1.0]}]}}, "not 0..n-1"),
])
def test_malformed_replies(
    make: Make, openai_server: FakeOpenAIServer, reply: dict[str, Any], message: str
) -> None:
    openai_server.enqueue(**reply)
    with pytest.raises(EmbeddingServiceError, match=message) as info:
        make().embed(["x"])
    assert openai_server.url in info.value.message
    assert len(openai_server.requests) == 1  # a nonsense answer is not retried


def test_ragged_vectors(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(json=embeddings_json([[1.0, 0.0], [1.0]]))
    with pytest.raises(EmbeddingServiceError, match=r"different sizes in one reply: \[1, 2\]"):
        make().embed(["a", "b"])


def test_wrong_count(make: Make, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(json=embeddings_json([[1.0, 0.0]]))
    with pytest.raises(EmbeddingServiceError, match="sent 2 texts but got 1 embeddings"):
        make().embed(["a", "b"])


def test_dimension_change_between_calls(make: Make, openai_server: FakeOpenAIServer) -> None:
    embedder = make()
    embedder.embed(["first"])
    openai_server.dim = 32  # someone swapped the model behind the same name
    with pytest.raises(EmbeddingServiceError, match="32 dimensions, expected 64"):
        embedder.embed(["second"])


def test_dimension_change_within_one_embed_call(
    make: Make, openai_server: FakeOpenAIServer
) -> None:
    openai_server.enqueue(json=embeddings_json([[1.0, 0.0]]))
    openai_server.enqueue(json=embeddings_json([[1.0, 0.0, 0.0]]))
    with pytest.raises(EmbeddingServiceError, match=r"mixed vector sizes \[2, 3\]"):
        make(batch_size=1).embed(["a", "b"])


# -- end to end ---------------------------------------------------------------------------------


def test_store_on_openai_backend(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    options = {"url": openai_server.url, "model": "nomic-embed-text", "max_retries": 0}
    deepfield.init(tmp_path / "store", EmbeddingConfig("openai", options))
    store = deepfield.open(tmp_path / "store")  # backend built from deepfield.toml
    embedder = store.embedder
    assert isinstance(embedder, OpenAIEmbedder)
    try:
        notes = store.create_field("notes")
        notes.add("Carbon fibre woks", "Carbon fibre woks heat unevenly on induction hobs.")
        notes.add("Sourdough", "Feed the sourdough starter twice a day with rye flour.")
        notes.add("Bicycle chain", "Clean the bicycle chain with degreaser, then oil it.")
        notes.index()
        assert (notes.path / "nomic-embed-text-v1.5.sqlite3").is_file()
        for mode in ("vector", "hybrid"):
            response = notes.search("sourdough starter rye", mode=mode)
            assert response.results[0].title == "Sourdough", mode
            assert response.pending_vectors == 0
    finally:
        store.close()
        embedder.close()
    inputs = [text for r in openai_server.requests_to() for text in r.json["input"]]
    assert any(t.startswith("search_document: ") and "rye flour" in t for t in inputs)
    assert "search_query: sourdough starter rye" in inputs
    assert embedder.stats.requests == len(openai_server.requests)


def test_injected_transport_needs_no_server() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.0, 2.0]}]})

    embedder = OpenAIEmbedder(url="http://embed.internal/v1", model="m",
                              transport=httpx.MockTransport(handler))
    assert np.allclose(embedder.embed(["x"]), [[0.0, 1.0]])
    assert str(seen[0].url) == "http://embed.internal/v1/embeddings"
    embedder.close()


# -- the fake server itself (shared with other tests) -------------------------------------------


def test_fake_server_scripts_any_path(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(fake_openai.CHAT, json=fake_openai.chat_completion("hello"))
    with httpx.Client(base_url=openai_server.url) as client:
        chat = client.post("/chat/completions", json={"model": "c", "messages": []})
        missing = client.post("/chat/completions", json={})
        models = client.get("/models", headers={"X-Test": "1"})
        bad = client.post("/embeddings", content=b"not json")
    assert chat.json()["choices"][0]["message"]["content"] == "hello"
    assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]
    assert models.json()["data"] == [] and openai_server.requests[2].headers["x-test"] == "1"
    assert bad.status_code == 400 and openai_server.requests[3].json is None
    assert [r.path for r in openai_server.requests_to(fake_openai.CHAT)] == [fake_openai.CHAT] * 2
