"""A LangGraph ``BaseStore`` kept in deepfield fields (``pip install 'deepfield[langgraph]'``).

    from deepfield.integrations.langgraph import DeepfieldStore

    memory = DeepfieldStore(deepfield.open("memory", create=True))
    memory.put(("memories", "alice"), "coffee", {"text": "Alice takes her coffee black."})
    memory.search(("memories", "alice"), query="what does Alice drink?")
    graph = builder.compile(store=memory)

Each namespace is a field (``("memories", "alice")`` → ``memories-alice``; labels that are not
already field-name material get a short hash so two namespaces never share a field) and each
item a page: the value is kept exactly in the frontmatter (``langgraph: {namespace, key,
value}``) and its text in the body, where deepfield indexes it, so ``search(query=...)`` is
deepfield's hybrid search. ``index=[paths]`` on ``put`` picks the value's fields that go into
the body (``index=False``: none). Deleting archives the page. A field that was not written
through this store is a namespace too: its pages read as items keyed by page name. Items carry
no TTL (``supports_ttl`` is False).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import re
import threading
import uuid as uuidlib
from collections.abc import Iterable
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(f"{__name__} needs langgraph: "
                      "pip install 'deepfield[langgraph]'") from exc

from ..errors import DeepfieldError, PageNotFoundError, UnknownFieldError
from ..field import Field
from ..page import MAX_NAME_LENGTH, Page, is_valid_name, slugify
from ..search import search_fields
from ..store import Store
from ._common import fields_hint
from .langgraph_filters import matches

__all__ = ["DeepfieldStore", "field_name"]

KEY = "langgraph"
_UUIDS = uuidlib.UUID("7d1e5b8a-3c2f-4e6a-9b1d-5f0a8c2e4d17")
_INTRO_TEXT = "LangGraph store namespace"
_INTRO = re.compile(re.escape(_INTRO_TEXT) + r" (\[.*\])\.\s*$", re.MULTILINE)


def field_name(namespace: tuple[str, ...], prefix: str = "") -> str:
    """The field holding ``namespace``: its labels joined by ``-``, plus a hash of the exact
    namespace whenever a label had to change to make a field name."""
    labels = [prefix, *namespace] if prefix else list(namespace)
    plain = "-".join(labels)
    if is_valid_name(plain) and "--" not in plain and len(plain) <= MAX_NAME_LENGTH:
        return plain
    digest = hashlib.sha256(json.dumps(labels).encode()).hexdigest()[:8]
    base = slugify("-".join(labels), max_len=MAX_NAME_LENGTH - 9) or "ns"
    return f"{base}-{digest}"


def _page_name(key: str) -> str:
    if is_valid_name(key) and len(key) <= 100:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{slugify(key, max_len=90) or 'item'}-{digest}"


def _item_uuid(namespace: tuple[str, ...], key: str) -> str:
    return str(uuidlib.uuid5(_UUIDS, json.dumps([list(namespace), key])))


def _texts(value: Any, paths: list[str] | None) -> list[str]:
    """The text of ``value`` worth indexing: every string in it, or those at ``paths``."""
    if paths is not None:
        out = []
        for path in paths:
            node: Any = value
            for part in re.split(r"\.|\[\*\]", path):
                if part and isinstance(node, dict):
                    node = node.get(part)
            out += _texts(node, None)
        return out
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item, None)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item, None)]
    return []


def _when(text: Any) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


class DeepfieldStore(BaseStore):
    """LangGraph's long-term memory store over the fields of ``store``.

    ``prefix`` is put before every field name (``prefix="lg"``: ``lg-memories-alice``).
    ``create_fields=False`` makes a namespace whose field does not exist an error
    (:class:`~deepfield.errors.UnknownFieldError`) for every operation, instead of an empty
    namespace that ``put`` creates."""

    def __init__(self, store: Store, *, prefix: str = "", create_fields: bool = True) -> None:
        self.store = store
        self.prefix = prefix
        self.create_fields = create_fields
        # One Store shares its SQLite connections between threads, and a connection runs one
        # transaction at a time: abatch (parallel graph branches) and threads calling batch
        # take turns here, else they fail with sqlite3 errors and lose writes.
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ batch

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        with self._lock:
            return self._batch(list(ops))

    def _batch(self, ops: list[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)  # ops given to batch() directly skip BaseStore's checks
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise DeepfieldError(f"unknown LangGraph store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # deepfield's calls block on files and SQLite: run them off the event loop.
        return await asyncio.to_thread(self.batch, list(ops))

    # ------------------------------------------------------------------ fields

    def _field(self, namespace: tuple[str, ...], *, create: bool) -> Field | None:
        name = field_name(tuple(namespace), self.prefix)
        known = self.store.field_names()
        if name in known:
            return self.store.field(name)
        if not self.create_fields:
            raise UnknownFieldError(f"no field {name!r} (namespace {list(namespace)}) in the "
                                    f"store at {self.store.root}", fields_hint(known))
        if not create:
            return None
        return self.store.create_field(
            name, intro=f"{_INTRO_TEXT} {json.dumps(list(namespace))}.", exist_ok=True)

    def _namespace_of(self, field: Field) -> tuple[str, ...] | None:
        # The intro this store wrote names the namespace even once every item is deleted
        # (without it, ("memories", "alice") came back as ("memories-alice",)).
        named = _INTRO.search(field.intro() or "")
        if named:
            try:
                labels = json.loads(named.group(1))
            except ValueError:
                labels = None
            if isinstance(labels, list) and labels and all(isinstance(x, str) for x in labels) \
                    and field_name(tuple(labels), self.prefix) == field.name:
                return tuple(labels)
        for doc in field.pages():
            meta = (doc.frontmatter or {}).get(KEY)
            if isinstance(meta, dict) and isinstance(meta.get("namespace"), list):
                return tuple(str(label) for label in meta["namespace"])
        if self.prefix and not field.name.startswith(self.prefix + "-"):
            return None
        return (field.name.removeprefix(self.prefix + "-") if self.prefix else field.name,)

    # ------------------------------------------------------------------ operations

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        field = self._field(namespace, create=False)
        if field is None:
            return None
        try:
            filename, page = field.load(_item_uuid(namespace, key))
        except PageNotFoundError:
            try:  # a page written some other way, named like the key
                filename, page = field.load(key)
            except DeepfieldError:
                return None
            # load() also resolves uuids, their prefixes and other spellings of a name: only
            # the page whose file is exactly KEY.md is this key's, and only if no item owns it.
            if filename != f"{key}.md" or page.get(KEY) is not None:
                return None
        item: Item = self._item(Item, namespace, filename, page)
        return item if item.key == key else None  # never another key's item

    def _item(self, cls: type[Any], namespace: tuple[str, ...], filename: str, page: Page,
              **extra: Any) -> Any:
        meta = page.get(KEY)
        if isinstance(meta, dict) and isinstance(meta.get("value"), dict):
            key, value = str(meta.get("key")), dict(meta["value"])
        else:
            key = filename[:-3]
            value = {"title": page.title or key, "summary": page.summary, "text": page.body}
        return cls(namespace=tuple(namespace), key=key, value=value,
                   created_at=_when(page.get("created")), updated_at=_when(page.get("updated")),
                   **extra)

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            self._delete(op.namespace, op.key)
            return
        value = dict(op.value)
        try:  # kept in YAML frontmatter: JSON-like values only, checked before the field is made
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise DeepfieldError(f"cannot store the value of {op.key!r}: {exc}",
                                 "values must be JSON-like: dicts, lists, strings, finite "
                                 "numbers, booleans and None") from None
        field = self._field(op.namespace, create=True)
        assert field is not None
        paths = None if op.index is None else (op.index or [])
        body = "\n\n".join(_texts(value, paths)).strip()
        page = Page(body=f"# {op.key}\n\n{body}\n" if body else f"# {op.key}\n", frontmatter={})
        page.set("title", op.key)
        page.set("uuid", _item_uuid(op.namespace, op.key))
        page.set(KEY, {"namespace": list(op.namespace), "key": op.key, "value": value})
        field.write(page, name=None if self._exists(field, op) else self._free(field, op.key),
                    split=False, review=False)

    def _exists(self, field: Field, op: PutOp) -> bool:
        try:
            field.resolve(_item_uuid(op.namespace, op.key))
        except PageNotFoundError:
            return False
        return True

    def _free(self, field: Field, key: str) -> str:
        base = _page_name(key)
        stem, count = base, 2
        while (field.path / f"{stem}.md").exists():
            stem = f"{base}-{count}"
            count += 1
        return stem

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        field = self._field(namespace, create=False)
        if field is None:
            return
        try:
            field.archive_page(_item_uuid(namespace, key))  # deepfield never deletes a page
        except PageNotFoundError:
            return

    def _fields_under(self, prefix: tuple[str, ...]) -> list[tuple[Field, tuple[str, ...]]]:
        out = []
        for name in self.store.field_names():
            field = self.store.field(name)
            namespace = self._namespace_of(field)
            if namespace is not None and namespace[: len(prefix)] == tuple(prefix):
                out.append((field, namespace))
        if not out and prefix and not self.create_fields:
            raise UnknownFieldError(f"no field holds namespace {list(prefix)} (or one below "
                                    f"it) in the store at {self.store.root}",
                                    fields_hint(self.store.field_names()))
        return out

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found = self._fields_under(tuple(op.namespace_prefix))
        if not found:
            return []
        wanted = op.offset + op.limit
        items: list[SearchItem] = []
        if op.query:
            return self._ranked(op, found)[op.offset: wanted]
        for field, namespace in found:
            for doc in field.pages():
                filename, page = field.load(doc.filename)
                items.append(self._item(SearchItem, namespace, filename, page))
        items.sort(key=lambda item: item.updated_at, reverse=True)
        if op.filter:
            items = [item for item in items if matches(item.value, op.filter)]
        return items[op.offset: wanted]

    def _ranked(self, op: SearchOp, found: list[tuple[Field, tuple[str, ...]]]
                ) -> list[SearchItem]:
        """The best ``offset + limit`` items for the query that pass the filter. The filter
        reads values, which the index does not hold: search deeper until enough hits pass it
        or the hits run out, so a match ranked below the first top-k is still found."""
        namespaces = {field.name: namespace for field, namespace in found}
        fields = [field for field, _ in found]
        wanted = op.offset + op.limit
        k = max(1, wanted * (4 if op.filter else 1))
        loaded: dict[tuple[str, str], tuple[str, Page]] = {}  # pages read by a shallower pass
        while True:
            hits = search_fields(fields, op.query or "", k=k).results
            items = []
            for hit in hits:
                where = hit.field, hit.filename
                if where not in loaded:
                    loaded[where] = self.store.field(hit.field).load(hit.filename)
                filename, page = loaded[where]
                item = self._item(SearchItem, namespaces[hit.field], filename, page,
                                  score=hit.score)
                if not op.filter or matches(item.value, op.filter):
                    items.append(item)
            if len(items) >= wanted or len(hits) < k:
                return items
            k *= 4

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = {namespace for _field, namespace in self._fields_under(())}
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            namespaces = {ns for ns in namespaces if len(ns) >= len(path) and all(
                want in ("*", have) for want, have in zip(
                    path, ns[: len(path)] if condition.match_type == "prefix"
                    else ns[len(ns) - len(path):], strict=True))}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset: op.offset + op.limit]
