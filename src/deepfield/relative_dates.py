"""Relative time expressions resolved against the day a page's session happened.

"I signed up for a pottery class yesterday", filed from a session of 3 July 2023, means
2 July 2023, but a reader (a person skimming, or a model that slips at date arithmetic) sees
only "yesterday" and a header date. :func:`resolve` finds the expressions whose meaning is
fixed by that day — yesterday, tomorrow, last night, N days/weeks/months/years ago, last/next
week, weekend, month, year, last/next <weekday> — and says what each means ("2 July 2023",
"the week before 3 July 2023", "June 2023"). Research shows them beside the line they come
from (research/packing.py); the page itself is never changed, so the resolution is derived
like every index and follows a person's edit of the text or the date.

English only; vague expressions ("recently", "a few days ago", "the other day") and ones that
need more than the day ("on Friday", "this weekend" said on a Saturday) are left alone rather
than guessed.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

_DAY_FORMATS = ("%d %B %Y", "%d %b %Y", "%B %d %Y", "%b %d %Y", "%Y-%m-%d", "%d/%m/%Y")
_ISO = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[T ][\d:.]+)?(?:Z|[+-]\d{2}:?\d{2})?")
_CLOCK = re.compile(r"^\s*\d{1,2}(?::\d{2})?\s*(?:am|pm)\s+on\s+", re.IGNORECASE)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "couple of": 2}
_COUNT = (r"(?P<count>\d{1,2}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight"
          r"|nine|ten)")
_PATTERN = re.compile(
    r"\b(?:(?P<day_before>the day before yesterday)|(?P<yesterday>yesterday|last night)"
    r"|(?P<tomorrow>tomorrow)"
    rf"|(?P<ago>{_COUNT}\s+(?P<unit>day|week|weekend|month|year)s?\s+ago)"
    r"|(?P<step>last|next|this past|this coming)\s+"
    r"(?P<what>week|weekend|month|year|" + "|".join(_WEEKDAYS) + r"))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Resolved:
    """One relative expression of a text and what it means on the anchor day."""
    phrase: str
    meaning: str


def parse_day(value: object) -> dt.date | None:
    """The day a date value names: ISO (``2023-07-03``, ``2023-07-03T13:36:00``), LoCoMo's
    ``1:36 pm on 3 July, 2023``, ``3 July 2023``, ``July 3rd, 2023`` …; None if it names none."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str) or not value.strip():
        return None
    iso = _ISO.fullmatch(value.strip())
    if iso:
        try:
            return dt.date.fromisoformat(iso.group(1))
        except ValueError:
            return None
    flat = _CLOCK.sub("", value)
    flat = re.sub(r"(?<=\d)(st|nd|rd|th)\b", "", flat.replace(",", " ").replace(".", " "))
    flat = " ".join(flat.split())
    for pattern in _DAY_FORMATS:
        try:
            return dt.datetime.strptime(flat, pattern).date()
        except ValueError:
            continue
    return None


def resolve(text: str, anchor: dt.date) -> list[Resolved]:
    """The relative expressions in ``text`` with their meaning on ``anchor``, in order."""
    found: list[Resolved] = []
    for match in _PATTERN.finditer(text):
        meaning = _meaning(match, anchor)
        if meaning:
            found.append(Resolved(match.group(0), meaning))
    return found


def event_day(frontmatter: dict[str, Any] | None) -> str | None:
    """The day a page's events happened, if its frontmatter says (``session_date``, ``date``):
    never ``created``, the day it was written down, which a later edit may not share."""
    for key in ("session_date", "date"):
        value = (frontmatter or {}).get(key)
        if value:
            return str(value)
    return None


def resolved(text: str, anchor: object) -> list[dict[str, str]]:
    """``text``'s relative dates on the day ``anchor`` names, as JSON:
    ``[{"phrase": "yesterday", "date": "2 July 2023"}]`` (none if it names no day)."""
    day = parse_day(anchor)
    if day is None:
        return []
    return [{"phrase": r.phrase, "date": r.meaning} for r in resolve(text, day)]


def shown(found: list[dict[str, str]]) -> str:
    """How resolved dates follow a quote: ``[yesterday = 2 July 2023; …]`` ("" for none)."""
    pairs = dict.fromkeys(f"{d['phrase']} = {d['date']}" for d in found)
    return f"[{'; '.join(pairs)}]" if pairs else ""


def _meaning(match: re.Match[str], anchor: dt.date) -> str | None:
    if match.group("day_before"):
        return _day(anchor - dt.timedelta(days=2))
    if match.group("yesterday"):
        return _day(anchor - dt.timedelta(days=1))
    if match.group("tomorrow"):
        return _day(anchor + dt.timedelta(days=1))
    if match.group("ago"):
        count = match.group("count").lower()
        number = int(count) if count.isdigit() else _NUMBERS[count]
        return _ago(number, count, match.group("unit").lower(), anchor)
    step, what = match.group("step").lower(), match.group("what").lower()
    later = step in ("next", "this coming")
    if what in _WEEKDAYS:
        target = _WEEKDAYS.index(what)
        if later:
            ahead = (target - anchor.weekday()) % 7 or 7
            return _day(anchor + dt.timedelta(days=ahead))
        back = (anchor.weekday() - target) % 7 or 7
        return _day(anchor - dt.timedelta(days=back))
    if what in ("week", "weekend"):
        return f"the {what} {'after' if later else 'before'} {_day(anchor)}"
    if what == "month":
        return _month(_add_months(anchor, 1 if later else -1))
    return str(anchor.year + (1 if later else -1))


def _ago(number: int, said: str, unit: str, anchor: dt.date) -> str | None:
    if number <= 0 or number > 60:
        return None
    if unit == "day":
        return _day(anchor - dt.timedelta(days=number))
    if unit in ("week", "weekend"):
        if number == 1:
            return f"the {unit} before {_day(anchor)}"
        return f"{said} {unit}s before {_day(anchor)}"
    if unit == "month":
        return _month(_add_months(anchor, -number))
    return str(anchor.year - number)


def _add_months(day: dt.date, months: int) -> dt.date:
    month = day.month - 1 + months
    year, month = day.year + month // 12, month % 12 + 1
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _day(day: dt.date) -> str:
    return f"{day.day} {calendar.month_name[day.month]} {day.year}"


def _month(day: dt.date) -> str:
    return f"{calendar.month_name[day.month]} {day.year}"
