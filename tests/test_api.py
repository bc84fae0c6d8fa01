"""The public Python API: complete, sorted exports and the README's example."""

from __future__ import annotations

from pathlib import Path

import pytest

import deepfield


def test_all_is_complete_and_sorted() -> None:
    public = {name for name in dir(deepfield) if not name.startswith("_")}
    modules = {"archive", "bucket", "cli", "confidence", "config", "context", "debris", "domains",
               "embed", "errors", "fence", "field", "field_add", "field_backends", "field_index",
               "field_read", "field_sync",
               "freshness", "fsutil", "fusion", "gitignore", "hits", "httpjson", "importers",
               "index",
               "line_rank", "listing", "llm", "manage", "markdown", "memo", "memorize", "page",
               "page_names", "page_text",
               "portable", "qa", "read", "read_parts", "registry", "relative_dates", "research",
               "same_page",
               "salience",
               "scan", "search", "server", "sessions", "split", "store", "store_openers", "tokens",
               "writer"}
    modules |= {"agentsetup", "integrations"}  # imported on demand (setup, framework adapters)
    assert set(deepfield.__all__) == (public - modules) | {"__version__"}
    assert deepfield.__all__ == sorted(deepfield.__all__)


def test_quickstart_from_the_docstring(tmp_path: Path) -> None:
    store = deepfield.open(tmp_path / "memory", create=True, embedder="fake")
    field = store.create_field("notes", exist_ok=True)
    field.add("Carbon fibre woks", "Carbon fibre woks heat unevenly.")
    hits = field.search("wok").results
    assert hits[0].filename == "carbon-fibre-woks.md"
    assert "Carbon fibre woks" in field.read("carbon-fibre-woks", outline_only=True).text
    store.close()


def test_errors_carry_hints() -> None:
    error = deepfield.UnknownFieldError("no field 'x'")
    assert error.hint and str(error).startswith("no field 'x' (")
    assert issubclass(deepfield.ModelMismatchError, deepfield.IndexStateError)
    assert issubclass(deepfield.IndexStateError, deepfield.DeepfieldError)


def test_wrong_types_at_the_api_are_deepfield_errors(store: deepfield.Store) -> None:
    """A caller passing None or a number gets a typed deepfield error saying what was wrong,
    not an AttributeError or TypeError from deep inside."""
    from deepfield.context import build_context
    from deepfield.errors import DeepfieldError
    from deepfield.research import research

    field = store.create_field("typed")
    field.add("Woks", "Carbon steel woks.")
    calls = [
        lambda: store.create_field(None),  # type: ignore[arg-type]
        lambda: store.field(5),  # type: ignore[arg-type]
        lambda: field.add("Title", None),  # type: ignore[arg-type]
        lambda: field.add(None, "text"),  # type: ignore[arg-type]
        lambda: field.add("Title", "text", frontmatter="tags: x"),  # type: ignore[arg-type]
        lambda: field.write(5),  # type: ignore[arg-type]
        lambda: field.read(None),  # type: ignore[arg-type]
        lambda: field.archive(5),  # type: ignore[arg-type]
        lambda: field.search(None),  # type: ignore[arg-type]
        lambda: field.search("woks", k="3"),  # type: ignore[arg-type]
        lambda: research([field], 5),  # type: ignore[arg-type]
        lambda: build_context(None, "task"),  # type: ignore[arg-type]
        lambda: build_context(field, None),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(DeepfieldError, match=r"must be|needs a"):
            call()
    assert [d.filename for d in field.pages()] == ["woks.md"]
