"""Supersession: a newer page replaces an older one without deleting it.

The new page says ``supersedes: <filename or uuid>`` (a string or a list); deepfield then sets
``superseded_by: <new filename>`` on the old page. Search and context leave superseded pages
out by default, but they stay in the folder, readable and reachable from their successor.
Cycles (A supersedes B supersedes A) are refused before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import TYPE_CHECKING, Any

from ..archive import part_names, read_page, split_parts
from ..errors import InvalidPageError, PageNotFoundError, SupersessionCycleError
from ..fsutil import atomic_write, field_lock
from ..listing import refresh_listing
from ..page import SPECIAL_FILES, Page
from ..page_text import TextLayout, decode_page_file
from ..scan import source_files
from ..writer import refuse_special

if TYPE_CHECKING:
    from ..field import Field
    from ..index import FieldIndex

SUPERSEDES = "supersedes"
SUPERSEDED_BY = "superseded_by"


def is_superseded(frontmatter: dict[str, Any] | None) -> bool:
    """A page another page replaced: ``superseded_by`` names something (search, context and
    the researcher's planner all leave such pages out)."""
    return bool(refs((frontmatter or {}).get(SUPERSEDED_BY)))


def hidden_pages(docs: Iterable[Any]) -> set[str]:
    """The filenames of ``docs`` (index rows: filename, uuid, frontmatter) that a page among
    them supersedes: a ``superseded_by`` naming no page (its successor deleted by hand) hides
    nothing, as in search (manage.activation.orphaned)."""
    rows = list(docs)
    names = {n for d in rows for n in (d.filename, d.filename[:-3], d.uuid) if n}
    return {d.filename for d in rows
            if any(r in names for r in refs((d.frontmatter or {}).get(SUPERSEDED_BY)))}


def refs(value: Any) -> list[str]:
    """The page references in a ``supersedes`` / ``superseded_by`` value (str or list)."""
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    return []


@dataclass
class SupersedeResult:
    field: str
    new: str
    old: list[str]
    changed: list[str] = dc_field(default_factory=list)
    warnings: list[str] = dc_field(default_factory=list)
    settled: list[str] = dc_field(default_factory=list)
    """Review items about this pair that the supersession settled (manage/review.py)."""

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "new": self.new, "superseded": self.old,
                "changed": self.changed, "warnings": self.warnings,
                "settled_reviews": self.settled}


