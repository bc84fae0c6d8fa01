"""What ``Field.write`` does before and after storing a page, for supersession and review.

Before: a ``supersedes`` link is resolved and checked for cycles (a cycle refuses the write;
for a new page, whose name is not known yet, a cycle leaves it unlinked with a warning),
and a new page is compared with similar pages (see review.py); suspicious pairs mark the page
``review: pending``. After: the old pages get ``superseded_by`` and the pairs are queued.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import TYPE_CHECKING

from ..errors import DeepfieldError, SupersessionCycleError
from ..page import Page
from ..writer import refuse_special
from .review import REVIEW_KEY, Finding, enqueue, find_conflicts, settle
from .supersede import SUPERSEDES, check_cycle, link, refs, resolve_refs, take_over

if TYPE_CHECKING:
    from ..field import Field
    from ..writer import WriteResult


def review_default() -> bool:
    """Review on write is on unless ``DEEPFIELD_REVIEW=0`` (or ``Field.review_on_write``)."""
    return os.environ.get("DEEPFIELD_REVIEW", "1").strip().lower() not in {"0", "no", "false",
                                                                           "off"}


@dataclass
class WritePlan:
    supersedes: list[str] = dc_field(default_factory=list)
    findings: list[Finding] = dc_field(default_factory=list)
    warnings: list[str] = dc_field(default_factory=list)
    check_after: bool = False
    """Check for a supersession cycle once the new page has its filename."""


def before_write(fld: Field, page: Page, stem: str | None, review: bool) -> WritePlan:
    """Check (and possibly flag) ``page`` before it is stored; may raise on a cycle."""
    plan = WritePlan()
    index = fld.index_handle()
    existing = bool(page.uuid and [d for d in index.docs_by_uuid(page.uuid)
                                   if d.uuid == page.uuid])
    existing = existing or bool(stem and (fld.path / f"{stem}.md").exists())
    targets = refs(page.get(SUPERSEDES))
    for target in targets:  # index.md / listing.md are never pages: refused as `rm` does
        refuse_special(target, "name pages in `supersedes`: list them with `deepfield ls FIELD`")
    if targets:
        fld.ensure_synced(embed=False)
        plan.supersedes, plan.warnings = resolve_refs(fld, targets)
        own = _own_filename(fld, page, stem)
        if own is not None:  # an existing page: refuse a loop before anything is written
            check_cycle(fld, own, plan.supersedes)
        else:  # a new page: only a dangling reference to its future name can close a loop
            plan.check_after = True
    if review and not existing and not targets and page.get(REVIEW_KEY) is None:
        plan.findings = find_conflicts(fld, page, exclude_uuid=page.uuid)
        if plan.findings:
            page.set(REVIEW_KEY, "pending")
    return plan


def _own_filename(fld: Field, page: Page, stem: str | None) -> str | None:
    """The filename the page already has (an update), if any."""
    if stem and (fld.path / f"{stem}.md").exists():
        return f"{stem}.md"
    if page.uuid:
        docs = [d for d in fld.index_handle().docs_by_uuid(page.uuid) if d.uuid == page.uuid]
        if docs:
            return docs[0].filename
    return None


def after_write(fld: Field, result: WriteResult, plan: WritePlan) -> None:
    """Link superseded pages and queue review findings for the page just written."""
    if not result.pages:
        return
    first = result.pages[0]
    itself = [r for r in (first.filename, first.filename[:-3], first.uuid) if r]
    for warning in plan.warnings:  # a new page naming itself matched no page before it existed
        mine = next((r for r in itself if warning.startswith(f"supersedes {r!r}: no such")), None)
        result.warnings.append(f"supersedes {mine!r}: a page cannot supersede itself (left "
                               "as written)" if mine else warning)
    olds = [o for o in plan.supersedes if o != first.filename]
    if olds and plan.check_after:
        # A new page's name is known only now: an older page may already have named it in a
        # ``supersedes`` key that matched no page then. Linking would close a loop.
        try:
            check_cycle(fld, first.filename, olds)
        except SupersessionCycleError as exc:
            result.warnings.append(
                f"{exc.message}; {first.filename} was written but not linked: remove one of "
                "the two `supersedes` keys")
            olds = []
    linked = []
    for old in olds:  # the new page is stored: a page that cannot be linked is a warning
        try:
            result.warnings.extend(take_over(fld, old, first.filename)[1])
            link(fld, first.filename, [old])
            linked.append(old)
        except DeepfieldError as exc:
            result.warnings.append(
                f"{old} could not be marked superseded by {first.filename} ({exc.message}); "
                f"fix it, then run `deepfield supersede {fld.name} {old} {first.filename}`")
    if linked:  # the writer decided what the review queue asked about these pairs
        settle(fld, first.filename, linked)
    if plan.findings:
        ids = enqueue(fld, first.filename, first.uuid, plan.findings)
        for finding, item in zip(plan.findings, ids, strict=True):
            result.warnings.append(
                f"{first.filename} may be a {finding.kind} of {finding.old} ({finding.reason}); "
                f"queued for review as {item} (`deepfield review {fld.name}`)"
            )
