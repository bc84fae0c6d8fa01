"""Second walk through domains, progressive reading and listing.md: defects found, pinned."""

from __future__ import annotations

import deepfield


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
