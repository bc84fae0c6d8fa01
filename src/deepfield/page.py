"""A memoryfield page in memory: YAML frontmatter + Markdown body, parsed and rendered without I/O.

The spec's rules live here: quoted ISO 8601 datetimes, and (re-exported from page_names.py)
filename syntax and debris names. Rendering
keeps what a person wrote: keys stay in their order and keys deepfield did not change are written
back byte for byte (comments and quoting included), so rewrites make small git diffs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import InvalidPageError
from .markdown import parse_sections
from .page_names import INTRO_FILE as INTRO_FILE
from .page_names import LISTING_FILE as LISTING_FILE
from .page_names import MAX_NAME_LENGTH as MAX_NAME_LENGTH
from .page_names import SPECIAL_FILES as SPECIAL_FILES
from .page_names import can_be_a_file_name as can_be_a_file_name
from .page_names import check_name as check_name
from .page_names import is_conflict_copy as is_conflict_copy
from .page_names import is_debris as is_debris
from .page_names import is_valid_name as is_valid_name
from .page_names import require_field_name as require_field_name
from .page_names import slugify as slugify
from .page_text import check_utf8

PAGE_LIMIT_BYTES = 8192
"""The spec's soft cap: pages above it are split by producers, and indexes may truncate."""

CANONICAL_KEYS: tuple[str, ...] = ("title", "uuid", "summary", "created", "updated")
_OPEN_FENCE = re.compile(r"^---[ \t]*\r?$")
_CLOSE_FENCE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$")
# libyaml's loader when PyYAML has it: same safe subset, ~10x faster on every page parse.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _YAML_LOADER(_BASE_LOADER):  # type: ignore[misc]  # noqa: N801
    """The safe loader, except that a date YAML cannot build (``2020-13-45``) stays text:
    one bad value in a hand-edited page must not make the whole store unreadable."""


def _timestamp_or_text(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
    except ValueError:
        return loader.construct_scalar(node)


_YAML_LOADER.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)

MAX_FRONTMATTER_NODES = 10_000
"""Values a frontmatter may hold, counting every use of a YAML alias: aliases of aliases
(``b: [*a, *a]``, ``c: [*b, *b]``, …) would otherwise expand exponentially when the
frontmatter is turned into JSON for the index, and an alias inside itself never ends."""
MAX_FRONTMATTER_DEPTH = 64


def _check_size(value: Any) -> str | None:
    """Why ``value`` (loaded frontmatter) is too deep or too large to use, or None."""
    budget = MAX_FRONTMATTER_NODES
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            return f"frontmatter holds more than {MAX_FRONTMATTER_NODES:,} values (YAML aliases?)"
        if depth > MAX_FRONTMATTER_DEPTH:
            return "frontmatter nests too deep (a YAML alias inside itself?)"
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple | set):
            stack.extend((v, depth + 1) for v in item)
    return None
_SAFE_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _PlainDumper(_SAFE_DUMPER):  # type: ignore[misc]
    """PyYAML's safe dumper writing only plain YAML, which other Markdown tools read: a set
    is a sorted list (it wrote ``!!set``) and bytes are refused (``!!binary``)."""


def _represent_set(dumper: Any, value: set[Any] | frozenset[Any]) -> Any:
    try:
        items = sorted(value)
    except TypeError:  # {1, "a"}: no order between them, but one all the same
        items = sorted(value, key=repr)
    return dumper.represent_list(items)


def _refuse_bytes(_: Any, value: bytes) -> Any:
    raise yaml.representer.RepresenterError("bytes are no plain YAML", value)


_PlainDumper.add_representer(set, _represent_set)
_PlainDumper.add_representer(frozenset, _represent_set)
_PlainDumper.add_representer(bytes, _refuse_bytes)
_YAML_DUMPER: Any = _PlainDumper
_TOP_KEY = re.compile(r"""^(?:"[^"]*"|'[^']*'|[^\s#\-?:][^:]*?|-[^\s:][^:]*?)\s*:(?:[ \t]|\r?$)""")


# --------------------------------------------------------------------------- time and ids


