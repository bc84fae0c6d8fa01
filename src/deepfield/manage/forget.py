"""Forgetting: move the coldest pages into ``archive/`` (never deleted, restorable).

A page's heat is its base-level activation (activation.py) over its logged uses plus its last
update, counted as one use, so a page nobody opened fades from the time it was written.
Protected pages are never archived and are reported as kept: ``pinned: true``,
``always_load: true`` (``yes``, ``"true"`` and 1 count too: a person meant it), domain pages (a
``role`` key), pages waiting for review (``review: pending``: a conflict must be resolved, not
hidden), the introduction and the catalogue (which are not pages anyway). A page that
supersedes a page that stays is kept too: archived, it would release its predecessor, and the
outdated fact would be search's answer again. Everything is read
from the index (no page file is parsed), so a dry run over 10,000 pages takes well under a second.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..archive import original_name
from ..errors import DeepfieldError, PageNotFoundError
from .activation import iso_time, load_activation
from .supersede import SUPERSEDED_BY, refs

if TYPE_CHECKING:
    from ..field import Field

DAY = 86_400.0


@dataclass(frozen=True)
class ForgetEntry:
    filename: str
    title: str
    activation: float
    last_used: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"filename": self.filename, "title": self.title,
                "activation": round(self.activation, 4), "last_used": self.last_used,
                "reason": self.reason}


@dataclass
class ForgetReport:
    field: str
    dry_run: bool
    pages: int
    forgotten: list[ForgetEntry] = dc_field(default_factory=list)
    kept: list[ForgetEntry] = dc_field(default_factory=list)
    """Protected pages that would otherwise have been forgotten."""
    archived: list[str] = dc_field(default_factory=list)
    not_archived: list[str] = dc_field(default_factory=list)
    """Pages that were to be archived but could not be moved (see ``warnings``)."""
    warnings: list[str] = dc_field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "dry_run": self.dry_run, "pages": self.pages,
                "forgotten": [e.to_json() for e in self.forgotten],
                "kept": [e.to_json() for e in self.kept], "archived": self.archived,
                "not_archived": self.not_archived,
                "warnings": self.warnings, "seconds": round(self.seconds, 3)}


def protected_reason(frontmatter: dict[str, Any] | None) -> str | None:
    """Why a page must never be forgotten, or None."""
    front = frontmatter or {}
    if _truthy(front.get("pinned")):
        return "pinned"
    if _truthy(front.get("always_load")):
        return "always_load"
    if front.get("role"):
        return f"domain page (role: {front.get('role')})"
    if str(front.get("review", "")).strip().lower() == "pending":
        return "review pending (resolve it with `deepfield review`)"
    return None


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")


def _moment(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def forget(
    fld: Field,
    *,
    keep_top: int | None = None,
    older_than_days: float | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> ForgetReport:
    """Archive pages that are cold: outside the ``keep_top`` most active pages and/or unused
    for more than ``older_than_days`` (both conditions when both are given)."""
    if keep_top is None and older_than_days is None:
        raise DeepfieldError(
            "forget needs a rule: how many pages to keep or how old a page must be",
            "give --keep-top K and/or --older-than DAYS; add --dry-run to preview",
        )
    if keep_top is not None and keep_top < 0:
        raise DeepfieldError(f"--keep-top must be a number from 0 up, not {keep_top}",
                             "give how many pages to keep")
    if older_than_days is not None and (not math.isfinite(older_than_days)
                                        or older_than_days < 0):
        # "nan" compares false with everything: every page was older than it.
        raise DeepfieldError(f"--older-than must be a finite number of days from 0 up, not "
                             f"{older_than_days!r}", "give a number of days, such as 90")
    started = time.perf_counter()
    moment = time.time() if now is None else now
    log_ = load_activation(fld.path)
    docs = fld.pages()
    report = ForgetReport(fld.name, dry_run, len(docs), warnings=list(log_.warnings))
    scored: list[tuple[float, float, Any]] = []
    for doc in docs:
        front = doc.frontmatter or {}
        # The later of the page's own date and its file's: a hand edit (or an imported note
        # keeping its source's ``updated``) is a change too.
        stated = _moment(front.get("updated")) or _moment(front.get("created"))
        found = [t for t in (stated, _moment(doc.last_modified)) if t is not None]
        touched = max(found) if found else moment
        key = log_.key_for(doc.filename, doc.uuid)
        b = log_.base_level(key, moment, extra=[min(touched, moment)])
        last = max(touched, log_.last_used(key) or -math.inf)
        scored.append((b if b is not None else -math.inf, last, doc))
    scored.sort(key=lambda item: (-item[0], -item[1], item[2].filename))
    cutoff = None if older_than_days is None else moment - older_than_days * DAY
    # Ranks count the pages forget may archive, a split page once (at its best part):
    # protected pages, kept anyway, and a page's many parts pushed the others out of the
    # top K ("rank 5 (keeping 3)" for the first page archived).
    ranked = 0
    group_rank: dict[str, int] = {}
    for b, last, doc in scored:
        reason = protected_reason(doc.frontmatter)
        group = _split_group(doc.frontmatter)
        if reason:
            rank = ranked
        elif group is not None and group in group_rank:
            rank = group_rank[group]
        else:
            rank = ranked
            ranked += 1
            if group is not None:
                group_rank[group] = rank
        if keep_top is not None and rank < keep_top:
            continue
        if cutoff is not None and last >= cutoff:
            continue
        entry = ForgetEntry(doc.filename, doc.title, b, iso_time(last),
                            reason or _why(rank, keep_top, last, moment))
        (report.kept if reason else report.forgotten).append(entry)
    _keep_split_pages(report, docs)
    while _keep_successors(report, docs):  # a kept successor may be a part of a split page
        _keep_split_pages(report, docs)
    if not dry_run:
        gone: set[str] = set()  # the other parts of a split page go with its first
        for entry in report.forgotten:
            if entry.filename in gone:
                continue
            try:
                done = fld.archive_page(entry.filename)
            except (PageNotFoundError, OSError) as exc:  # removed or locked meanwhile: go on
                why = exc.message if isinstance(exc, PageNotFoundError) else str(exc)
                report.warnings.append(f"{entry.filename} was not archived: {why}")
                report.not_archived.append(entry.filename)
                continue
            report.archived += done.archived
            gone |= {original_name(where.rsplit("/", 1)[-1]) for where in done.archived}
            report.warnings += done.warnings + [
                f"{name} is no longer marked superseded (its successor {entry.filename} was "
                "archived; its superseded_by link was removed)" for name in done.unsuperseded]
    report.seconds = time.perf_counter() - started
    return report


def _split_group(frontmatter: dict[str, Any] | None) -> str | None:
    """The ``split_from`` shared by the parts of one split page, else None."""
    front = frontmatter or {}
    if front.get("split_from") and front.get("part") is not None:
        return str(front["split_from"])
    return None


def _keep_split_pages(report: ForgetReport, docs: list[Any]) -> None:
    """A split page is forgotten whole or not at all (``rm`` archives all its parts): a cold
    part whose page has a part still in use is kept."""
    cold = {e.filename for e in report.forgotten}
    groups: dict[str, set[str]] = {}
    for doc in docs:
        front = doc.frontmatter or {}
        if front.get("split_from") and front.get("part") is not None:
            groups.setdefault(str(front["split_from"]), set()).add(doc.filename)
    origin = {name: key for key, names in groups.items() for name in names}
    held = [e for e in report.forgotten
            if e.filename in origin and not groups[origin[e.filename]] <= cold]
    for entry in held:
        report.forgotten.remove(entry)
        report.kept.append(ForgetEntry(entry.filename, entry.title, entry.activation,
                                       entry.last_used, "another part of this split page "
                                       "is in use (a split page is forgotten whole)"))


def _keep_successors(report: ForgetReport, docs: list[Any]) -> bool:
    """Keep a page whose predecessor stays: archiving it released the predecessor, and the
    outdated page came back as the answer to search (a superseded page someone read for
    reference can rank above its successor). Returns whether a page was moved to kept."""
    cold = {e.filename for e in report.forgotten}
    named: dict[str, str] = {}
    for doc in docs:
        named[doc.filename] = named[doc.filename[:-3]] = doc.filename
        if doc.uuid:
            named[doc.uuid] = doc.filename
    keep: dict[str, str] = {}
    for doc in docs:
        if doc.filename in cold:
            continue
        newer = [named[r] for r in refs((doc.frontmatter or {}).get(SUPERSEDED_BY))
                 if r in named]
        if newer and all(n in cold for n in newer):  # all its successors would go
            for name in newer:
                keep.setdefault(name, doc.filename)
    for entry in [e for e in report.forgotten if e.filename in keep]:
        report.forgotten.remove(entry)
        report.kept.append(ForgetEntry(
            entry.filename, entry.title, entry.activation, entry.last_used,
            f"it supersedes {keep[entry.filename]}, which stays (archived, it would show "
            "the outdated page in search again)"))
    return bool(keep)


def _why(rank: int, keep_top: int | None, last: float, now: float) -> str:
    parts = []
    if keep_top is not None:
        parts.append(f"rank {rank + 1} by activation (keeping {keep_top})")
    parts.append(f"last used or updated {max(0.0, (now - last) / DAY):.0f} days ago")
    return "; ".join(parts)
