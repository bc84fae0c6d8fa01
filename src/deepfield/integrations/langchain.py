"""A LangChain retriever over deepfield fields (``pip install 'deepfield[langchain]'``).

    from deepfield.integrations.langchain import DeepfieldRetriever

    retriever = DeepfieldRetriever.from_store(store, fields=["notes"], k=5)
    docs = retriever.invoke("how do woks heat?")     # list[Document], best first

Each ``Document`` holds the matching chunk (the best chunk of each page with ``unit="page"``,
the default; every matching chunk with ``unit="chunk"``) and says where it comes from in its
metadata: ``source`` (``memoryfield://field/file.md``), field, filename, uuid, title, summary,
heading, score and the page's line numbers.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, model_validator
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(f"{__name__} needs langchain-core: "
                      "pip install 'deepfield[langchain]'") from exc

from ..errors import DeepfieldError
from ..store import Store
from ._common import check_options, metadata, resolve_fields, search

__all__ = ["DeepfieldRetriever"]


class DeepfieldRetriever(BaseRetriever):
    """Search ``fields`` of ``store`` (every field when None) with deepfield's search."""

    # A misspelt option (feilds=, top_k=) would otherwise be dropped without a word and the
    # retriever would search with the defaults.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    store: Store
    fields: list[str] | None = None
    k: int = 5
    mode: str | None = None
    """bm25, vector or hybrid (None: hybrid when the store has an embedding model)."""
    unit: str = "page"

    @model_validator(mode="before")
    @classmethod
    def _known_options(cls, data: Any) -> Any:
        # Raised here as deepfield's one-line error; pydantic's extra="forbid" is the backstop.
        unknown = sorted(set(data) - set(cls.model_fields)) if isinstance(data, dict) else []
        if unknown:
            raise DeepfieldError(
                f"DeepfieldRetriever has no option {unknown[0]!r}",
                "options: " + ", ".join(n for n in cls.model_fields if n != "name"))
        return data

    @classmethod
    def from_store(cls, store: Store, fields: list[str] | str | None = None,
                   **options: Any) -> DeepfieldRetriever:
        """A retriever whose fields are checked now: an unknown field raises deepfield's
        :class:`~deepfield.errors.UnknownFieldError` (not a pydantic validation error)."""
        names = [fields] if isinstance(fields, str) else fields
        resolve_fields(store, names)
        check_options(options.get("k", 5), options.get("mode"), options.get("unit", "page"))
        return cls(store=store, fields=names, **options)

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        check_options(self.k, self.mode, self.unit)
        hits = search(self.store, self.fields, query, k=self.k, mode=self.mode, unit=self.unit)
        return [Document(page_content=hit.text, metadata=metadata(hit),
                         id=f"{hit.field}/{hit.filename}#L{hit.line_start}") for hit in hits]
