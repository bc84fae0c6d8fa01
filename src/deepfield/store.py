"""A store: a folder of fields plus ``deepfield.toml``. The entry point of the Python API.

    store = deepfield.open("memory", create=True)
    notes = store.create_field("notes")
    notes.add("Carbon fibre woks", "They heat unevenly …")
    store.search("wok heat").results
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import (
    CONFIG_FILE,
    EmbeddingConfig,
    StoreConfig,
    check_default_options,
    load_config,
    render_config,
    resolve_options,
)
from .debris import clean
from .domains.atomic import Filters
from .embed.base import NO_EMBEDDER, Embedder, create_embedder
from .errors import (
    BudgetError,
    ConfigError,
    DeepfieldError,
    FieldExistsError,
    InvalidNameError,
    StoreError,
    StoreNotFoundError,
    UnknownFieldError,
)
from .field import Field
from .fsutil import atomic_write, storage_errors
from .gitignore import write_gitignore
from .page import INTRO_FILE, check_name, is_valid_name, require_field_name, slugify
from .page_text import check_text, require_text
from .search import SearchResponse, search_fields
from .store_openers import normal_url, store_opener, url_scheme
from .writer import MAX_WRITE_BYTES

if TYPE_CHECKING:
    from .llm.base import ChatModel
    from .research.result import ResearchResult

RESERVED_FIELD_NAMES = {"ui": "the memory console"}
"""Top-level paths of the HTTP server (deepfield.server.app) that are not fields: a field of
such a name could be created but never reached over HTTP (``/ui/…`` is the console's)."""


def check_field_name(name: str) -> str:
    """``name`` if it can name a new field (a spec name the HTTP server can reach), else
    InvalidNameError."""
    stem = check_name(name, "field")
    if stem in RESERVED_FIELD_NAMES:
        raise InvalidNameError(
            f"field name {stem!r} is reserved: the HTTP server's /{stem}/ is "
            f"{RESERVED_FIELD_NAMES[stem]}",
            f"choose another name, e.g. `{stem}-notes`",
        )
    return stem


def skipped_folder(name: str) -> str:
    """The warning for a store's sub-folder ``name`` that is no field's name."""
    to = f" (e.g. to {slugify(name)!r})" if slugify(name) else ""
    return (f"skipped folder {name!r}: not a field name (lowercase letters, digits and "
            f"hyphens, a letter or digit at each end); rename it{to} to use it as a field")


def intro_page(name: str, intro: object) -> bytes | None:
    """The ``index.md`` of a new field ``name`` introduced by ``intro`` (None: no intro, or a
    blank one); InvalidPageError for an intro that is not text a page can hold."""
    if intro is None:
        return None
    text = require_text(intro, "the introduction")
    if not text.strip():
        return None
    check_text(text.encode("utf-8"), "the introduction", MAX_WRITE_BYTES)
    text = text if text.lstrip().startswith("#") else f"# {name}\n\n{text}"
    return (text.rstrip("\n") + "\n").encode("utf-8")


class Store:
    """A folder whose sub-folders are fields. Use :func:`open` to get one."""

    def __init__(self, root: Path, config: StoreConfig, embedder: Embedder | None) -> None:
        self.root = root
        self.config = config
        self.embedder = embedder
        self._fields: dict[str, Field] = {}

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def field_names(self) -> list[str]:
        """Names of the fields: sub-folders named as the spec names fields, not hidden and
        not deepfield's own (a folder "Bad Name" is none: :meth:`skipped_folders`)."""
        return sorted(name for name in self._folders() if is_valid_name(name))

    def skipped_folders(self) -> list[str]:
        """A warning for each sub-folder not taken as a field because of its name (it was
        listed, searched, and had an index and listing.md written into it)."""
        return [skipped_folder(name) for name in self._folders() if not is_valid_name(name)]

    def _folders(self) -> list[str]:
        """The sub-folders that may be fields, by name (a bucket store lists its own)."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and p.name[0] not in "._")

    def fields(self) -> list[Field]:
        return [self.field(name) for name in self.field_names()]

    def opened(self) -> list[Field]:
        """The fields this Store has opened so far."""
        return list(self._fields.values())

    def field(self, name: str) -> Field:
        """The field called ``name``; raises UnknownFieldError if there is none."""
        require_field_name(name)
        if name in self._fields:
            if _is_folder(self._fields[name].path):
                return self._fields[name]
            # Removed on disk since it was opened: writes through the old handle failed with
            # a bare FileNotFoundError; it is now as unknown as a field never made.
            self.forget_field(name)
        folder = self.root / name
        if not is_valid_name(name) and _is_folder(folder):  # "Bad Name" is no field
            check_name(name, "field")  # its message and hint; "x.md" passes it, yet is none
            raise InvalidNameError(f"field name {name!r} is not a spec name")
        if "/" in name or name.startswith(".") or not _is_folder(folder):
            known = ", ".join(self.field_names()) or "none yet"
            raise UnknownFieldError(f"no field {name!r} in store {self.root} (fields: {known})")
        field = self.open_handle(name)
        self._fields[name] = field
        return field

    def open_handle(self, name: str, embedder: Embedder | None = None) -> Field:
        """A new :class:`Field` object for the existing field ``name``, with its own index
        connection (servers keep one per concurrent searcher; ``embedder`` replaces the
        store's, e.g. by one shared between threads); :meth:`field` caches one."""
        field = Field(self.root / name, embedder or self.embedder, name=name,
                      index_backend=self.config.index.backend_for(name))
        field.fast = self.config.index.fast
        field.page_vectors = self.config.index.page_vectors
        field.windows = self.config.index.windows
        return field

    def forget_field(self, name: str) -> None:
        """Close and drop this Store's handle on field ``name`` (before its folder goes)."""
        field = self._fields.pop(name, None)
        if field is not None:
            field.close()

    @storage_errors()
    def create_field(self, name: str, *, intro: str | None = None, exist_ok: bool = False) -> Field:
        """Create a field folder, with ``index.md`` holding ``intro`` when given (a blank
        one: none)."""
        page = intro_page(name, intro)  # checked first: a bad one left a folder made
        try:
            check_field_name(name)
        except InvalidNameError as exc:
            taken = slugify(name) if isinstance(name, str) else ""
            if taken and (self.root / taken).is_dir():  # "Research" where "research" exists
                raise InvalidNameError(
                    exc.message, f"names are lowercase: field {taken!r} already exists") from None
            raise
        folder = self.root / name
        if folder.exists() and not folder.is_dir():  # was "already exists", then "no field"
            raise FieldExistsError(f"{folder} is a file, not a field folder",
                                   "choose another name, or move the file out of the store")
        if folder.exists():
            if not exist_ok:
                raise FieldExistsError(f"field {name!r} already exists in {self.root}")
        else:
            folder.mkdir()
            write_gitignore(folder)  # a field put under git leaves its derived files out
        if page is not None and not (folder / INTRO_FILE).exists():
            atomic_write(folder / INTRO_FILE, page)
        return self.field(name)

    def search(
        self,
        query: str,
        *,
        fields: str | Sequence[str] | None = None,
        k: int = 10,
        mode: str | None = None,
        unit: str = "page",
        include_superseded: bool = False,
        activation: bool = True,
        where: Filters | None = None,
    ) -> SearchResponse:
        """Search several fields at once (``fields``: a name or a list; all of them by
        default); ``where`` keeps pages by kind, category and concept
        (:class:`deepfield.domains.Filters`)."""
        found = search_fields(self._chosen(fields), query, k=k, mode=mode, unit=unit,
                              include_superseded=include_superseded, activation=activation,
                              where=where)
        if fields is None:  # every field: say which folders were not, and why
            found.warnings.extend(self.skipped_folders())
        return found

    def research(
        self,
        question: str,
        *,
        fields: str | Sequence[str] | None = None,
        llm: ChatModel | None = None,
        max_rounds: int = 3,
        budget: int = 1000,
    ) -> ResearchResult:
        """Deep research over several fields (a name or a list; all by default); see
        deepfield.research. The context is fenced as memory (deepfield.fence), ready to hand
        to a model."""
        from .fence import check_fenced_budget, fence_research
        from .research import research

        # Checked here as research() checks them: the fence's budget check came first and
        # raised TypeError for a question of None or a budget of "500".
        if not isinstance(question, str):
            raise DeepfieldError(f"the question must be text, not {type(question).__name__}")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise BudgetError(f"budget must be a whole number of tokens, not "
                              f"{type(budget).__name__}", "e.g. budget=1000")
        chosen = self._chosen(fields)
        check_fenced_budget(budget, [f.name for f in chosen], question)
        found = research(chosen, question, llm=llm, max_rounds=max_rounds, budget=budget)
        return fence_research(found, [f.name for f in chosen])

    def _chosen(self, fields: str | Sequence[str] | None) -> list[Field]:
        """The fields named (one name or a list of them), or all for None. A string is one
        name, not letters to look up; an empty list names nothing, which is a mistake
        rather than a wish to search everything."""
        if fields is None:
            return self.fields()
        # A name given twice is one field: searched twice, its pages came back twice.
        if isinstance(fields, bytes | bytearray) or not isinstance(fields, Iterable):
            # list(123) was a TypeError, and bytes read as numbers ("not int")
            raise InvalidNameError(f"fields= takes a field name or a list of them, not "
                                   f"{type(fields).__name__}", 'e.g. fields="notes"')
        given = [fields] if isinstance(fields, str) else list(fields)
        names = [n for i, n in enumerate(given) if n not in given[:i]]  # ["a", ["b"]]: no hash
        if not names:
            raise UnknownFieldError(
                "no fields given (an empty list)",
                "name one or more fields, or pass fields=None to use every field")
        return [self.field(n) for n in names]

    def close(self) -> None:
        for field in self._fields.values():
            field.close()
        self._fields.clear()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def build_embedder(config: EmbeddingConfig) -> Embedder | None:
    """The embedder a configuration names (None for keyword-only stores). Loads lazily."""
    if config.backend == NO_EMBEDDER:
        return None
    return create_embedder(config.backend, **config.options)


@storage_errors()
def init(path: str | Path, embedding: EmbeddingConfig | str | None = None) -> Store:
    """Create a store folder (or adopt an existing folder) and write its ``deepfield.toml``;
    ``embedding``: an :class:`EmbeddingConfig`, a backend name, or None for the default.

    The backend is built first: a name or options it refuses raise (UnknownEmbedderError,
    ConfigError) and nothing is written. An existing store is opened as it is; asking it for
    another embedding config than the one it has is a ConfigError (its index was built with
    that one: edit ``deepfield.toml`` and reindex to change it). ``path`` may be a URL, as
    for :func:`open` (``s3://bucket/prefix``)."""
    _require_path(path)
    embedding = _embedding_config(embedding)
    if url_scheme(path) is not None:  # not a local folder named "s3:"
        url = normal_url(str(path))
        return store_opener(url).init(url, embedding)
    root = Path(os.path.expanduser(path))  # "~/memory": the home folder's, not ./~
    if root.exists() and not root.is_dir():
        raise StoreError(f"{root} is a file, not a folder",
                         "give a new or existing folder for the store")
    config_path = root / CONFIG_FILE
    if config_path.exists() or config_path.is_symlink():
        if embedding is not None:
            _check_same_embedding(root, embedding)
        return open(root)
    config = StoreConfig(embedding or EmbeddingConfig())
    check_default_options(config.embedding)  # the file would not open again
    build_embedder(config.embedding)
    text = render_config(config)
    try:  # checked before anything is made: a store that would not open again is no store
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the embedding options cannot be written to {CONFIG_FILE}: {exc}",
                          "option names are letters, digits, '_' and '-'") from None
    root.mkdir(parents=True, exist_ok=True)
    atomic_write(config_path, text.encode("utf-8"))
    return open(root)


def _embedding_config(embedding: object) -> EmbeddingConfig | None:
    """``embedding`` as :func:`init` takes it (a backend name: that backend), checked: a
    string or a list of options gave an AttributeError, after the folder was made."""
    if isinstance(embedding, str):
        return EmbeddingConfig(embedding)
    if embedding is None:
        return None
    if not isinstance(embedding, EmbeddingConfig):
        raise ConfigError(f"embedding= takes an EmbeddingConfig, a backend name or None, not "
                          f"{type(embedding).__name__}",
                          'e.g. EmbeddingConfig("openai", {"url": ..., "model": ...}) or "none"')
    if not isinstance(embedding.options, dict):
        raise ConfigError(f"embedding options are a dict of option names and values, not "
                          f"{type(embedding.options).__name__}",
                          'e.g. EmbeddingConfig("openai", {"url": ..., "model": ...})')
    if embedding.backend == NO_EMBEDDER:  # before any store is reached: none takes no options
        check_default_options(embedding)
    return embedding


def _check_same_embedding(root: Path, embedding: EmbeddingConfig) -> None:
    """ConfigError unless the store at ``root`` already uses ``embedding``."""
    stored = load_config(root).embedding
    wanted = EmbeddingConfig(embedding.backend, resolve_options(root, dict(embedding.options)))
    if stored != wanted:
        described = ", ".join([repr(stored.backend)] + [f"{k}={v!r}" for k, v in
                                                        stored.options.items()])
        raise ConfigError(
            f"a store already exists at {root} with embedding backend {described}",
            f"open it as it is (init without a config), or edit {root / CONFIG_FILE} "
            "and run `deepfield reindex` to change its embedder")


def open(
    path: str | Path,
    *,
    create: bool = False,
    embedder: Embedder | str | None = "config",
) -> Store:
    """Open the store at ``path``.

    ``embedder`` overrides the configured backend: an :class:`Embedder`, or None for
    keyword-only access. ``create=True`` initialises a missing store. ``path`` may also be
    ``s3://bucket/prefix``: a store in an S3-compatible bucket (deepfield.bucket, the
    [scale] extra), with credentials and endpoint from the usual AWS variables; other URL
    schemes are opened by the opener registered for them (deepfield.store_openers), and an
    unknown one is StoreNotFoundError naming the known ones.
    """
    if not (embedder is None or isinstance(embedder, str | Embedder)):
        raise ConfigError(
            f"embedder= takes an Embedder, a backend name or None, not "
            f"{type(embedder).__name__}",
            'e.g. embedder=None (keywords only), embedder="openai" or an Embedder object')
    _require_path(path)
    if url_scheme(path) is not None:  # s3://… and other kinds of store (store_openers.py)
        url = normal_url(str(path))
        return store_opener(url).open(url, create=create, embedder=embedder)
    root = Path(os.path.expanduser(path))  # "~/memory": the home folder's, not ./~
    if not (root / CONFIG_FILE).exists():
        if create:
            # A backend named here is written into the new store's config; an Embedder object
            # or None only overrides this opening (the config keeps the default).
            named = isinstance(embedder, str) and embedder != "config"
            init(root, EmbeddingConfig(str(embedder)) if named else None).close()
            return open(root, embedder=embedder)
        # Refused even when it has sub-folders: a project or home folder would otherwise
        # "open", and each search would leave index files and listing.md in its folders.
        if not root.is_dir():
            raise StoreNotFoundError(f"no store at {root}")
        raise StoreNotFoundError(
            f"{root} is not a deepfield store (no {CONFIG_FILE})",
            f"make it one with `deepfield init {root}` (or open(..., create=True)); "
            "to use one folder of pages, use deepfield.open_field")
    config = load_config(root)
    clean(root, unpack=True)  # folders of unpacks that were killed (debris.py)
    chosen = build_embedder(config.embedding) if embedder == "config" else embedder
    if isinstance(chosen, str):
        chosen = build_embedder(EmbeddingConfig(chosen))
    return Store(root, config, chosen)


def _require_path(path: str | Path) -> None:
    """StoreError for an empty string: Path("") is the working folder, which init (and
    open(create=True)) made a store of, e.g. from an unset environment variable."""
    if isinstance(path, str) and not path.strip():
        raise StoreError("no store folder given (the path is an empty string)",
                         'give the store\'s folder, e.g. deepfield.open("memory"), or "." for '
                         "the working folder")


def _is_folder(path: Path) -> bool:
    """``path.is_dir()``, and False where the name cannot be a folder at all: a field name
    over 255 bytes (from a URL, say) raised OSError "File name too long", a server's 500."""
    try:
        return path.is_dir()
    except OSError:
        return False
