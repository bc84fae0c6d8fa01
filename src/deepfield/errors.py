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
    │   └── InvalidNameError        a field or page name that breaks the spec's filename rules
    ├── PageError
    │   ├── PageNotFoundError       no page with that filename or uuid
    │   ├── InvalidPageError        not UTF-8, binary, empty or too large
    │   ├── PageConflictError       a uuid already used by another page
    │   └── SectionNotFoundError    ``read --section`` named no (or an ambiguous) heading
    ├── IndexStateError
    │   ├── ModelMismatchError      the index holds vectors of another model code or size
    │   └── IndexCorruptError       the SQLite file is not a deepfield index
    ├── EmbeddingError
    │   ├── UnknownEmbedderError    no backend registered under that name
    │   ├── EmbedderUnavailableError the backend's package or model files are missing
    │   └── EmbeddingServiceError   an embeddings endpoint failed or answered nonsense
    └── ImportFormatError           an import source that is not in the expected format
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


class SectionNotFoundError(PageError):
    default_hint = "see the page's headings with `deepfield read FIELD PAGE --outline`"


class IndexStateError(DeepfieldError):
    default_hint = "rebuild the index from the pages with `deepfield reindex`"


class ModelMismatchError(IndexStateError):
    pass


class IndexCorruptError(IndexStateError):
    pass


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


class ImportFormatError(DeepfieldError):
    pass
