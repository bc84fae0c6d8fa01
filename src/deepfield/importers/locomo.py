"""Import LoCoMo conversations: one field per conversation, one page per session (GAM layout).

Each page has a header (session number, date and time, speakers) and then one line per turn,
``Speaker (D1:3): text``, with shared images kept as ``[image: caption]``. The dialogue ids stay
in the text so retrieval can be scored turn by turn and every citation can be checked. Page
uuids are derived from the conversation and session, so importing twice changes nothing; the
files each import wrote are recorded (``.deepfield/imports.json``), so a page nobody touched
since (split into parts or not) is updated when the dataset changes, and an edited one is kept.
The dataset's known faults (dates for sessions without turns, missing keys) are tolerated;
turns without text are left out, each counted in a warning.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid as uuidlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..field import Field
from ..page import Page, slugify
from ..store import Store
from ..writer import free_names
from .manifest import Manifest, file_digests

MANIFEST_KEY = "locomo"
"""Where ``.deepfield/imports.json`` keeps, per session page uuid, the files last written."""

_NAMESPACE = uuidlib.UUID("5b0e7d8e-3f51-4f5c-9a0e-6c0e2d1b7a10")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Session:
    conversation: str
    number: int
    when: str
    speakers: tuple[str, ...]
    turns: list[dict[str, Any]]
    malformed: list[str] = dc_field(default_factory=list)
    """Why each turn left out was left out (``turn 3: no text``)."""


@dataclass
class ImportReport:
    fields: list[str] = dc_field(default_factory=list)
    pages_written: int = 0
    pages_unchanged: int = 0
    pages_kept: int = 0
    """Session pages edited in the field since their import, left as they are."""
    sessions_skipped: int = 0
    turns_skipped: int = 0
    """Turns without text (or not objects), left out of their session's page."""
    warnings: list[str] = dc_field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "fields": self.fields, "pages_written": self.pages_written,
            "pages_unchanged": self.pages_unchanged, "pages_kept": self.pages_kept,
            "sessions_skipped": self.sessions_skipped,
            "turns_skipped": self.turns_skipped, "warnings": self.warnings,
        }


LAYOUT_HINT = ("give a LoCoMo file such as locomo10.json: a JSON list of objects, each with a "
               "'sample_id' and a 'conversation' mapping holding session_1, session_2, … "
               "lists of {speaker, dia_id, text} turns")


