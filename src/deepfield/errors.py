"""Every exception deepfield raises, so callers can catch exactly what they mean.

Each error carries a ``hint``: one sentence saying what to do about it. The CLI prints
``error: <message> (<hint>)`` on one line and exits non-zero; library callers can read both.

The tree::

    DeepfieldError
    ├── ConfigError                 bad configuration value or config file
    ├── StoreError
    │   ├── StoreNotFoundError      no store at the given path
    │   ├── UnknownFieldError       no field of that name in the store
    │   ├── FieldExistsError        creating a field that is already there
    │   ├── StorageError            a write the file system refused (permissions, a read-only
    │   │                           or full disk); also an OSError, with the same errno
    │   └── InvalidNameError        a field or page name that breaks the spec's filename rules,
    │                               or a field name the HTTP server reserves (``ui``)
    ├── PageError
    │   ├── PageNotFoundError       no page with that filename or uuid
    │   ├── InvalidPageError        not UTF-8, binary, empty or too large
    │   ├── PageConflictError       a uuid already used by another page
    │   │   ├── WriteConflictError  another writer changed the page first (a bucket's race)
    │   │   └── DuplicateUuidError  one uuid on several pages: which one is meant is unclear
    │   ├── SectionNotFoundError    ``read --section`` named no (or an ambiguous) heading
    │   ├── SupersessionCycleError  a ``supersedes`` link that would close a loop
    │   ├── ReviewItemError         ``deepfield review`` named no (or a resolved) item
    │   └── InvalidMetadataError    frontmatter values a page kind requires are missing or wrong
    ├── IndexStateError
    │   ├── ModelMismatchError      the index holds vectors of another model code or size
    │   └── IndexCorruptError       the SQLite file is damaged or not a deepfield index
    ├── EmbeddingError
    │   ├── UnknownEmbedderError    no backend registered under that name
    │   ├── EmbedderUnavailableError the backend's package or model files are missing
    │   └── EmbeddingServiceError   an embeddings endpoint failed or answered nonsense
    │       └── EmbeddingInputError the model refused a text (e.g. longer than it reads)
    ├── ImportFormatError           an import source that is not in the expected format
    ├── ExportTargetError           an export folder that is not empty (or is a file), or an
    │                               export or pack target inside the field itself
    ├── ArchiveError                a .memoryfield.zip that cannot be used
    │   ├── PinMismatchError        its sha256 is not the pinned one
    │   └── UnsafeArchiveError      traversal, symlinks, page sub-folders, a zip bomb
    ├── TransportError              a remote field (HTTP, S3, git) that cannot be read
    │   ├── UnknownTransportError   a source no transport understands
    │   └── RemoteUnavailableError  unreachable, refused, misbehaving or without credentials
    │       └── RemoteUnreachableError  no connection or no complete reply in time (a cached
    │                                   mirror is used instead, with a warning, when there is one)
    └── AgentSetupError             `deepfield setup`: an unknown agent, or an agent's config
                                    file that is malformed or read-only (nothing is changed)
    LLMError
    ├── LLMServiceError             a chat endpoint is unreachable, refuses or answers nonsense
    └── LLMReplyError               the model's reply is not the JSON asked for, even after a repair
    SessionFormatError              a session file (remember) that is empty or unparseable
    InvalidQueryError               a query or question that is not UTF-8 text
    └── QueryTooLongError           a query too long to be a question
    BudgetError                     a token budget too small for anything useful
    TaxonomyError                   a domain's taxonomy.md that cannot be read as a tree
"""

from __future__ import annotations


class DeepfieldError(Exception):
    """Base class: ``message`` says what went wrong, ``hint`` what to do about it."""

    default_hint = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(DeepfieldError):
    default_hint = "check deepfield.toml in the store and the DEEPFIELD_* environment variables"


class StoreError(DeepfieldError):
    pass


class StoreNotFoundError(StoreError):
    default_hint = "create one with `deepfield init DIR`, or point --store / DEEPFIELD_STORE at it"


class UnknownFieldError(StoreError):
    default_hint = "list fields with `deepfield ls`, or create it with `deepfield new NAME`"


class FieldExistsError(StoreError):
    default_hint = "choose another name, or use the existing field"


class StorageError(StoreError, OSError):
    """The file system refused a write (no permission, read-only, full). Also an
    ``OSError`` carrying the original ``errno`` and ``filename``, so code that caught the bare
    OSError still does."""

    default_hint = "check the path and permissions"

    def __init__(self, message: str, hint: str | None = None, *, errno: int | None = None,
                 filename: str | None = None) -> None:
        super().__init__(message, hint)
        self.errno = errno
        self.filename = filename


class InvalidNameError(StoreError):
    default_hint = (
        "names use only lowercase ASCII letters, digits and hyphens, "
        "and start and end with a letter or digit, e.g. `carbon-fibre`"
    )


class PageError(DeepfieldError):
    pass


class PageNotFoundError(PageError):
    default_hint = "list pages with `deepfield ls FIELD`"


class InvalidPageError(PageError):
    default_hint = "pages must be non-empty UTF-8 Markdown text"


class PageConflictError(PageError):
    default_hint = (
        "keep the stored page's uuid to replace it, or drop the uuid to create a new page"
    )


