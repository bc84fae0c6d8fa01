"""LangChain, LlamaIndex and LangGraph adapters, offline, against each framework's own base
classes (with every socket to another host refused, so nothing is downloaded)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever as LangChainRetriever
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchItem
from llama_index.core.base.base_retriever import BaseRetriever as LlamaRetriever
from llama_index.core.schema import NodeWithScore

import deepfield
from deepfield.errors import DeepfieldError, UnknownFieldError
from deepfield.integrations.langchain import DeepfieldRetriever
from deepfield.integrations.langgraph import DeepfieldStore, field_name
from deepfield.integrations.llamaindex import DeepfieldLlamaRetriever

from .fakes import FakeEmbedder

WOKS = "# Woks\n\n## Heat\n\nCarbon fibre woks conduct heat unevenly.\n\n## Care\n\nOil them.\n"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse, and fail the test for, any connection to another host (a model hub, NLTK's or
    tiktoken's servers): a library that swallows the refusal is still caught."""
    connect = socket.socket.connect
    attempts: list[Any] = []

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and \
                not host.startswith("/"):
            attempts.append(address)
            raise ConnectionRefusedError(f"offline test: no connection to {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield
    assert attempts == [], f"the test tried to reach {attempts}"


@pytest.fixture
def notes(store: deepfield.Store) -> Iterator[deepfield.Store]:
    field = store.create_field("notes")
    field.write(WOKS, name="woks")
    field.add("Kettles", "Stovetop kettles whistle when the water boils.", name="kettles")
    store.create_field("other").add("Bikes", "Carbon fibre frames are light.", name="bikes")
    yield store


def test_langchain_retriever(notes: deepfield.Store) -> None:
    retriever = DeepfieldRetriever.from_store(notes, fields=["notes"], k=2)
    assert isinstance(retriever, LangChainRetriever)
    docs = retriever.invoke("carbon fibre heat")
    assert docs and all(isinstance(d, Document) for d in docs)
    best = docs[0]
    assert "conduct heat unevenly" in best.page_content
    assert best.metadata["source"] == "memoryfield://notes/woks.md"
    assert best.metadata["field"] == "notes" and best.metadata["line_start"] >= 1
    assert {d.metadata["field"] for d in DeepfieldRetriever.from_store(
        notes, k=5).invoke("carbon fibre")} == {"notes", "other"}  # every field by default
    chunks = DeepfieldRetriever.from_store(notes, "notes", unit="chunk", mode="bm25").invoke(
        "oil")
    assert chunks[0].page_content.strip().endswith("Oil them.")
    assert asyncio.run(retriever.ainvoke("kettle"))[0].metadata["filename"] == "kettles.md"
    with pytest.raises(UnknownFieldError, match="no field 'nope'") as caught:
        DeepfieldRetriever.from_store(notes, fields=["nope"])
    assert "notes" in caught.value.hint  # it names the fields there are
    late = DeepfieldRetriever(store=notes, fields=["gone"])  # made without the check
    with pytest.raises(UnknownFieldError):
        late.invoke("x")
    with pytest.raises(DeepfieldError, match="unknown mode"):
        DeepfieldRetriever.from_store(notes, mode="fuzzy")
    with pytest.raises(UnknownFieldError, match="no fields given") as caught:
        DeepfieldRetriever.from_store(notes, fields=[])  # said "the store has no fields yet"
    assert "notes" in caught.value.hint


@pytest.mark.parametrize("make", [
    lambda s: DeepfieldRetriever(store=s, feilds=["other"]),
    lambda s: DeepfieldRetriever.from_store(s, top_k=1),
])
def test_langchain_retriever_refuses_unknown_options(notes: deepfield.Store, make: Any) -> None:
    with pytest.raises(DeepfieldError, match=r"has no option '(feilds|top_k)'") as caught:
        make(notes)  # it used to be ignored: every field searched, 5 hits
    assert "fields" in caught.value.hint and "\n" not in str(caught.value)


@pytest.mark.parametrize("k", ["5", 0, 101, 2.5, True, None])
def test_langchain_retriever_checks_the_type_of_k(notes: deepfield.Store, k: Any) -> None:
    with pytest.raises(DeepfieldError, match="k must be a whole number from 1 to 100"):
        DeepfieldRetriever.from_store(notes, k=k)
    with pytest.raises(DeepfieldError, match="k must be a whole number"):
        DeepfieldLlamaRetriever(notes, k=k)


def test_llamaindex_retriever(notes: deepfield.Store) -> None:
    retriever = DeepfieldLlamaRetriever(notes, fields="notes", k=2)
    assert isinstance(retriever, LlamaRetriever)
    nodes = retriever.retrieve("carbon fibre heat")
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    assert "conduct heat unevenly" in nodes[0].node.get_content()
    assert nodes[0].node.metadata["source"] == "memoryfield://notes/woks.md"
    assert nodes[0].score is not None and nodes[0].score > 0
    assert asyncio.run(retriever.aretrieve("kettle"))[0].node.metadata["title"] == "Kettles"
    with pytest.raises(UnknownFieldError):
        DeepfieldLlamaRetriever(notes, fields=["nope"])


def test_langgraph_store_put_get_search_delete(store: deepfield.Store) -> None:
    memory = DeepfieldStore(store)
    assert isinstance(memory, BaseStore)
    alice = ("memories", "alice")
    value = {"text": "Alice takes her coffee black.", "tags": ["drinks"], "stars": 5,
             "since": "2024-01-02", "yes": "no", "nested": {"a": None, "b": [1.5, True]}}
    memory.put(alice, "coffee", value)
    memory.put(alice, "bike", {"text": "Alice rides a carbon fibre bike.", "stars": 3})
    memory.put(("memories", "Bob Smith"), "coffee", {"text": "Bob drinks oat flat whites."})
    item = memory.get(alice, "coffee")
    assert item is not None and item.value == value  # the value comes back exactly
    assert item.key == "coffee" and item.namespace == alice
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    assert "memories-alice" in store.field_names()
    bob_field = field_name(("memories", "Bob Smith"))
    assert bob_field.startswith("memories-bob-smith-") and bob_field in store.field_names()
    found = memory.search(alice, query="what does alice drink? coffee")
    assert found[0].key == "coffee" and isinstance(found[0], SearchItem) and found[0].score
    assert [i.key for i in memory.search(("memories",), query="coffee", limit=5)][:2] and \
        {i.namespace for i in memory.search(("memories",), query="coffee")} == \
        {alice, ("memories", "Bob Smith")}
    assert [i.key for i in memory.search(alice, filter={"stars": {"$gte": 4}})] == ["coffee"]
    assert [i.key for i in memory.search(alice, filter={"text": "nope"})] == []
    assert len(memory.search(alice, limit=1, offset=1)) == 1
    assert set(memory.list_namespaces(prefix=("memories",))) == {alice,
                                                                   ("memories", "Bob Smith")}
    assert memory.list_namespaces(max_depth=1) == [("memories",)]
    memory.put(alice, "coffee", {"text": "Alice now takes oat milk."})  # replaces, same page
    assert memory.get(alice, "coffee").value == {"text": "Alice now takes oat milk."}
    assert len(store.field("memories-alice").pages()) == 2
    memory.delete(alice, "coffee")
    assert memory.get(alice, "coffee") is None
    # archived, not destroyed: the version the put replaced, and the deleted page
    assert len(store.field("memories-alice").archived()) == 2
    assert memory.get(("memories", "carol"), "x") is None and memory.search(("nobody",)) == []
    with pytest.raises(InvalidNamespaceError):
        memory.batch([PutOp(("a.b",), "k", {"v": 1})])
    with pytest.raises(DeepfieldError, match="JSON-like"):
        memory.put(alice, "bad", {"when": object()})


def test_langgraph_batch_async_and_fixed_fields(store: deepfield.Store) -> None:
    memory = DeepfieldStore(store)
    results = asyncio.run(memory.abatch([PutOp(("prefs",), "tea", {"text": "Green tea."}),
                                         GetOp(("prefs",), "tea")]))
    assert results[0] is None and results[1].value == {"text": "Green tea."}
    store.create_field("notes").write(WOKS, name="woks")  # a field written some other way
    page_item = memory.get(("notes",), "woks")
    assert page_item is not None and page_item.value["title"] == "Woks"
    fixed = DeepfieldStore(store, create_fields=False)
    assert fixed.get(("prefs",), "tea") is not None
    with pytest.raises(UnknownFieldError, match="no field 'missing'") as caught:
        fixed.put(("missing",), "k", {"v": 1})
    assert caught.value.hint == "fields: notes, prefs"  # it names the fields there are
    with pytest.raises(UnknownFieldError) as caught:
        fixed.search(("missing",), query="x")
    assert caught.value.hint == "fields: notes, prefs"
    fixed.put(("prefs",), "coffee", {"text": "Black."})
    assert fixed.get(("prefs",), "coffee.md") is None  # a page's file name is not its key
    store.create_field("memories-alice")
    DeepfieldStore(store).put(("memories", "alice"), "k", {"text": "x"})
    assert [i.key for i in fixed.search(("memories",))] == ["k"]  # a namespace prefix is fine


def test_langgraph_get_never_returns_another_key(store: deepfield.Store) -> None:
    memory = DeepfieldStore(store)
    memory.put(("prefs",), "tea", {"text": "Green tea."})
    memory.put(("prefs",), "Two Words", {"text": "Its page is named two-words-<hash>."})
    notes = store.create_field("notes")
    notes.add("Bare", "A page written some other way.", name="bare")
    bare_uuid = notes.pages()[0].uuid
    tea_uuid = store.field("prefs").load("tea")[1].uuid
    assert bare_uuid and tea_uuid
    assert memory.get(("notes",), "bare").key == "bare"  # (its page name is its key)
    assert memory.get(("prefs",), "tea").key == "tea"
    for namespace, key in ((("notes",), bare_uuid[:8]), (("notes",), bare_uuid),
                           (("notes",), "BARE"), (("prefs",), tea_uuid[:8]),
                           (("prefs",), next(n for n in store.field("prefs").pages()
                                         if n.filename != "tea.md").filename[:-3])):
        assert memory.get(namespace, key) is None, key  # it found the page by uuid or name


def test_langgraph_concurrent_async_ops_all_succeed(store: deepfield.Store,
                                                    embedder: FakeEmbedder) -> None:
    """LangGraph runs parallel branches at once: abatch calls share one deepfield Store (and
    its SQLite handles), which used to fail with raw sqlite3 errors and lose puts."""
    embedder.seconds_per_text = 0.002  # (a slow model widens the window for the race)
    memory = DeepfieldStore(store)

    async def round_of(n: int) -> list[Any]:
        ops = [memory.aput(("mem", "u"), f"k{n}-{i}", {"text": f"wok fact {n} {i}"})
               for i in range(10)]
        ops += [memory.asearch(("mem",), query="wok fact") for _ in range(10)]
        return await asyncio.gather(*ops, return_exceptions=True)

    for n in range(4):
        results = asyncio.run(round_of(n))
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert len(memory.search(("mem", "u"), limit=1000)) == 10 * (n + 1)  # no put lost


def test_langgraph_query_search_pages_past_100_and_filters_before_cutting(
        keyword_store: deepfield.Store) -> None:
    memory = DeepfieldStore(keyword_store)
    memory.batch([PutOp(("docs",), f"k{i}", {"text": f"apple note number {i}", "n": i})
                  for i in range(120)])
    assert len(memory.search(("docs",), query="apple", limit=200)) == 120  # (was capped at 100)
    assert len(memory.search(("docs",), query="apple", offset=100, limit=10)) == 10
    # the one match ranks anywhere among 120 hits: the filter applies before the cut
    found = memory.search(("docs",), query="apple", filter={"text": "apple note number 119"},
                          limit=1)
    assert [item.key for item in found] == ["k119"]
    high = memory.search(("docs",), query="apple", filter={"n": {"$gte": 110}}, limit=20)
    assert sorted(item.value["n"] for item in high) == list(range(110, 120))
    assert memory.search(("docs",), query="apple", filter={"n": -1}) == []


@pytest.mark.parametrize("prefix", ["", "lg"])
def test_langgraph_namespace_keeps_its_labels_once_empty(keyword_store: deepfield.Store,
                                                         prefix: str) -> None:
    memory = DeepfieldStore(keyword_store, prefix=prefix)
    alice, bob = ("memories", "alice"), ("memories", "Bob Smith")
    memory.put(alice, "k1", {"text": "x"})
    memory.put(bob, "k1", {"text": "y"})
    memory.delete(alice, "k1")
    memory.delete(bob, "k1")
    # it used to come back as ("memories-alice",), which search(("memories",)) does not match
    assert memory.list_namespaces() == [bob, alice]  # (sorted)
    assert memory.list_namespaces(prefix=("memories",)) == [bob, alice]
    assert memory.search(("memories",)) == []
    if prefix:  # another prefix's store does not claim these empty fields
        assert DeepfieldStore(keyword_store, prefix="other").list_namespaces() == []
    memory.put(alice, "k2", {"text": "z"})
    assert [(i.namespace, i.key) for i in memory.search(("memories",))] == [(alice, "k2")]


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("memory_tool", "anthropic", "anthropic"), ("langchain", "langchain_core", "langchain"),
    ("llamaindex", "llama_index", "llamaindex"), ("langgraph", "langgraph", "langgraph")])
def test_a_missing_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, module: str,
                                                framework: str, extra: str) -> None:
    import importlib
    import sys

    for name in [n for n in sys.modules if n == framework or n.startswith(framework + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the package were not installed
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, f"deepfield.integrations.{module}", raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'deepfield\[{extra}\]'"):
        importlib.import_module(f"deepfield.integrations.{module}")