def metadata_warnings(page: Page) -> list[str]:
    """What a page's own keys say that the spec's SHOULDs do not allow: a ``uuid`` that is no
    UUID, a ``title``/``summary`` that is no text, a ``created``/``updated`` that is no
    ISO 8601 datetime (the page is stored all the same; ``forget`` and activation then know
    no age for it)."""
    found = []
    value = page.get("uuid")
    if value is not None:
        try:
            uuidlib.UUID(str(value))
        except ValueError:
            found.append(f"uuid {str(value)!r} is not a UUID")
    for key in ("title", "summary"):
        # A YAML list or mapping (`title: [a, b]`) is kept, but reads as its Python text.
        value = page.get(key)
        if isinstance(value, list | dict):
            kind = "list" if isinstance(value, list) else "mapping"
            found.append(f"{key} is a YAML {kind}, not text, so it reads as "
                         f"{page.get_str(key)!r}; write it as one line of text")
    for key in ("created", "updated"):
        value = page.get(key)
        if value is None or isinstance(value, dt.datetime | dt.date):
            continue
        try:
            dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            found.append(f"{key} {str(value)!r} is not an ISO 8601 datetime such as "
                         "2026-03-01T09:00:00Z")
    return found


def now_iso() -> str:
    """The current UTC time as the spec's ISO 8601 string, to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def iso_from_timestamp(seconds: float) -> str:
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


def new_uuid() -> str:
    return str(uuidlib.uuid4())


# --------------------------------------------------------------------------- frontmatter


_NON_FINITE = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _jsonable(value: Any) -> Any:
    """YAML 1.1 turns unquoted dates into datetime objects; JSON and comparisons want strings.
    NaN and infinities (YAML ``.nan``/``.inf``) become the text ``nan``/``inf``/``-inf``:
    JSON has no token for them, and SQLite's JSON functions refuse the whole document."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def jsonable_frontmatter(frontmatter: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Frontmatter as plain JSON values (dates as ISO text, no NaN): what every ``to_json``
    returns, so ``json.dumps(..., allow_nan=False)`` always works on it."""
    return None if frontmatter is None else _jsonable(frontmatter)


def load_frontmatter_json(text: str) -> Any:
    """The index's frontmatter column back as Python values. Indexes written before
    non-finite numbers were turned into text hold the bare token ``NaN``: read as text too."""
    return json.loads(text, parse_constant=lambda token: _NON_FINITE.get(token, token))


def frontmatter_json(frontmatter: Mapping[str, Any] | None) -> str:
    """The frontmatter as compact JSON (the spec's ``pages.frontmatter`` column)."""
    if frontmatter is None:
        return "null"
    return json.dumps(_jsonable(frontmatter), ensure_ascii=False, sort_keys=False,
                      allow_nan=False)


def dump_entry(key: str, value: Any) -> str:
    """One top-level YAML entry; strings that look like dates come out quoted (spec rule).
    InvalidPageError for a value YAML cannot write (an object of a class of its own, text
    that is not UTF-8): every page written is rendered here first."""
    try:
        return yaml.dump(
            {key: value}, Dumper=_YAML_DUMPER, allow_unicode=True, sort_keys=False,
            default_flow_style=False, width=10**6,
        )
    except UnicodeEncodeError:
        check_utf8(str(key), "a frontmatter key")
        check_utf8(json.dumps(_jsonable(value), ensure_ascii=False, default=str),
                   f"the frontmatter value of {key!r}")
        raise  # pragma: no cover - one of the two checks raises
    except yaml.YAMLError as exc:  # RepresenterError: no YAML for that type
        kind = type(exc.args[1]).__name__ if len(exc.args) > 1 else "value"
        raise InvalidPageError(
            f"the frontmatter value of {key!r} is (or holds) "
            f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}, which plain YAML "
            "cannot hold", ("decode it to text; " if kind in ("bytes", "bytearray") else "")
            + "use text, numbers, true/false, dates, lists (a set or tuple is written as a "
            "list) and mappings of them") from None


