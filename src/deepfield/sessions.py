"""Read one conversation session for the memorizer, whatever shape it comes in.

Accepted: OpenAI-style messages (a JSON list, ``{"messages": [...]}`` with optional ``date``,
``title``, ``project``, ``topic`` keys, or JSONL with one message per line), a LoCoMo session
(a list of ``{speaker, dia_id, text}`` turns, or a LoCoMo conversation plus a session number),
and Markdown or plain-text transcripts (``Speaker: text`` lines; anything else is kept as is).
Every format becomes a :class:`Session` of turns; the raw text of a transcript is kept
verbatim, because the page body must be the session itself, not a rendering of it.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SessionFormatError
from .importers.locomo import iter_sessions, parse_when, turn_line
from .markdown import is_fence
from .page import Page
from .page_text import check_text
from .relative_dates import parse_day
from .salience import dates

FORMATS = ("auto", "openai", "jsonl", "locomo", "markdown", "text")
MAX_SESSION_BYTES = 16 << 20
# A label starts with any letter ("小明: …", "Émile: …"), may follow a chat export's time
# stamp ("[10:02] Ana: …", "(10:02) Ana: …") and ends in a colon, full-width in CJK text
# ("小明：…"); "https://…" is no speaker.
_SPEAKER_LINE = re.compile(r"^\s*(?:[-*]\s*)?(?:[\[(][\d:.apmAPM ]{3,12}[\])]\s*)?(?:\*\*)?"
                           r"([^\W\d_][\w .'-]{0,40}?)(?:\*\*)?\s*"
                           r"(?:\(([^)]{1,20})\))?\s*[:：](?!//)\s*(?:\*\*)?\s*(\S.*)$")


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str
    turn_id: str | None = None

    def line(self) -> str:
        label = f"{self.speaker} ({self.turn_id})" if self.turn_id else self.speaker
        return f"{label}: {self.text}"


@dataclass
class Session:
    turns: list[Turn]
    format: str
    when: str | None = None
    """The session's date/time as given (any text); ``date`` is its ISO form when known."""
    date: str | None = None
    title: str | None = None
    project: str | None = None
    topic: str | None = None
    source: str | None = None
    raw: str | None = None
    """A transcript's own text, used verbatim as the page body."""
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """What was read but not understood (a transcript's malformed frontmatter)."""

    @property
    def participants(self) -> list[str]:
        seen: list[str] = []
        for turn in spoken_turns(self):
            if turn.speaker and turn.speaker not in seen:
                seen.append(turn.speaker)
        return seen

    def transcript(self) -> str:
        """The session as the page body shows it: raw text, or one line per turn."""
        if self.raw is not None:
            return self.raw.strip() + "\n"
        return "\n".join(turn.line() for turn in self.turns) + "\n"


INSTRUCTION_ROLES = frozenset({"system", "developer"})
"""Speakers whose turns instruct a model rather than say anything: a system prompt is not
part of what was said, so no memo, topic or participant list takes from it."""
TOOL_ROLES = frozenset({"tool", "function"})
"""Turns that are a program's output (a tool call's result): kept on the page, since the
body is the raw session, but nobody said them, so they are no participant and no memo's."""


def spoken_turns(session: Session) -> list[Turn]:
    """The turns of people and assistants, without system and developer prompts or tool
    results."""
    return [t for t in session.turns
            if t.speaker.strip().lower() not in INSTRUCTION_ROLES | TOOL_ROLES]


def load_session(path: str | Path, *, format: str = "auto", session: int | None = None) -> Session:
    """Read a session file (``-`` is not handled here; pass the text to parse_session)."""
    file = Path(path)
    if not file.is_file():
        raise SessionFormatError(f"no session file {file}", "check the path")
    data = file.read_bytes()
    if not data.strip():
        raise SessionFormatError(f"session file {file} is empty")
    text = check_text(data, f"session file {file}", MAX_SESSION_BYTES)
    if format == "auto":
        format = {".jsonl": "jsonl", ".md": "markdown", ".markdown": "markdown",
                  ".txt": "text"}.get(file.suffix.lower(), "auto")
    return parse_session(text, format=format, source=file.name, session=session)


def parse_session(
    text: str, *, format: str = "auto", source: str | None = None, session: int | None = None,
    label: str | None = None,
) -> Session:
    """Parse a session's text; ``source`` names it (a file name, kept on the page) and
    ``label`` is what errors call it ("the request body"), by default the source."""
    if format not in FORMATS:
        raise SessionFormatError(f"unknown session format {format!r}",
                                 f"use one of: {', '.join(FORMATS)}")
    where = label or source or "the session"
    if not text.strip():
        raise SessionFormatError(f"{where} is empty")
    if "\x00" in text:  # a page holding it would be unreadable (binary) once written
        raise SessionFormatError(f"{where} looks binary (contains NUL characters)",
                                 "send the session as UTF-8 text or JSON")
    if format == "auto":
        stripped = text.lstrip()
        # A .json file is JSON whatever it starts with ("null" is no transcript).
        is_json = stripped[:1] in "[{" or (source or "").lower().endswith(".json")
        format = "json" if is_json else "markdown"
        if format == "json":
            try:
                _loads(text, where)
            except json.JSONDecodeError:
                format = "jsonl" if stripped.startswith("{") else "markdown"
        else:
            _refuse_json_scalar(text, where)
    if format in ("json", "openai", "locomo"):
        try:
            data = _loads(text, where)
        except json.JSONDecodeError as exc:
            raise SessionFormatError(f"{where} is not valid JSON: {exc}") from None
        result = _from_json(data, where, session, format)
    elif format == "jsonl":
        result = _from_jsonl(text, where)
    else:
        result = _from_transcript(text, where)
    result.source = source
    if session is not None and result.format != "locomo":
        raise SessionFormatError(f"a session number picks one session of a LoCoMo "
                                 f"conversation; {where} holds {result.format} messages",
                                 "leave out --session")
    if not any(turn.text.strip() for turn in result.turns):
        raise SessionFormatError(f"{where} has no messages with text")
    return result


