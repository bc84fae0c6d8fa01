"""Progressive reading: outline, sections, whole pages."""

from __future__ import annotations

import pytest

import deepfield
from deepfield.errors import PageNotFoundError, SectionNotFoundError

from .conftest import Cli

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


def test_read_line_ranges_end_on_the_files_last_line(field: deepfield.Field) -> None:
    """Inclusive, 1-based, like search hits: never one past the end of the file."""
    (field.path / "mid.md").write_text("---\ntitle: Mid\n---\n## A\nline a1\nline a2\n\n"
                                       "## B\nline b\n")
    lines = (field.path / "mid.md").read_text().splitlines()
    whole = field.read("mid")
    assert (whole.line_start, whole.line_end) == (1, len(lines)) == (1, 9)
    last = field.read("mid", section="B")
    assert (last.line_start, last.line_end) == (8, 9) and lines[8] == "line b"
    first = field.read("mid", section="A")  # a blank line before the next heading: not its end
    assert (first.line_start, first.line_end) == (4, 6) and lines[5] == "line a2"


def _long_report() -> str:
    """A page of six sections that the writer splits into three parts."""
    lines = ["# Long report", ""]
    for title in ["Introduction", "Background", "Method", "Results", "Discussion",
                  "Conclusion"]:
        lines += [f"## {title}", ""]
        for i in range(12):
            lines += [f"{title} paragraph {i}. " + "The cells were cycled under load. " * 8, ""]
    lines += ["## Sources", "", "- lab notebook 7", ""]
    return "\n".join(lines)


@pytest.fixture
def split_report(field: deepfield.Field) -> list[str]:
    names = [p.filename for p in field.write(_long_report(), name="long-report").pages]
    assert len(names) >= 3
    return names


def test_outline_of_a_split_page_covers_every_part(field: deepfield.Field,
                                                   split_report: list[str]) -> None:
    """Reading part 1 as an outline listed only part 1's headings, with nothing saying the
    page went on in other files."""
    for ref in (split_report[0], split_report[-1]):  # from any part, the whole page
        view = field.read(ref, outline_only=True, sentences=0)
        assert view.parts == split_report
        titles = [e.title for e in view.outline or [] if e.level == 2]
        assert {"Introduction", "Method", "Conclusion"} <= set(titles)
        assert titles.count("Sources") == 1  # copied into every part, listed once
        conclusion = next(e for e in view.outline or [] if e.title == "Conclusion")
        assert conclusion.filename == split_report[-1]
        assert f"[part {len(split_report)} of {len(split_report)}: {split_report[-1]}]" \
            in view.text
        assert view.to_json()["outline"][-1]["filename"] in split_report


def test_section_of_a_split_page_is_found_in_any_part(field: deepfield.Field,
                                                      split_report: list[str]) -> None:
    view = field.read(split_report[0], section="Conclusion")
    assert view.filename == split_report[-1]  # line numbers are that file's
    assert view.text.startswith("## Conclusion\n")
    assert "Conclusion paragraph 0." in view.text
    lines = field.path.joinpath(view.filename).read_text().split("\n")
    assert lines[(view.line_start or 0) - 1] == "## Conclusion"
    # A heading in the part asked for comes from that part (Sources is in all of them).
    assert field.read(split_report[1], section="Sources").filename == split_report[1]
    with pytest.raises(SectionNotFoundError, match=r"any of the page's \d+ parts"):
        field.read(split_report[0], section="Appendix")


def test_outline_of_a_split_page_with_a_missing_part_warns(field: deepfield.Field,
                                                           split_report: list[str]) -> None:
    (field.path / split_report[1]).unlink()
    view = field.read(split_report[0], outline_only=True)
    assert any(split_report[1] in w and "missing" in w for w in view.warnings)


def test_cli_read_section_of_a_split_page(cli: Cli) -> None:
    assert cli("new", "research").exit_code == 0
    assert cli("write", "research", "-", "--name", "long-report",
               input=_long_report()).exit_code == 0
    out = cli.json("read", "research", "long-report", "--section", "Conclusion")
    assert out["filename"] == "long-report-part-3.md" and out["parts"][0] == "long-report.md"
    outline = cli("read", "research", "long-report", "--outline")
    assert "## Conclusion" in outline.stdout and "[part 2 of 3: long-report-part-2.md]" \
        in outline.stdout
    both = cli("read", "research", "long-report", "--outline", "--section", "Conclusion")
    assert both.exit_code == 2 and "give one" in both.stderr  # one view, not one ignored
