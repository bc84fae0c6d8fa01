"""Stores named by a URL instead of a folder (``s3://bucket/prefix``): one opener per scheme.

:func:`deepfield.open` and :func:`deepfield.init` look the scheme up here, so the store layer
never imports the code of a particular kind of store (the bucket code, boto3) and another
kind can be added without changing it::

    class MyOpener(deepfield.StoreOpener):
        def open(self, url, *, create, embedder): ...      # a Store
        def init(self, url, embedding): ...                # a Store, started if missing

    deepfield.register_store_opener("mine", MyOpener())    # mine://… now opens

Built-ins are listed by module path, as embedders' are (embed/base.py), and imported only
when a store of that scheme is opened: a folder store never loads bucket code.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from .errors import ConfigError, StoreNotFoundError

if TYPE_CHECKING:
    from .config import EmbeddingConfig
    from .embed.base import Embedder
    from .store import Store

_BUILTIN = {"s3": "deepfield.bucket.store:BUCKET_OPENER"}
"""Built-in schemes: where each one's opener is (``module:attribute``), imported on first use."""
_registered: dict[str, StoreOpener] = {}
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]+$")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
"""A URL's scheme: two characters at least, so a Windows drive (``C://x``) stays a path."""


class StoreOpener(ABC):
    """Opens and starts the stores of one URL scheme; registered with
    :func:`register_store_opener`."""

    @abstractmethod
    def open(self, url: str, *, create: bool, embedder: Embedder | str | None) -> Store:
        """The store at ``url`` (``create``: started if missing); ``embedder`` as in
        :func:`deepfield.open`."""

    @abstractmethod
    def init(self, url: str, embedding: EmbeddingConfig | None) -> Store:
        """The store at ``url``, started with ``embedding`` (None: the default) if missing."""


def register_store_opener(scheme: str, opener: StoreOpener, *, replace: bool = False) -> None:
    """Open ``scheme://…`` stores with ``opener`` in this process. A scheme already taken (a
    built-in, an earlier registration) is ConfigError unless ``replace`` is True; so are a
    scheme that is not lowercase letters, digits, ``+``, ``.``, ``-`` and an opener that is
    not a :class:`StoreOpener`."""
    if not isinstance(scheme, str) or not _SCHEME.match(scheme):
        raise ConfigError(f"{scheme!r} is not a URL scheme a store can be opened by",
                          "use two or more lowercase letters, digits, '+', '.' or '-', e.g. 'mine'")
    if not isinstance(opener, StoreOpener):
        raise ConfigError(f"the opener for {scheme}:// must be a StoreOpener, not a value of "
                          f"type {type(opener).__name__}",
                          "subclass deepfield.StoreOpener and register an instance of it")
    current = _registered.get(scheme)
    if not replace and opener is not current and (current is not None or scheme in _BUILTIN):
        raise ConfigError(f"a store opener for {scheme}:// is already registered",
                          "choose another scheme, or pass replace=True to replace it on purpose")
    _registered[scheme] = opener


def store_schemes() -> list[str]:
    """Every scheme a store can be opened by (built-ins and registrations)."""
    return sorted({*_BUILTIN, *_registered})


def url_scheme(path: object) -> str | None:
    """The scheme of ``path`` when it is a URL string (``s3``), lowercased; None for a path."""
    found = _URL.match(path) if isinstance(path, str) else None
    return found.group(1).lower() if found else None


def normal_url(url: str) -> str:
    """``url`` with its scheme lowercased (``S3://b/p`` is ``s3://b/p``: openers compare it)."""
    scheme = url_scheme(url)
    return scheme + url[len(scheme):] if scheme is not None else url


def store_opener(url: str) -> StoreOpener:
    """The opener for ``url``'s scheme; StoreNotFoundError naming the known ones if none."""
    scheme = url_scheme(url) or ""
    opener = _registered.get(scheme)
    if opener is None and scheme in _BUILTIN:
        module, _, attr = _BUILTIN[scheme].partition(":")
        opener = _registered[scheme] = getattr(importlib.import_module(module), attr)
    if opener is None:
        known = ", ".join(f"{s}://" for s in store_schemes())
        raise StoreNotFoundError(
            f"no store can be opened from a {scheme}:// URL (known schemes: {known})",
            "give a store folder or a URL of a known scheme (a module adds one with "
            "deepfield.register_store_opener)")
    return opener
