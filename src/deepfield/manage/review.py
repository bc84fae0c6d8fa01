"""The review queue: near-duplicates and likely contradictions found when a page is written.

When a new page is written (not an update of an existing uuid), it is compared with the few
most similar pages; the heuristic, stated plainly, is in conflicts.py (its names are
re-exported here).

Found pairs are appended to ``review/queue.jsonl`` and the new page gets ``review: pending``;
nothing is dropped or merged silently. A person (or a rule) resolves each item: accept (the
new page supersedes the old), merge (the new page's body and sources are appended to the old
page and the new page is archived) or keep-both (the flag is cleared). Every resolution is a
new line in the queue; no page is ever deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidPageError, PageNotFoundError, ReviewItemError
from ..page import derive_title, now_iso
from .conflicts import (
    CANDIDATES,
    DUPLICATE_JACCARD,
    FACT_CHARS,
    SUBJECT_OVERLAP,
    TEXT_CHARS,
    Features,
    Finding,
    compare,
    features,
    find_conflicts,
    title_terms,
)
from .supersede import (
    SUPERSEDED_BY,
    SUPERSEDES,
    SupersedeResult,
    refs,
    rewrite_keys,
    supersede,
)

if TYPE_CHECKING:
    from ..field import Field

__all__ = [
    "ACTIONS", "CANDIDATES", "DUPLICATE_JACCARD", "FACT_CHARS", "QUEUE_FILE", "REVIEW_DIR",
    "REVIEW_KEY", "SUBJECT_OVERLAP", "TEXT_CHARS", "Features", "Finding", "ReviewItem",
    "compare", "enqueue", "features", "find_conflicts", "items", "propose", "resolve_item",
    "settle", "settle_gone", "supersede_settling", "title_terms",
]

REVIEW_DIR = "review"
QUEUE_FILE = "queue.jsonl"
REVIEW_KEY = "review"
ACTIONS = ("accept", "merge", "keep-both")

# --------------------------------------------------------------------------- the queue


def _queue_path(fld: Field) -> Path:
    return fld.path / REVIEW_DIR / QUEUE_FILE


def _append(fld: Field, records: list[dict[str, Any]]) -> None:
    folder = fld.path / REVIEW_DIR
    folder.mkdir(exist_ok=True)
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    fd = os.open(folder / QUEUE_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)  # one append per batch: concurrent writers never interleave lines
    finally:
        os.close(fd)


def enqueue(fld: Field, new: str, new_uuid: str | None, findings: list[Finding]) -> list[str]:
    """Append one pending item per finding; returns their ids."""
    stamp = now_iso()
    records: list[dict[str, Any]] = [
        {"id": uuidlib.uuid4().hex[:8], "t": stamp, "status": "pending", "kind": f.kind,
         "new": new, "new_uuid": new_uuid, "old": f.old, "old_uuid": f.old_uuid,
         "reason": f.reason}
        for f in findings
    ]
    if records:
        _append(fld, records)
    return [str(r["id"]) for r in records]


def propose(fld: Field, new: str, old: str, reason: str, kind: str = "supersession") -> str:
    """Queue a proposal (e.g. an LLM's "new supersedes old") for a person or rule to
    confirm with ``resolve_item``; marks the new page ``review: pending``. Returns the id."""
    new_name, old_name = fld.resolve(new), fld.resolve(old)
    new_doc = fld.index_handle().doc_by_filename(new_name)
    old_doc = fld.index_handle().doc_by_filename(old_name)
    finding = Finding(kind, old_name, old_doc.uuid if old_doc else None, reason)
    (item,) = enqueue(fld, new_name, new_doc.uuid if new_doc else None, [finding])
    rewrite_keys(fld, new_name, {REVIEW_KEY: "pending"})
    return item


@dataclass
class ReviewItem:
    id: str
    kind: str
    new: str
    new_uuid: str | None
    old: str
    old_uuid: str | None
    reason: str
    created: str
    status: str = "pending"
    resolved: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "new": self.new,
                "new_uuid": self.new_uuid, "old": self.old, "old_uuid": self.old_uuid,
                "reason": self.reason, "created": self.created, "resolved": self.resolved}


def items(fld: Field, *, include_resolved: bool = False) -> tuple[list[ReviewItem], list[str]]:
    """The queue folded by item id (latest status wins), and warnings for corrupt lines."""
    path = _queue_path(fld)
    found: dict[str, ReviewItem] = {}
    warnings: list[str] = []
    if not path.is_file():
        return [], warnings
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            item_id = str(record["id"])
            if "kind" in record:
                found[item_id] = ReviewItem(
                    item_id, str(record["kind"]), str(record["new"]), record.get("new_uuid"),
                    str(record["old"]), record.get("old_uuid"), str(record.get("reason", "")),
                    str(record.get("t", "")))
            elif item_id in found:
                found[item_id].status = str(record["status"])
                found[item_id].resolved = str(record.get("t", ""))
        except (ValueError, KeyError, TypeError, RecursionError):  # (nested too deep)
            warnings.append(f"{REVIEW_DIR}/{QUEUE_FILE}: line {number} is corrupt, skipped")
    listed = [i for i in found.values() if include_resolved or i.status == "pending"]
    return listed, warnings


def _locate(fld: Field, filename: str, uuid: str | None) -> str:
    """Where a queued page is now (found by uuid first, so renames survive)."""
    if uuid:
        try:
            return fld.resolve(uuid)
        except PageNotFoundError:
            pass
    return fld.resolve(filename)


def resolve_item(fld: Field, item_id: str, action: str) -> dict[str, Any]:
    """Apply ``action`` (accept | merge | keep-both) to a pending item; returns what changed."""
    if action not in ACTIONS:
        raise ReviewItemError(f"unknown review action {action!r}", "use accept, merge or keep-both")
    pending, _ = items(fld, include_resolved=True)
    matches = [i for i in pending if i.id.startswith(item_id)] if item_id else []
    if len(matches) != 1:
        what = "no" if not matches else "more than one"
        raise ReviewItemError(f"{what} review item matches {item_id!r} in {fld.name}")
    item = matches[0]
    if item.status != "pending":
        raise ReviewItemError(f"review item {item.id} is already {item.status}")
    new = _where(fld, item.new, item.new_uuid)
    old = _where(fld, item.old, item.old_uuid)
    if action != "keep-both" and (new is None or old is None):
        gone = item.new if new is None else item.old
        raise ReviewItemError(
            f"{gone} is no longer in {fld.name} (archived or removed), so review item "
            f"{item.id} cannot be {'accepted' if action == 'accept' else 'merged'}",
            f"dismiss it with `deepfield review {fld.name} {item.id} keep-both`, or bring "
            f"the page back with `deepfield restore {fld.name} {gone}` first")
    outcome: dict[str, Any] = {"field": fld.name, "id": item.id, "action": action,
                               "new": new or item.new, "old": old or item.old}
    if action == "accept":
        assert new is not None and old is not None
        outcome["supersede"] = supersede(fld, old, new).to_json()
        status = "accepted"
    elif action == "merge":
        assert new is not None and old is not None
        outcome["merged_into"] = old
        outcome["relinked"] = _merge(fld, old, new)
        # Resolved before the archive: archiving settles the other items naming the page.
        _append(fld, [{"id": item.id, "t": now_iso(), "status": "merged", "action": action}])
        archived = fld.archive_page(new)
        outcome["archived"] = archived.archived[0]
        outcome["settled_reviews"] = archived.settled
        outcome["unsuperseded"] = archived.unsuperseded
        outcome["warnings"] = archived.warnings
        return outcome
    else:  # a dismissal: whatever became of the pages
        status = "kept-both"
    _append(fld, [{"id": item.id, "t": now_iso(), "status": status, "action": action}])
    if new is not None:
        _clear_flag(fld, new, item.new_uuid, item.id)
    return outcome


def _where(fld: Field, filename: str, uuid: str | None) -> str | None:
    """Where a queued page is now, or None when it left the field (archived, removed)."""
    try:
        return _locate(fld, filename, uuid)
    except PageNotFoundError:
        return None


def settle_gone(fld: Field) -> list[str]:
    """Close the pending items one of whose pages left the field (``rm``, ``forget``, a
    merge) as ``obsolete``, and clear the other page's flag once it has no pending item:
    such an item could never be accepted or merged, and its ``review: pending`` kept the
    other page from being forgotten. Returns their ids."""
    pending, _ = items(fld)
    done: list[ReviewItem] = []
    flagged: list[tuple[str, ReviewItem]] = []
    for item in pending:
        new = _where(fld, item.new, item.new_uuid)
        if new is not None and _where(fld, item.old, item.old_uuid) is not None:
            continue
        done.append(item)
        if new is not None:
            flagged.append((new, item))
    if done:
        _append(fld, [{"id": i.id, "t": now_iso(), "status": "obsolete", "action": "archive"}
                      for i in done])
        for new, item in flagged:
            _clear_flag(fld, new, item.new_uuid, item.id)
    return [i.id for i in done]


def supersede_settling(fld: Field, old_ref: str, new_ref: str) -> SupersedeResult:
    """:func:`~deepfield.manage.supersede.supersede`, and the review items about the two pages
    settled: a person who marks one page superseding the other has decided what the queue
    asked (``deepfield supersede``, the console)."""
    result = supersede(fld, old_ref, new_ref)
    result.settled = settle(fld, result.new, result.old)
    return result


def settle(fld: Field, new: str, olds: list[str]) -> list[str]:
    """Close the pending items about ``new`` and one of ``olds`` (either way round: the queue's
    "new" may be the older page) as ``superseded``; returns their ids."""
    pending, _ = items(fld)
    done = []
    for item in pending:
        try:
            pair = {_locate(fld, item.new, item.new_uuid), _locate(fld, item.old, item.old_uuid)}
        except PageNotFoundError:
            continue
        if any(pair == {new, old} for old in olds):
            done.append(item)
    if done:
        _append(fld, [{"id": i.id, "t": now_iso(), "status": "superseded",
                       "action": "supersede"} for i in done])
        for item in done:
            _clear_flag(fld, _locate(fld, item.new, item.new_uuid), item.new_uuid, item.id)
    return [i.id for i in done]


def _merge(fld: Field, old: str, new: str) -> list[str]:
    """Append the new page's body (and sources) to the old page, keeping the old uuid.
    Returns the pages the old page now supersedes in the merged page's stead."""
    _, target = fld.load(old)
    _, source = fld.load(new)
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    heading = derive_title(source, fallback=new[:-3])
    body = target.body.rstrip("\n") + f"\n\n## {heading} (merged {stamp})\n\n"
    body += source.body.strip("\n") + "\n"
    target.body = body
    sources = refs(target.get("sources")) + refs(target.get("source"))
    extra = refs(source.get("sources")) + refs(source.get("source"))
    if [s for s in extra if s not in sources]:
        target.set("sources", list(dict.fromkeys(sources + extra)))
    # The old page takes over what the new one replaced, except itself (that is a cycle), and
    # is no longer superseded by the page merged into it (which goes to the archive). Both
    # lists are kept: a dropped reference was released by the archive and shown again.
    itself = {old, old[:-3], target.uuid}
    current = refs(target.get(SUPERSEDES))
    known = ({_where(fld, r, None) for r in current} | set(current)) - {None}
    inherited = [r for r in refs(source.get(SUPERSEDES))
                 if r not in itself and r not in known and _where(fld, r, None) not in known]
    if inherited:
        combined = current + inherited
        target.set(SUPERSEDES, combined[0] if len(combined) == 1 else combined)
    merged = {new, new[:-3], source.uuid} - {None}
    if refs(target.get(SUPERSEDED_BY)) and set(refs(target.get(SUPERSEDED_BY))) <= merged:
        target.remove(SUPERSEDED_BY)
    fld.write(target, name=old[:-3], review=False)  # links the inherited pages to ``old``
    return [name for r in inherited if (name := _where(fld, r, None)) and name != old]


def _clear_flag(fld: Field, filename: str, uuid: str | None, done: str) -> None:
    """Drop ``review: pending`` from a page once none of its items is pending (items are
    matched by uuid too: the page may have been renamed since it was queued)."""
    still, _ = items(fld)
    if any((i.new == filename or (uuid and i.new_uuid == uuid)) and i.id != done
           for i in still):
        return
    with contextlib.suppress(OSError, PageNotFoundError, InvalidPageError):
        rewrite_keys(fld, filename, {REVIEW_KEY: None})
