"""Memory management defects a new user met (walk-manage): supersession of the special
files, review items whose page was archived, forgetting a successor, dangling links."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import deepfield
from deepfield.errors import InvalidNameError
from deepfield.manage.supersede import supersede


@pytest.fixture
def kfield(keyword_store: deepfield.Store) -> Iterator[deepfield.Field]:
    yield keyword_store.create_field("proj", intro="About.")


def test_supersede_refuses_the_listing_and_the_introduction(kfield: deepfield.Field) -> None:
    alpha = kfield.add("Alpha", "Alpha fact one.").pages[0].filename
    listing = (kfield.path / "listing.md").read_text()
    intro = (kfield.path / "index.md").read_text()
    for old, new in (("listing", "alpha"), ("index", "alpha"), ("alpha", "index"),
                     ("alpha", "listing.md")):
        with pytest.raises(InvalidNameError, match="not a page name"):
            supersede(kfield, old, new)
    with pytest.raises(InvalidNameError, match="not a page name"):
        kfield.write("---\ntitle: S\nsupersedes: listing\n---\nx\n")
    assert (kfield.path / "listing.md").read_text() == listing
    assert (kfield.path / "index.md").read_text() == intro
    assert "superseded_by" not in (kfield.path / alpha).read_text()
    kfield.add("Beta", "Beta fact two.")
    assert "beta" in (kfield.path / "listing.md").read_text().lower()  # still maintained