def load_conversations(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{path} is not LoCoMo JSON: {exc}", LAYOUT_HINT) from None
    except RecursionError:  # ``[[[…]]]`` deeper than Python's recursion limit
        raise ImportFormatError(f"{path} is not LoCoMo JSON: nested too deeply",
                                LAYOUT_HINT) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(
        isinstance(c, dict) and isinstance(c.get("conversation"), dict) for c in data
    ):
        raise ImportFormatError(f"{path} is not LoCoMo JSON", LAYOUT_HINT)
    if not data:  # ``[]``: importing it would report success having done nothing
        raise ImportFormatError(f"{path} holds no conversations", LAYOUT_HINT)
    return data


def iter_sessions(sample: dict[str, Any]) -> Iterator[Session]:
    conversation = sample["conversation"]
    name = str(sample.get("sample_id") or "conversation")
    speakers = tuple(
        str(conversation[key]) for key in ("speaker_a", "speaker_b") if conversation.get(key)
    )
    numbers = sorted(
        int(m.group(1)) for key in conversation if (m := _SESSION_KEY.match(key))
    )
    for number in numbers:
        turns = conversation.get(f"session_{number}")
        if not isinstance(turns, list):  # reported by the importer as a session without turns
            turns = []
        when = str(conversation.get(f"session_{number}_date_time") or "")
        good, malformed = [], []
        for position, turn in enumerate(turns, 1):
            problem = turn_problem(turn)
            if problem is None:
                good.append(turn)
            else:
                malformed.append(f"turn {position}: {problem}")
        yield Session(name, number, when, speakers, good, malformed)


def turn_problem(turn: object) -> str | None:
    """Why ``turn`` cannot be a line of the page (it would read ``A (?): None`` or
    ``? (?): ``), or None. A missing speaker or ``dia_id`` is tolerated (``?``): the line
    still holds what was said."""
    if not isinstance(turn, dict):
        return f"a JSON {type(turn).__name__}, not an object"
    text = turn.get("text")
    if not isinstance(text, str) or not (text.strip() or turn.get("blip_caption")):
        return "no text"
    return None


def parse_when(when: str) -> str | None:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00' (local time, as the dataset gives)."""
    try:
        moment = dt.datetime.strptime(" ".join(when.split()), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return moment.isoformat()


def turn_line(turn: dict[str, Any]) -> str:
    text = " ".join(str(turn.get("text", "")).split())
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {' '.join(str(caption).split())}]".strip()
    return f"{turn.get('speaker') or '?'} ({turn.get('dia_id') or '?'}): {text}"


def session_page(session: Session) -> Page:
    when = session.when or "date unknown"
    speakers = ", ".join(session.speakers) or "unknown speakers"
    title = f"Session {session.number} — {when}"
    lines = [
        f"# {title}",
        "",
        f"Conversation {session.conversation}, session {session.number}, {when}. "
        f"Speakers: {speakers}.",
        "",
        *[turn_line(turn) for turn in session.turns],
    ]
    page = Page(body="\n".join(lines) + "\n", frontmatter={})
    page.set("title", title)
    key = f"locomo/{session.conversation}/session_{session.number}"
    page.set("uuid", str(uuidlib.uuid5(_NAMESPACE, key)))
    iso = parse_when(session.when)
    if iso:
        page.set("created", iso)
        page.set("updated", iso)
    assert page.frontmatter is not None
    page.frontmatter["session"] = session.number
    page.frontmatter["session_date"] = session.when
    page.frontmatter["speakers"] = list(session.speakers)
    page.frontmatter["source"] = f"LoCoMo {session.conversation} session_{session.number}"
    return page


def import_locomo(
    store: Store,
    path: Path,
    *,
    prefix: str = "",
    only: list[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import every conversation of a LoCoMo JSON file into fields named ``prefix + id``."""
    report = ImportReport()
    matched = False
    for sample in load_conversations(path):
        conv = str(sample.get("sample_id") or "conversation")
        if only and conv not in only:
            continue
        matched = True
        name = slugify(f"{prefix}{conv}") or "conversation"
        sessions = list(iter_sessions(sample))
        if not sessions:  # an empty field would say nothing of why
            report.warnings.append(f"{conv}: no sessions (session_1, session_2, …), "
                                   "nothing imported")
            continue
        field_ = store.create_field(
            name,
            intro=f"LoCoMo conversation {conv}: one page per session, one line per turn.",
            exist_ok=True,
        )
        report.fields.append(name)
        manifest = Manifest.load(field_.path)
        entry = manifest.sources.get(MANIFEST_KEY)
        if not isinstance(entry, dict) or not isinstance(entry.get("pages"), dict):
            entry = {"kind": "locomo", "pages": {}}  # none yet, or not readable
        manifest.sources[MANIFEST_KEY] = entry
        written_files: dict[str, Any] = entry["pages"]
        with field_.batch():
            for session in sessions:
                if session.malformed:
                    report.turns_skipped += len(session.malformed)
                    shown = "; ".join(session.malformed[:3])
                    more = len(session.malformed) - 3
                    report.warnings.append(
                        f"{conv} session {session.number}: {len(session.malformed)} malformed "
                        f"turn(s) skipped ({shown}{f'; {more} more' if more > 0 else ''})")
                if not session.turns:
                    report.sessions_skipped += 1
                    report.warnings.append(f"{conv} session {session.number}: no turns, skipped")
                    continue
                page = session_page(session)
                stem = _session_stem(field_, conv, session.number, page, report,
                                     written_files.get(page.uuid or ""))
                if stem is None:
                    report.pages_kept += 1
                    continue
                result = field_.write(page, name=stem)
                written_files[page.uuid or ""] = file_digests(field_.path, result.filenames)
                for written in result.pages:
                    if written.action == "unchanged":
                        report.pages_unchanged += 1
                    else:
                        report.pages_written += 1
                if progress:
                    progress(1)
        manifest.save()
    if only and not matched:
        raise ImportFormatError(f"none of {', '.join(only)} is in {path}")
    return report


def _session_stem(field_: Field, conv: str, number: int, page: Page,
                  report: ImportReport, written: object) -> str | None:
    """The name to write session ``number`` under, or None to leave the field's page alone:
    a page of that name that is not this session (a note of the user's) is never replaced
    (the session takes a free name), and one edited since it was imported keeps the edit.
    ``written``: the sha256 of each file the last import wrote for it, when recorded (a page
    still exactly so is the import's own, updated when the dataset changed; split too)."""
    stem = f"session-{number:02d}"
    # Imported before, under whatever name it took then (its uuid comes from the session).
    earlier = [d.filename for d in field_.index_handle().docs_by_uuid(page.uuid or "")
               if d.uuid == page.uuid]
    if earlier:
        stem = earlier[0][:-3]
    path = field_.path / f"{stem}.md"
    if not path.exists():
        return stem
    existing = Page.parse(path.read_text("utf-8", "replace"))
    if existing.get("source") == page.get("source"):
        if isinstance(written, dict) and written and file_digests(
                field_.path, list(written)) == written:
            return stem
        if " ".join(existing.body.split()) != " ".join(page.body.split()):
            report.warnings.append(
                f"{field_.name}/{stem}.md was edited since it was imported; left as it is "
                f"(archive it with `deepfield rm {field_.name} {stem}` to import it again)")
            return None
        return stem
    free = free_names(field_.path, stem)[0]
    report.warnings.append(f"{field_.name}/{stem}.md is another page, kept; {conv} "
                           f"session {number} is written as {free}")
    return free[:-3]


def count_sessions(path: Path) -> int:
    return sum(
        1 for sample in load_conversations(path) for s in iter_sessions(sample) if s.turns
    )