def _segments(raw: str) -> dict[str, tuple[str, str]] | None:
    """Split a YAML mapping's text into (leading comments, entry text) per top-level key.

    Comment and blank lines at column 0 belong to the key that follows them, so they survive
    even when that key's value is rewritten. Returns None when the split does not reproduce
    the full parse, so callers fall back to re-dumping.
    """
    blocks: list[tuple[str, list[str], list[str]]] = []  # (kind, leading lines, entry lines)
    pending: list[str] = []
    for line in raw.splitlines(keepends=True):
        if _TOP_KEY.match(line):
            blocks.append(("key", pending, [line]))
            pending = []
        elif not line.strip() or line.startswith("#"):
            pending.append(line)
        elif blocks:
            blocks[-1][2].extend(pending)
            blocks[-1][2].append(line)
            pending = []
        else:
            return None
    if pending:
        blocks.append(("trailer", pending, []))  # trailing comments keep their place at the end
    result: dict[str, tuple[str, str]] = {}
    for kind, leading, lines in blocks:
        lead = "".join(leading)
        if kind == "trailer":
            result["\0trailer"] = (lead if lead.endswith("\n") else lead + "\n", "")
            continue
        text = "".join(lines)
        if not text.endswith("\n"):
            text += "\n"
        try:
            parsed = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.YAMLError:
            return None
        if not isinstance(parsed, dict) or len(parsed) != 1:
            return None
        (key,) = parsed.keys()
        if not isinstance(key, str) or key in result:
            return None
        result[key] = (lead, text)
    return result