def _refuse_json_scalar(text: str, where: str) -> None:
    """A text that is one JSON value but no object or list (``null``, ``42``, ``"hi"``) is
    what a program printed by mistake, not a conversation: refused, not filed as a page."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return
    kind = "null" if value is None else type(value).__name__
    raise SessionFormatError(f"{where} is a JSON {kind} ({text.strip()[:40]}), not a "
                             "conversation",
                             "send OpenAI-style messages, a LoCoMo session or a transcript of "
                             "`Speaker: text` lines")


def _loads(text: str, where: str) -> Any:
    """``json.loads``, with JSON nested deeper than Python's recursion limit (``[[[…]]]``
    a hundred thousand deep) refused as a format error instead of a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise SessionFormatError(f"{where} nests JSON too deeply to read",
                                 "no conversation nests more than a few levels; send the "
                                 "messages as a flat list") from None


def _from_json(data: Any, where: str, number: int | None, format: str) -> Session:
    meta: dict[str, Any] = {}
    if isinstance(data, list) and data and all(
            isinstance(item, dict) and isinstance(item.get("conversation"), dict)
            for item in data):  # LoCoMo's own file: a list of samples
        if len(data) > 1:
            raise SessionFormatError(
                f"{where} holds {len(data)} LoCoMo conversations",
                "import them all with `deepfield import locomo FILE`, or save one "
                "conversation's object in a file of its own")
        data = data[0]
    if isinstance(data, dict) and isinstance(data.get("conversation"), dict):
        data = data["conversation"]  # a whole LoCoMo sample
    if isinstance(data, dict) and any(re.fullmatch(r"session_\d+", k) for k in data):
        return _locomo_conversation(data, where, number)
    if isinstance(data, dict) and "content" in data and "messages" not in data:
        data = [data]  # one message (a one-line JSONL file read as JSON)
    if isinstance(data, dict):
        meta = data
        data = data.get("messages", data.get("turns"))
    if not isinstance(data, list) or not data:
        raise SessionFormatError(f"{where} has no list of messages")
    if all(isinstance(item, dict) and "speaker" in item for item in data):
        turns = [Turn(str(t["speaker"]), _clean(t.get("text")) + _caption(t),
                      str(t["dia_id"]) if t.get("dia_id") else None) for t in data]
        result = Session(turns, "locomo")
    elif all(isinstance(item, dict) and ("role" in item or "content" in item) for item in data):
        result = Session([_message_turn(item) for item in data], "openai")
    else:
        raise SessionFormatError(
            f"{where}: expected OpenAI-style messages ({{role, content}}) or LoCoMo turns "
            "({speaker, dia_id, text})"
        )
    result.when = _text(meta.get("date") or meta.get("when") or meta.get("session_date"))
    result.date = _iso(result.when)
    result.title = _text(meta.get("title"))
    result.project = _text(meta.get("project"))
    result.topic = _text(meta.get("topic"))
    return result


def _locomo_conversation(data: dict[str, Any], where: str, number: int | None) -> Session:
    sessions = {s.number: s for s in iter_sessions({"conversation": data, "sample_id": "x"})}
    if number is None:
        if len(sessions) != 1:
            raise SessionFormatError(
                f"{where} is a LoCoMo conversation with {len(sessions)} sessions",
                f"choose one with --session N (1..{max(sessions, default=0)}), or import the "
                "whole conversation with `deepfield import locomo`",
            )
        number = next(iter(sessions))
    found = sessions.get(number)
    if found is None or not found.turns:
        raise SessionFormatError(f"{where} has no session {number} with turns")
    turns = []
    for raw in found.turns:
        line = turn_line(raw)
        speaker, _, rest = line.partition(" (")
        turn_id, _, text = rest.partition("): ")
        turns.append(Turn(speaker, text, turn_id))
    when = found.when or None
    return Session(turns, "locomo", when=when, date=parse_when(when or ""),
                   extra={"session": number})