def _graph(fld: Field) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Edges ``newer -> {older}`` from both keys of every indexed page, and uuid -> filename."""
    docs = fld.index_handle().docs()
    by_uuid = {d.uuid: d.filename for d in docs if d.uuid}
    names = {d.filename for d in docs}

    def name_of(ref: str) -> str | None:
        if ref in by_uuid:
            return by_uuid[ref]
        candidate = ref if ref.endswith(".md") else f"{ref}.md"
        return candidate if candidate in names else None

    edges: dict[str, set[str]] = {}
    for doc in docs:
        front = doc.frontmatter or {}
        for ref in refs(front.get(SUPERSEDES)):
            older = name_of(ref)
            if older:
                edges.setdefault(doc.filename, set()).add(older)
        for ref in refs(front.get(SUPERSEDED_BY)):
            newer = name_of(ref)
            if newer:
                edges.setdefault(newer, set()).add(doc.filename)
    return edges, by_uuid


def check_cycle(fld: Field, new: str, olds: Iterable[str]) -> None:
    """Raise SupersessionCycleError if ``new`` superseding ``olds`` would close a loop."""
    edges, _ = _graph(fld)
    for old in olds:
        if old == new:
            raise SupersessionCycleError(f"{new} cannot supersede itself")
        seen: set[str] = set()
        stack = [old]
        while stack:  # can the old page already reach the new one through older links?
            current = stack.pop()
            if current == new:
                raise SupersessionCycleError(
                    f"{new} superseding {old} would make a cycle: {old} already "
                    f"supersedes {new}, directly or through other pages"
                )
            if current not in seen:
                seen.add(current)
                stack.extend(edges.get(current, ()))


def resolve_refs(fld: Field, values: Iterable[str]) -> tuple[list[str], list[str]]:
    """(filenames found, warnings for references that match no page)."""
    found: list[str] = []
    warnings: list[str] = []
    for ref in values:
        try:
            name = fld.resolve(ref)
            number, parts = parts_of(fld, name)
            if name in SPECIAL_FILES:  # the introduction or the catalogue: never a page
                warnings.append(f"supersedes {ref!r}: {name} is not a page (left as written)")
            elif number > 1 and parts:
                warnings.append(f"supersedes {ref!r}: {name} is part {number} of the split "
                                f"page {parts[0]}, which is superseded whole")
                found.append(parts[0])
            else:
                found.append(name)
        except PageNotFoundError:
            warnings.append(f"supersedes {ref!r}: no such page in {fld.name} (left as written)")
    return found, warnings


def _rewritable(fld: Field, filename: str) -> tuple[str, TextLayout, Page]:
    """A page's text, layout and parse for a rewrite of its keys; InvalidPageError when it
    cannot be rewritten without losing something (not UTF-8, unreadable frontmatter)."""
    current, layout = decode_page_file((fld.path / filename).read_bytes(), filename)
    page = Page.parse(current)
    if page.frontmatter_error:
        raise InvalidPageError(
            f"{filename} has unreadable frontmatter ({page.frontmatter_error})",
            "fix the YAML between its '---' lines, then run the command again",
        )
    return current, layout, page


def rewrite_keys(fld: Field, filename: str, changes: dict[str, Any]) -> bool:
    """Set (value) or remove (None) frontmatter keys of one page in place, keeping key order,
    comments and ``updated`` (metadata only: the content did not change), and the file's BOM
    and CRLF line endings. A page that is not UTF-8 raises InvalidPageError, untouched.
    Returns True if the file changed. Takes the field lock."""
    fld.check_writable()  # a remote field's mirror: the next fetch would not undo it
    with field_lock(fld.path):
        path = fld.path / filename
        current, layout, page = _rewritable(fld, filename)
        for key, value in changes.items():
            if value is None:
                page.remove(key)
            else:
                page.set(key, value)
        text = page.render()
        if text == current:
            return False
        atomic_write(path, layout.encode(text))
        index = fld.index_handle()
        report = index.sync_names(source_files(fld.path, {filename}), {filename})
        refresh_listing(fld.path, fld.name, index, report)
    fld.mark_changed({filename})  # read again at the field's next sync
    return True


def take_over(fld: Field, old: str, new: str) -> tuple[list[str], list[str]]:
    """Before ``new`` supersedes ``old``: an earlier successor of ``old`` stops claiming it
    (its ``supersedes`` loses ``old``), so the files never tell two stories. Returns (pages
    changed, warnings saying what happened)."""
    doc = fld.index_handle().doc_by_filename(old)
    earlier = refs((doc.frontmatter or {}).get(SUPERSEDED_BY)) if doc else []
    names = {old, old[:-3]} | ({doc.uuid} if doc and doc.uuid else set())
    changed: list[str] = []
    warnings: list[str] = []
    for ref in earlier:
        try:
            before = fld.resolve(ref)
        except PageNotFoundError:
            continue  # gone: nothing claims it any more
        if before == new:
            continue
        try:
            claimed = refs(_rewritable(fld, before)[2].get(SUPERSEDES))
            left = [r for r in claimed if r not in names]
            value: Any = None if not left else left[0] if len(left) == 1 else left
            if left != claimed and rewrite_keys(fld, before, {SUPERSEDES: value}):
                changed.append(before)
        except (InvalidPageError, OSError) as exc:
            why = exc.message if isinstance(exc, InvalidPageError) else str(exc)
            warnings.append(f"{before} still says it supersedes {old}: {why}")
        warnings.append(f"{old} was superseded by {before}; it is now superseded by {new} "
                        f"({old} was removed from {before}'s supersedes)")
    return changed, warnings


def parts_of(fld: Field, filename: str) -> tuple[int, list[str]]:
    """(this file's part number, every live part of its page, the first first) for a part of
    a split page; (1, [filename]) for a whole page."""
    page = read_page(fld.path / filename)
    names = part_names(page, filename) if page is not None else None
    if page is None or names is None:
        return 1, [filename]
    number = page.get("part")
    siblings = split_parts(fld.path, filename)  # live, same ``split_from``
    return (number if isinstance(number, int) else 1), [n for n in names if n in siblings]


def refuse_part(fld: Field, filename: str, role: str) -> None:
    """InvalidPageError for a later part of a split page: superseding it hid the middle of a
    document from search while the rest stayed found (``rm``/``forget`` take pages whole)."""
    number, names = parts_of(fld, filename)
    if number > 1 and names:
        raise InvalidPageError(
            f"{filename} is part {number} of the split page {names[0]}; a split page is "
            "superseded whole",
            f"name the page itself as {role}: {names[0][:-3]}")


def link(fld: Field, new: str, olds: Iterable[str]) -> list[str]:
    """Set ``superseded_by: new`` on each old page, and on every part of a split one (a page
    is hidden whole); returns the pages changed."""
    return [part for old in olds for part in parts_of(fld, old)[1] or [old]
            if rewrite_keys(fld, part, {SUPERSEDED_BY: new})]


def supersede(fld: Field, old_ref: str, new_ref: str) -> SupersedeResult:
    """Mark page ``new_ref`` as superseding ``old_ref`` (both pages kept)."""
    fld.ensure_synced(embed=False)
    old, new = fld.resolve(old_ref), fld.resolve(new_ref)
    for name in (old, new):  # frontmatter in the generated catalogue froze it for good
        refuse_special(name, "supersede pages: list them with `deepfield ls FIELD`")
    refuse_part(fld, old, "OLD")
    new = parts_of(fld, new)[1][0]  # a split page is named by its first part
    check_cycle(fld, new, [old])
    _rewritable(fld, old)  # both pages change or neither: refuse before the new one is written
    result = SupersedeResult(fld.name, new, [old])
    _, page = fld.load(new)
    current = refs(page.get(SUPERSEDES))
    old_doc = fld.index_handle().doc_by_filename(old)
    known = {old, old[:-3]} | ({old_doc.uuid} if old_doc and old_doc.uuid else set())
    if not known & set(current):
        value: Any = old if not current else [*current, old]
        if rewrite_keys(fld, new, {SUPERSEDES: value}):
            result.changed.append(new)
    changed, result.warnings = take_over(fld, old, new)
    result.changed += changed + link(fld, new, [old])
    return result


def release(fld: Field, gone: dict[str, str | None]) -> tuple[list[str], list[str]]:
    """Pages whose ``superseded_by`` named a page that just left the field (``gone``:
    filename -> uuid, archived by ``rm`` or ``forget``) lose that reference: a page replaced
    by nothing would otherwise be hidden from search for good. Returns (the pages changed,
    warnings for those that could not be): the caller says both, since the user's page is
    rewritten, or stays hidden, never silently."""
    names = {ref for filename, uuid in gone.items()
             for ref in (filename, filename[:-3], uuid) if ref}
    changed: list[str] = []
    warnings: list[str] = []
    for doc in fld.index_handle().docs():
        newer = refs((doc.frontmatter or {}).get(SUPERSEDED_BY))
        left = [ref for ref in newer if ref not in names]
        if len(left) == len(newer):
            continue
        value: Any = None if not left else left[0] if len(left) == 1 else left
        try:
            if rewrite_keys(fld, doc.filename, {SUPERSEDED_BY: value}):
                changed.append(doc.filename)
        except (InvalidPageError, OSError) as exc:  # not UTF-8, bad YAML, unwritable
            why = exc.message if isinstance(exc, InvalidPageError) else str(exc)
            warnings.append(
                f"{doc.filename} still says superseded_by {', '.join(newer)}, which is gone, "
                f"so search hides it: {why}; remove that key by hand")
    return changed, warnings


def relink(fld: Field, filename: str, page: Page) -> tuple[list[str], list[str]]:
    """A restored page that ``supersedes`` live pages hides them again (release undone):
    sets ``superseded_by`` on those that no other page supersedes. (pages changed,
    warnings)."""
    found, _missing = resolve_refs(fld, refs(page.get(SUPERSEDES)))
    olds = []
    for old in found:
        doc = fld.index_handle().doc_by_filename(old)
        if old == filename or doc is None or refs((doc.frontmatter or {}).get(SUPERSEDED_BY)):
            continue
        olds.append(old)
    try:
        check_cycle(fld, filename, olds)
    except SupersessionCycleError as exc:
        return [], [f"{filename} supersedes {', '.join(olds)}, not linked again: {exc.message}"]
    changed, warnings = [], []
    for old in olds:  # the page is restored: one that cannot be linked is a warning
        try:
            changed += link(fld, filename, [old])
        except InvalidPageError as exc:
            warnings.append(f"{old} was not marked superseded by {filename} again "
                            f"({exc.message})")
    return changed, warnings


def link_warnings(index: FieldIndex) -> list[str]:
    """``status``/``index`` warnings for supersede links that no longer hold: a
    ``superseded_by`` naming no page (its successor deleted by hand; search shows the page
    again) and a ``supersedes`` the older page does not confirm (it names another successor)."""
    rows = index.conn.execute(
        "SELECT filename, uuid, json_extract(frontmatter, '$.supersedes'), "
        "json_extract(frontmatter, '$.superseded_by') FROM df_docs WHERE "
        "json_extract(frontmatter, '$.supersedes') IS NOT NULL OR "
        "json_extract(frontmatter, '$.superseded_by') IS NOT NULL").fetchall()
    if not rows:
        return []
    named: dict[str, str] = {}
    for filename, uuid in index.conn.execute("SELECT filename, uuid FROM df_docs"):
        named[filename] = named[filename[:-3]] = filename
        if uuid:
            named[uuid] = filename
    newer_of: dict[str, set[str]] = {}
    out: list[str] = []
    for filename, _uuid, _older, newer in rows:
        found = refs(_json(newer))
        newer_of[filename] = {named[r] for r in found if r in named}
        if found and not newer_of[filename]:
            out.append(f"{filename}: superseded_by {', '.join(found)}, which is gone (the page "
                       "is shown in search again); remove the key, or restore the successor")
    for filename, _uuid, older, _newer in rows:
        for ref in refs(_json(older)):
            old = named.get(ref)
            if old and old != filename and newer_of.get(old) and filename not in newer_of[old]:
                out.append(f"{filename}: supersedes {old}, but {old} is superseded by "
                           f"{', '.join(sorted(newer_of[old]))}; remove {old} from its "
                           "`supersedes`")
    return out


def _json(value: Any) -> Any:
    """A ``json_extract`` result: a list comes back as JSON text."""
    if isinstance(value, str) and value.startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def superseded_note(page: Page) -> str | None:
    """A one-line note for readers of a superseded page, else None."""
    newer = refs(page.get(SUPERSEDED_BY))
    if not newer:
        return None
    return f"this page is superseded by {', '.join(newer)} (kept for reference)"