class WriteConflictError(PageConflictError):
    """A conditional write lost: another writer changed (or created, or removed) the page
    first. ``current`` is the page as it is now (None: there is none)."""

    default_hint = "read the page again, then write your change on top of it"

    def __init__(self, message: str, hint: str | None = None, *,
                 current: bytes | None = None) -> None:
        super().__init__(message, hint)
        self.current = current


class DuplicateUuidError(PageConflictError):
    default_hint = (
        "name the page by its filename, and give one of the pages a new uuid (delete its "
        "`uuid:` line; the next write of it adds a fresh one)"
    )


class SectionNotFoundError(PageError):
    default_hint = "see the page's headings with `deepfield read FIELD PAGE --outline`"


class SupersessionCycleError(PageError):
    default_hint = "a page cannot supersede, even indirectly, a page that supersedes it"


class ReviewItemError(PageError):
    default_hint = "list open items with `deepfield review FIELD`"


class InvalidMetadataError(PageError):
    default_hint = "see `deepfield domain add --help` for the keys and values atomic pages take"


class IndexStateError(DeepfieldError):
    default_hint = "rebuild the index from the pages with `deepfield reindex`"


class ModelMismatchError(IndexStateError):
    pass


class IndexCorruptError(IndexStateError):
    """``damaged``: SQLite found the file corrupt (deepfield moves it aside and rebuilds the
    index from the pages); False for a file it cannot use for another reason."""

    def __init__(self, message: str, hint: str | None = None, *, damaged: bool = False) -> None:
        super().__init__(message, hint)
        self.damaged = damaged


class NotIndexerError(IndexStateError):
    """A shared index (a bucket store's LanceDB dataset) is written by another process: the
    one holding the store's indexer lease."""

    default_hint = (
        "the lease holder rebuilds a deleted or damaged dataset by itself; to force a "
        "rebuild, stop the serving replicas (or wait for the lease to expire), then run "
        "`deepfield reindex` again"
    )


class EmbeddingError(DeepfieldError):
    pass


class UnknownEmbedderError(EmbeddingError):
    default_hint = "see `deepfield embedders` for the registered backends"


class EmbedderUnavailableError(EmbeddingError):
    pass


class EmbeddingServiceError(EmbeddingError):
    default_hint = (
        "check the endpoint URL and model, "
        "or search keyword-only with --mode bm25 / --embedder none"
    )


class EmbeddingInputError(EmbeddingServiceError):
    """The model refused the texts themselves (too long, say), not the request: the index
    skips those texts with a warning and goes on."""

    default_hint = "the text stays searchable by keywords; split it into shorter pages"


class ImportFormatError(DeepfieldError):
    pass


class ExportTargetError(DeepfieldError):
    default_hint = "export into a new or empty folder"


class ArchiveError(DeepfieldError):
    default_hint = "check that the file is a complete .memoryfield.zip (pack it again if not)"


class NothingToPackError(ArchiveError):
    """A field without a single page: a memoryfield holds at least one."""

    default_hint = "a memoryfield holds at least one page: add one first"


class PinMismatchError(ArchiveError):
    default_hint = (
        "the file is not the one that was pinned; fetch it again from a trusted source, "
        "or check the --sha256 value"
    )


class UnsafeArchiveError(ArchiveError):
    default_hint = (
        "refusing to use it; ask its author for a memoryfield zip made by `deepfield pack`"
    )


class TransportError(DeepfieldError):
    pass


class UnknownTransportError(TransportError):
    default_hint = (
        "give a field name, a folder, a .memoryfield.zip, an http(s):// URL, "
        "s3://bucket/prefix or git+URL[#ref]"
    )


class RemoteUnavailableError(TransportError):
    default_hint = "check the address, the network and any credentials, then try again"


class RemoteUnreachableError(RemoteUnavailableError):
    """The source could not be reached at all (no connection, a timeout): the one failure
    open_remote answers from a cached mirror, with a warning, when there is one."""


# Only these two force offline: unsetting DEEPFIELD_LLM_URL with a model still set sends the
# memory text (and $OPENAI_API_KEY) to api.openai.com, the default url.
OFFLINE_HINT = "or run without a model: pass --offline or set DEEPFIELD_LLM=none"


class LLMError(DeepfieldError):
    default_hint = "check the LLM url, model and API key, " + OFFLINE_HINT


class LLMServiceError(LLMError):
    pass


class LLMReplyError(LLMError):
    default_hint = "use a stronger model or one that follows JSON instructions, " + OFFLINE_HINT


class SessionFormatError(ImportFormatError):
    default_hint = (
        "give OpenAI-style messages (JSON or JSONL), a LoCoMo session, or a Markdown/text "
        "transcript (`Speaker: text` lines)"
    )


class InvalidQueryError(DeepfieldError):
    """A query or question that cannot be searched (not UTF-8 text, too long)."""

    default_hint = "search for a question or its key words, as UTF-8 text"


class QueryTooLongError(InvalidQueryError):
    default_hint = ("search for a question or its key words; to find the page a passage comes "
                    "from, search one sentence of it")


class BudgetError(DeepfieldError):
    default_hint = "raise --budget (a few hundred tokens is the least that holds any evidence)"


class TaxonomyError(DeepfieldError):
    default_hint = (
        "write categories as headings or list items and concepts as items nested under them, "
        "indenting each level consistently"
    )


class AgentSetupError(DeepfieldError):
    default_hint = "nothing was changed; see `deepfield setup --list` for the agents and files"
