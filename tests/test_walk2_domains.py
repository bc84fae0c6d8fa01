"""Second walk through domains, progressive reading and listing.md: defects found, pinned."""

from __future__ import annotations

import deepfield
from deepfield.domains import parse_taxonomy


def test_a_write_lists_pages_saved_by_hand_since_the_last_sync(
    store: deepfield.Store,
) -> None:
    """A write syncs only the pages it wrote: listing.md must still list a page saved by hand
    (or drop one deleted by hand) since the index last looked, not just what the index knew."""
    store.create_field("notes")
    writer = store.field("notes")
    writer.add("First", "one")
    (writer.path / "hand.md").write_text("---\ntitle: Hand\n---\nhand text\n")
    fresh = store.field("notes")  # another process: it has not looked at the folder yet
    fresh.add("Second", "two")
    listing = (fresh.path / "listing.md").read_text()
    assert "- [Hand](hand.md)" in listing and "3 pages." in listing
    (fresh.path / "hand.md").unlink()
    store.field("notes").add("Third", "three")
    listing = (fresh.path / "listing.md").read_text()
    assert "hand.md" not in listing and "3 pages." in listing


NESTED_FENCES = """# Nested

## Example page

Write the page like this:

````markdown
# My page

```python
# a comment
x = 1
```

## Not a heading
````

## After

After text.
"""


def test_a_longer_fence_keeps_inner_fences_and_hash_lines_as_code(field: deepfield.Field) -> None:
    """A ```` block quoting Markdown holds ``` lines: they do not close it (CommonMark), so the
    "# a comment" after ```python is no heading and the section runs to ````."""
    field.write(NESTED_FENCES, name="nested")
    view = field.read("nested", outline_only=True, depth=3)
    assert [e.title for e in view.outline or []] == ["Nested", "Example page", "After"]
    section = field.read("nested", section="Example page")
    assert section.text.rstrip().endswith("````") and "## Not a heading" in section.text
    assert section.line_end is not None and section.line_start is not None


def test_taxonomy_skips_a_longer_fence_with_inner_fences() -> None:
    text = ("# Taxonomy\n\n## Memory\n- RAG\n\n````markdown\n```\n## Example\n- Fake\n```\n"
            "## Also example\n````\n\n## Evaluation\n- LoCoMo\n")
    taxonomy = parse_taxonomy(text)
    assert [node.name for node in taxonomy.categories()] == ["Memory", "Evaluation"]
    assert [node.name for node in taxonomy.concepts()] == ["RAG", "LoCoMo"]
