"""deepfield: long-term memory for AI agents as plain Markdown pages.

A *store* is a folder of *fields*; a field is a memoryfield (a flat folder of Markdown pages
with YAML frontmatter). Every index is derived from the pages and can be rebuilt at any time.

    import deepfield
    store = deepfield.open("memory", create=True)
    field = store.create_field("notes", exist_ok=True)
    field.add("Carbon fibre woks", "Carbon fibre woks heat unevenly.")
    for hit in field.search("wok").results:
        print(hit.filename, hit.score, hit.snippet)
    print(field.read("carbon-fibre-woks", outline_only=True).text)

The public contract (this API and the CLI's ``--json`` output) is documented in docs/API.md.
"""

from .config import EmbeddingConfig, StoreConfig
from .embed.base import Embedder, available_embedders, create_embedder, register_embedder
from .errors import (
    AgentSetupError,
    ArchiveError,
    BudgetError,
    ConfigError,
    DeepfieldError,
    DuplicateUuidError,
    EmbedderUnavailableError,
    EmbeddingError,
    EmbeddingInputError,
    EmbeddingServiceError,
    ExportTargetError,
    FieldExistsError,
    ImportFormatError,
    IndexCorruptError,
    IndexStateError,
    InvalidMetadataError,
    InvalidNameError,
    InvalidPageError,
    InvalidQueryError,
    LLMError,
    LLMReplyError,
    LLMServiceError,
    ModelMismatchError,
    NothingToPackError,
    PageConflictError,
    PageError,
    PageNotFoundError,
    PinMismatchError,
    QueryTooLongError,
    RemoteUnavailableError,
    RemoteUnreachableError,
    ReviewItemError,
    SectionNotFoundError,
    SessionFormatError,
    StorageError,
    StoreError,
    StoreNotFoundError,
    SupersessionCycleError,
    TaxonomyError,
    TransportError,
    UnknownEmbedderError,
    UnknownFieldError,
    UnknownTransportError,
    UnsafeArchiveError,
    WriteConflictError,
)
from .field import Field, WriteResult, WrittenPage, open_field
from .index import SyncReport
from .page import Page
from .read import OutlineEntry, PageView
from .search import Hit, SearchResponse
from .store import Store, init, open
from .store_openers import StoreOpener, register_store_opener

__version__ = "0.1.0"

# Imported on first use (PEP 562): the memorizer, researcher, context builder and chat models
# pull in more code than a search needs, and CLI start-up time is measured (BENCHMARKS.md).
_LAZY = {
    "ChatModel": "llm", "LLMConfig": "llm", "ContextResult": "context",
    "build_context": "context", "RememberResult": "memorize", "remember": "memorize",
    "ResearchResult": "research.result",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deepfield' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "AgentSetupError",
    "ArchiveError",
    "BudgetError",
    "ChatModel",
    "ConfigError",
    "ContextResult",
    "DeepfieldError",
    "DuplicateUuidError",
    "Embedder",
    "EmbedderUnavailableError",
    "EmbeddingConfig",
    "EmbeddingError",
    "EmbeddingInputError",
    "EmbeddingServiceError",
    "ExportTargetError",
    "Field",
    "FieldExistsError",
    "Hit",
    "ImportFormatError",
    "IndexCorruptError",
    "IndexStateError",
    "InvalidMetadataError",
    "InvalidNameError",
    "InvalidPageError",
    "InvalidQueryError",
    "LLMConfig",
    "LLMError",
    "LLMReplyError",
    "LLMServiceError",
    "ModelMismatchError",
    "NothingToPackError",
    "OutlineEntry",
    "Page",
    "PageConflictError",
    "PageError",
    "PageNotFoundError",
    "PageView",
    "PinMismatchError",
    "QueryTooLongError",
    "RememberResult",
    "RemoteUnavailableError",
    "RemoteUnreachableError",
    "ResearchResult",
    "ReviewItemError",
    "SearchResponse",
    "SectionNotFoundError",
    "SessionFormatError",
    "StorageError",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoreNotFoundError",
    "StoreOpener",
    "SupersessionCycleError",
    "SyncReport",
    "TaxonomyError",
    "TransportError",
    "UnknownEmbedderError",
    "UnknownFieldError",
    "UnknownTransportError",
    "UnsafeArchiveError",
    "WriteConflictError",
    "WriteResult",
    "WrittenPage",
    "__version__",
    "available_embedders",
    "build_context",
    "create_embedder",
    "init",
    "open",
    "open_field",
    "register_embedder",
    "register_store_opener",
    "remember",
]
