"""Progressive reading: outline, sections, whole pages."""

from __future__ import annotations

import pytest

import deepfield
from deepfield.errors import PageNotFoundError, SectionNotFoundError

DOC = """# Guide

Intro one. Intro two. Intro three.

## Setup

Install it. Then run it.

### Details

Deep detail one. Deep detail two.

## Usage

Use it daily. Really.

## Notes

### Details

Other details here.
"""


@pytest.fixture
def guide(field: deepfield.Field) -> str:
    return field.write(DOC).pages[0].filename


def test_outline_depth_and_sentences(field: deepfield.Field, guide: str) -> None:
    view = field.read(guide, outline_only=True, depth=2, sentences=1)
    assert view.view == "outline"
    assert [e.title for e in view.outline or []] == ["Guide", "Setup", "Usage", "Notes"]
    assert view.outline and view.outline[0].sentences == ["Intro one."]
    assert "Deep detail" not in view.text and "## Setup\nInstall it." in view.text
    deeper = field.read(guide, outline_only=True, depth=3, sentences=2)
    assert "### Details\nDeep detail one. Deep detail two." in deeper.text
    assert deeper.bytes < field.read(guide).bytes


def test_section_by_title_path_and_slug(field: deepfield.Field, guide: str) -> None:
    setup = field.read(guide, section="setup")
    assert setup.text.startswith("## Setup") and "Deep detail one." in setup.text
    assert "Use it daily" not in setup.text
    assert setup.section == ["Guide", "Setup"]
    notes = field.read(guide, section="Notes > Details")
    assert notes.text == "### Details\n\nOther details here.\n"
    assert notes.line_start and notes.line_end and notes.line_start < notes.line_end
    with pytest.raises(SectionNotFoundError, match="matches 2 sections"):
        field.read(guide, section="Details")
    with pytest.raises(SectionNotFoundError, match="headings: Guide"):
        field.read(guide, section="Nowhere")


def test_full_read_by_uuid(field: deepfield.Field, guide: str) -> None:
    full = field.read(guide)
    uuid = full.uuid
    assert uuid and field.read(uuid).text == full.text
    assert full.text.startswith("---\ntitle: Guide\n")
    with pytest.raises(PageNotFoundError):
        field.read("missing-page")
