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
    ConfigError,
    DeepfieldError,
    EmbedderUnavailableError,
    EmbeddingError,
    EmbeddingServiceError,
    FieldExistsError,
    ImportFormatError,
    IndexCorruptError,
    IndexStateError,
    InvalidNameError,
    InvalidPageError,
    ModelMismatchError,
    PageConflictError,
    PageError,
    PageNotFoundError,
    SectionNotFoundError,
    StoreError,
    StoreNotFoundError,
    UnknownEmbedderError,
    UnknownFieldError,
)
from .field import Field, WriteResult, WrittenPage, open_field
from .index import SyncReport
from .page import Page
from .read import OutlineEntry, PageView
from .search import Hit, SearchResponse
from .store import Store, init, open

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DeepfieldError",
    "Embedder",
    "EmbedderUnavailableError",
    "EmbeddingConfig",
    "EmbeddingError",
    "EmbeddingServiceError",
    "Field",
    "FieldExistsError",
    "Hit",
    "ImportFormatError",
    "IndexCorruptError",
    "IndexStateError",
    "InvalidNameError",
    "InvalidPageError",
    "ModelMismatchError",
    "OutlineEntry",
    "Page",
    "PageConflictError",
    "PageError",
    "PageNotFoundError",
    "PageView",
    "SearchResponse",
    "SectionNotFoundError",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoreNotFoundError",
    "SyncReport",
    "UnknownEmbedderError",
    "UnknownFieldError",
    "WriteResult",
    "WrittenPage",
    "__version__",
    "available_embedders",
    "create_embedder",
    "init",
    "open",
    "open_field",
    "register_embedder",
]