@dataclass
class Page:
    """A page's frontmatter (None when the file has none) and Markdown body."""

    body: str
    frontmatter: dict[str, Any] | None = None
    frontmatter_error: str | None = None
    """Why the frontmatter block could not be read; the whole file is then treated as body."""
    body_line: int = 1
    """1-based line number in the file where ``body`` starts."""
    _original: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    _raw_blocks: dict[str, tuple[str, str]] | None = field(
        default=None, repr=False, compare=False
    )

    # ------------------------------------------------------------------ parsing

    @classmethod
    def parse(cls, text: str) -> Page:
        """Parse page text. Malformed frontmatter never raises: see ``frontmatter_error``."""
        if text.startswith("\ufeff"):
            text = text[1:]
        lines = text.splitlines(keepends=True)
        if not lines or not _OPEN_FENCE.match(lines[0].rstrip("\n")):
            return cls(body=text)
        for end in range(1, len(lines)):
            if _CLOSE_FENCE.match(lines[end].rstrip("\n")):
                break
        else:
            unclosed = "frontmatter block opened by '---' never closes"
            return cls(body=text, frontmatter_error=unclosed)
        raw = "".join(lines[1:end])
        body = "".join(lines[end + 1 :])
        try:
            loaded = yaml.load(raw, Loader=_YAML_LOADER) if raw.strip() else {}
        except yaml.YAMLError as exc:
            reason = " ".join(str(exc).split())
            return cls(body=text, frontmatter_error=f"malformed YAML frontmatter: {reason}")
        if not isinstance(loaded, dict):
            kind = type(loaded).__name__
            return cls(body=text, frontmatter_error=f"frontmatter is a YAML {kind}, not a mapping")
        oversized = _check_size(loaded)
        if oversized:
            return cls(body=text, frontmatter_error=oversized)
        frontmatter = {str(k): v for k, v in loaded.items()}
        page = cls(body=body, frontmatter=frontmatter, body_line=end + 2)
        page._original = dict(frontmatter)
        page._raw_blocks = _segments(raw)
        return page

    def frontmatter_lines(self, key: str) -> tuple[int, int] | None:
        """The first and last file line (1-based) of top-level frontmatter entry ``key`` as
        the file was parsed (a search hit on the memo points at its ``summary:`` line);
        None when the page has no such entry or its block could not be split by key."""
        if not self._raw_blocks or key not in self._raw_blocks:
            return None
        line = 2  # the line after the opening '---'
        for name, (lead, entry) in self._raw_blocks.items():
            line += lead.count("\n")
            if name == key:
                return line, line + max(1, entry.count("\n")) - 1
            line += entry.count("\n")
        return None

    # ------------------------------------------------------------------ accessors

    def get(self, key: str) -> Any:
        return None if self.frontmatter is None else self.frontmatter.get(key)

    def get_str(self, key: str) -> str | None:
        value = self.get(key)
        if value is None:
            return None
        text = str(_jsonable(value)).strip()
        return text or None

    @property
    def title(self) -> str | None:
        return self.get_str("title")

    @property
    def uuid(self) -> str | None:
        return self.get_str("uuid")

    @property
    def summary(self) -> str | None:
        return self.get_str("summary")

    def set(self, key: str, value: Any) -> None:
        """Set a key, placing a new canonical key next to its canonical neighbours."""
        if self.frontmatter is None:
            self.frontmatter = {}
        if key in self.frontmatter or key not in CANONICAL_KEYS:
            self.frontmatter[key] = value
            return
        rank = CANONICAL_KEYS.index(key)
        items = list(self.frontmatter.items())
        position = 0
        for i, (existing, _) in enumerate(items):
            if existing in CANONICAL_KEYS and CANONICAL_KEYS.index(existing) < rank:
                position = i + 1
        items.insert(position, (key, value))
        self.frontmatter = dict(items)

    def remove(self, key: str) -> None:
        if self.frontmatter is not None:
            self.frontmatter.pop(key, None)

    def entry_text(self, key: str) -> str | None:
        """Top-level entry ``key`` as the parsed text wrote it (``created: 2024-01-05\n``),
        while its value is unchanged; else None."""
        blocks, original = self._raw_blocks or {}, self._original or {}
        if key not in blocks or key not in original or not _same(original[key], self.get(key)):
            return None
        return blocks[key][1]

    def restore_entry(self, key: str, text: str) -> bool:
        """Give ``key`` back the value and the exact text of entry ``text`` (one ``key: value``
        entry, as ``entry_text`` returned it); False, changing nothing, if it is not one."""
        try:
            loaded = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.YAMLError:
            return False
        if not isinstance(loaded, dict) or list(loaded) != [key] or self.frontmatter is None:
            return False
        self.frontmatter[key] = loaded[key]
        self._original = {**(self._original or {}), key: loaded[key]}
        lead = (self._raw_blocks or {}).get(key, ("", ""))[0]
        self._raw_blocks = {**(self._raw_blocks or {}), key: (lead, text)}
        return True

    # ------------------------------------------------------------------ rendering

    def render_frontmatter(self) -> str:
        if self.frontmatter is None:
            return ""
        parts = ["---\n"]
        blocks = self._raw_blocks or {}
        original = self._original or {}
        for key, value in self.frontmatter.items():
            lead, raw = blocks.get(key, ("", ""))
            unchanged = key in original and _same(original[key], value)
            parts.append(lead + (raw if unchanged and raw else dump_entry(key, value)))
        if "\0trailer" in blocks:
            parts.append(blocks["\0trailer"][0])
        parts.append("---\n")
        return "".join(parts)

    def render(self) -> str:
        """The page file's text: frontmatter block (if any) then the body."""
        return self.render_frontmatter() + self.body

    def copy(self) -> Page:
        clone = Page.parse(self.render()) if self.frontmatter_error is None else Page(self.body)
        return clone


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def first_heading(body: str) -> str | None:
    """Text of the first heading outside code fences (an H1 is preferred over deeper levels)."""
    headings = [(s.level, s.title) for s in parse_sections(body) if s.level and s.title]
    for level, title in headings:
        if level == 1:
            return title
    return headings[0][1] if headings else None


def derive_title(page: Page, fallback: str | None = None) -> str:
    """A page's title: frontmatter ``title``, else its first heading, else its first line."""
    if page.title:
        return page.title
    heading = first_heading(page.body)
    if heading:
        return heading
    if fallback:
        return fallback
    for line in page.body.splitlines():
        text = line.strip().lstrip("#>*-+ ").strip()
        if text:
            return text if len(text) <= 80 else text[:77].rsplit(" ", 1)[0] + "…"
    return "Untitled"
