"""Third walk through import, export, the memory tool and ``deepfield add``: defects a
demanding user found, each pinned by a test on a small realistic tree built in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepfield.errors import InvalidPageError
from deepfield.page import Page

from .conftest import Cli


def test_add_with_piped_frontmatter_takes_its_keys_not_a_second_block(
    cli: Cli, tmp_path: Path
) -> None:
    """``printf -- '---\\ntitle: X\\n---\\nBody' | deepfield add f --title T -`` stored the
    block as body text under the page's own frontmatter."""
    cli.json("new", "notes")
    note = "---\ntitle: X\ntags: [wok]\nsummary: Inner\n---\nBody\n"
    added = cli.json("add", "notes", "--title", "T", "-", input=note)
    page = Page.parse((cli.store_path / "notes" / added["pages"][0]["filename"]).read_text())
    assert page.body == "Body\n"
    assert page.frontmatter is not None
    assert page.frontmatter["title"] == "T" and page.frontmatter["tags"] == ["wok"]
    assert page.frontmatter["summary"] == "Inner"
    added = cli.json("add", "notes", "--title", "U", "--summary", "Mine", "-", input=note)
    page = Page.parse((cli.store_path / "notes" / added["pages"][0]["filename"]).read_text())
    assert page.frontmatter is not None and page.frontmatter["summary"] == "Mine"
    with pytest.raises(InvalidPageError, match="deepfield write"):
        cli("add", "notes", "--title", "V", "-", input="---\nuuid: 12\n---\nBody\n")
