"""A LlamaIndex retriever over deepfield fields (``pip install 'deepfield[llamaindex]'``).

    from deepfield.integrations.llamaindex import DeepfieldLlamaRetriever

    retriever = DeepfieldLlamaRetriever(store, fields=["notes"], k=5)
    nodes = retriever.retrieve("how do woks heat?")    # list[NodeWithScore], best first

Each node is a ``TextNode`` holding the matching chunk, with deepfield's score and the same
metadata as the LangChain retriever (``source`` = ``memoryfield://field/file.md``, lines...).

Offline: llama-index-core ships the NLTK data and tiktoken files it uses in its wheel
(``llama_index/core/_static``) and fetches them only when they are missing, and it loads them
only for text splitting and token counting; retrieving through this class does neither, so it
never touches the network (tests/test_integrations.py checks it with sockets refused).
"""

from __future__ import annotations

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(f"{__name__} needs llama-index-core: "
                      "pip install 'deepfield[llamaindex]'") from exc

from ..store import Store
from ._common import check_options, metadata, resolve_fields, search

__all__ = ["DeepfieldLlamaRetriever"]


class DeepfieldLlamaRetriever(BaseRetriever):
    """Search ``fields`` of ``store`` (every field when None); an unknown field raises
    :class:`~deepfield.errors.UnknownFieldError` here, when the retriever is made."""

    def __init__(self, store: Store, fields: list[str] | str | None = None, *, k: int = 5,
                 mode: str | None = None, unit: str = "page",
                 callback_manager: CallbackManager | None = None) -> None:
        names = [fields] if isinstance(fields, str) else fields
        resolve_fields(store, names)
        check_options(k, mode, unit)
        super().__init__(callback_manager=callback_manager)
        self.store = store
        self.fields = names
        self.k = k
        self.mode = mode
        self.unit = unit

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = search(self.store, self.fields, query_bundle.query_str, k=self.k,
                      mode=self.mode, unit=self.unit)
        return [NodeWithScore(node=TextNode(id_=f"{hit.field}/{hit.filename}#L{hit.line_start}",
                                            text=hit.text, metadata=metadata(hit)),
                              score=hit.score) for hit in hits]