def _from_jsonl(text: str, where: str) -> Session:
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = _loads(line, f"{where} line {number}")
        except json.JSONDecodeError as exc:
            raise SessionFormatError(f"{where} line {number} is not JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise SessionFormatError(f"{where} line {number} is not a message object")
        items.append(item)
    return _from_json(items, where, None, "jsonl")


def _from_transcript(text: str, where: str) -> Session:
    page = Page.parse(text)
    meta = page.frontmatter or {}
    warnings = [f"{where}: {page.frontmatter_error}; the block is read as text"] \
        if page.frontmatter_error else []
    turns: list[Turn] = []
    for line in page.body.splitlines():
        match = _SPEAKER_LINE.match(line)
        if match and not line.lstrip().startswith("#"):
            turns.append(Turn(match.group(1).strip(), match.group(3).strip(), match.group(2)))
        elif line.strip() and turns:
            turns[-1] = Turn(turns[-1].speaker, f"{turns[-1].text}\n{line}", turns[-1].turn_id)
        elif line.strip() and not line.lstrip().startswith("#"):
            turns.append(Turn("", line.strip()))
    when = _text(meta.get("date") or meta.get("when")) or _heading_date(page.body)
    # A note's heading is its title; a transcript's ("# Stand-up 4 May") says less than the
    # memorizer's "Ana and Bo: LiFePO4, firmware — 4 May 2026", so it keeps that one.
    spoken = any(turn.speaker for turn in turns)
    title = _text(meta.get("title")) or (None if spoken else _first_heading(page.body))
    return Session(turns, "markdown", when=when, date=_iso(when), title=title,
                   project=_text(meta.get("project")), topic=_text(meta.get("topic")),
                   raw=page.body, warnings=warnings)


def _message_turn(item: dict[str, Any]) -> Turn:
    role = item.get("role")
    # A tool result's "name" is the function's, not a speaker's
    speaker = role if role in TOOL_ROLES else item.get("name") or role or "unknown"
    content = item.get("content")
    if not isinstance(speaker, str):
        raise SessionFormatError(f"a message's role or name is {type(speaker).__name__}, "
                                 "not text", 'write messages as {"role": "user", "content": …}')
    if isinstance(content, list):  # [{type: text, text: ...}, {type: image_url, ...}]
        parts = [p.get("text", "") if isinstance(p, dict) else p for p in content]
        if not all(isinstance(p, str) for p in parts):
            raise SessionFormatError("a message's content parts must hold text")
        content = "\n".join(p for p in parts if p)
    elif content is not None and not isinstance(content, str):
        raise SessionFormatError(f"a message's content is {type(content).__name__}, not text",
                                 "content is a string or a list of {type, text} parts")
    calls = _tool_calls(item)
    text = "\n".join(x for x in (_clean(content, keep_lines=True), calls) if x)
    return Turn(speaker, text)


def _tool_calls(item: dict[str, Any]) -> str:
    """An assistant's tool calls as ``[call add_event {"date": "2025-02-10"}]`` (the page body
    is the session: a call with ``content: null`` left an empty ``assistant:`` line)."""
    calls = item.get("tool_calls")
    if not isinstance(calls, list):
        calls = [{"function": item["function_call"]}] \
            if isinstance(item.get("function_call"), dict) else []
    shown = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        name = _text(function.get("name")) or "tool"
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(json.JSONDecodeError, RecursionError):  # else as sent
                arguments = json.loads(arguments)
        if arguments in (None, "", {}):
            shown.append(f"[call {name}]")
        else:
            args = arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                          ensure_ascii=False)
            shown.append(f"[call {name} {' '.join(args.split())}]")
    return " ".join(shown)


def _clean(value: Any, keep_lines: bool = False) -> str:
    text = "" if value is None else str(value)
    if keep_lines:
        return "\n".join(line.rstrip() for line in text.strip().splitlines())
    return " ".join(text.split())


def _caption(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f" [image: {' '.join(str(caption).split())}]" if caption else ""


def _text(value: Any) -> str | None:
    return " ".join(str(value).split()) or None if value not in (None, "") else None


def _iso(when: str | None) -> str | None:
    if not when:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ][\d:.]+)?(Z|[+-]\d{2}:?\d{2})?", when):
        return when.replace(" ", "T")
    return parse_when(when) or _day(when)


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")


def _first_heading(body: str) -> str | None:
    """A note's title: its first top-level heading ("# Notes from the garage visit");
    headings inside fenced code are code."""
    fence = False
    for line in body.splitlines():
        if is_fence(line):
            fence = not fence
            continue
        heading = _HEADING.match(line)
        if not fence and heading and line.lstrip().startswith("# "):
            return _text(heading.group(1).strip("#").strip())
    return None


def _heading_date(body: str) -> str | None:
    """The date a transcript's first heading gives ("# Stand-up 4 May 2026"), if any: a
    transcript without frontmatter often says when it happened only there."""
    for line in body.splitlines():
        if not line.strip():
            continue
        heading = _HEADING.match(line)
        if heading is None:
            return None  # the transcript has begun: a date later on is something said
        for found in dates(heading.group(1)):
            if _day(found):
                return found
    return None


def _day(text: str) -> str | None:
    """``4 May 2026``, ``May 4th, 2026``, ``2026-05-04`` … as an ISO date, else None."""
    day = parse_day(text)
    return day.isoformat() if day else None
