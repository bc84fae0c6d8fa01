"""Reading a page as a view: whole, as an outline, or one section (``Field.read``).

A page split into parts (deepfield.read_parts) reads as one: its outline covers every part,
and a section is looked for in all of them. Reading is a use of the page, logged as
activation (manage/activation.py) unless the caller says otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .manage.activation import record_activation
from .manage.supersede import superseded_note
from .page import derive_title
from .read import PageView, check_view, find_section, outline, render_outline
from .read_parts import outline_parts, part_names, section_in_parts

if TYPE_CHECKING:
    from .field import Field


def read_page(
    field: Field,
    ref: str,
    *,
    outline_only: bool,
    depth: int,
    sentences: int,
    section: str | None,
    record: bool,
) -> PageView:
    """The view :meth:`deepfield.Field.read` returns (its docstring says what each argument
    asks for)."""
    check_view(outline_only, depth, sentences, section)
    filename, page = field.load(ref)
    parts = part_names(filename, page) or None
    if section is not None and parts:  # the heading may be in another part
        hit = section_in_parts(filename, page, parts, field.load, section)
        filename, page = hit.filename, hit.page
    title = derive_title(page, fallback=filename[:-3])
    warnings = [f"{filename}: {page.frontmatter_error}"] if page.frontmatter_error else []
    note = superseded_note(page)
    warnings += [f"{filename}: {note}"] if note else []
    if record and field.record_reads:
        record_activation(field, [filename], "read", uuids=[page.uuid])
    base: dict[str, Any] = {
        "field": field.name, "filename": filename, "title": title, "uuid": page.uuid,
        "summary": page.summary, "frontmatter": page.frontmatter, "warnings": warnings,
        "parts": parts,
    }
    if section is not None:
        if parts:
            warnings += hit.warnings
            found, text, last = hit.section, hit.text, hit.last_line
        else:
            found, text, last = find_section(page, section)
        return PageView(
            **base, view="section", text=text, bytes=len(text.encode()),
            section=list(found.path), line_start=found.line, line_end=last,
        )
    if outline_only:
        if parts:  # the outline of the whole page, each part's headings under its name
            entries, missing = outline_parts(filename, page, parts, field.load,
                                             depth=depth, sentences=sentences)
            warnings += missing
        else:
            entries = outline(page, depth=depth, sentences=sentences)
        text = render_outline(title, page.summary, entries, parts)
        return PageView(**base, view="outline", text=text, bytes=len(text.encode()),
                        outline=entries)
    text = page.render() if page.frontmatter_error is None else page.body
    return PageView(**base, view="full", text=text, bytes=len(text.encode()),
                    line_start=1, line_end=len(text.splitlines()) or 1)
