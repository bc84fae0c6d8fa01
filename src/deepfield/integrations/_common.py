"""What the framework adapters share: resolving field names and describing a hit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import DeepfieldError, UnknownFieldError
from ..field import Field
from ..search import MODES, UNITS, Hit, search_fields
from ..store import Store


def resolve_fields(store: Store, names: Sequence[str] | None) -> list[Field]:
    """The named fields of ``store`` (all of them for None); an unknown name raises
    :class:`UnknownFieldError` listing the fields there are."""
    known = store.field_names()
    chosen = [names] if isinstance(names, str) else list(names) if names is not None else known
    missing = [name for name in chosen if name not in known]
    if missing:
        raise UnknownFieldError(f"no field {missing[0]!r} in the store at {store.root}",
                                fields_hint(known))
    if not chosen and names is not None:  # an empty list given: not "every field"
        raise UnknownFieldError("no fields given", fields_hint(known))
    if not chosen:
        raise UnknownFieldError(f"the store at {store.root} has no fields yet",
                                "create one with `deepfield new NAME`")
    return [store.field(name) for name in chosen]


def fields_hint(known: Sequence[str]) -> str:
    """The hint of an :class:`UnknownFieldError`: the fields there are, so a typo shows."""
    return "fields: " + (", ".join(known) if known else "none yet (create one with "
                         "`deepfield new NAME`)")


def check_options(k: object, mode: object, unit: object) -> None:
    """Refuse a retriever's options that deepfield's search cannot take."""
    if mode is not None and mode not in MODES:
        raise DeepfieldError(f"unknown mode {mode!r}", "use bm25, vector or hybrid")
    if unit not in UNITS:
        raise DeepfieldError(f"unknown unit {unit!r}", "use page or chunk")
    # (type first: a k given as "5" would otherwise fail the comparison with a TypeError)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
        raise DeepfieldError(f"k must be a whole number from 1 to 100, not {k!r}",
                             "k is how many hits to return")


def search(store: Store, names: Sequence[str] | None, query: str, *, k: int,
           mode: str | None, unit: str) -> list[Hit]:
    fields = resolve_fields(store, names)
    return search_fields(fields, query, k=k, mode=mode, unit=unit).results


def metadata(hit: Hit) -> dict[str, Any]:
    """Where a hit comes from, for a framework document's metadata (JSON-safe values)."""
    return {"source": f"memoryfield://{hit.field}/{hit.filename}", "field": hit.field,
            "filename": hit.filename, "uuid": hit.uuid, "title": hit.title,
            "summary": hit.summary, "heading": hit.heading, "score": round(hit.score, 6),
            "line_start": hit.line_start, "line_end": hit.line_end}
