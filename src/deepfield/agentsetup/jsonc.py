"""Edit one entry of a JSON (or JSONC) file without touching the rest of its text.

Agents keep their MCP servers in JSON files that people edit by hand, and some of those files
allow comments and trailing commas (VS Code's ``mcp.json`` and Zed's ``settings.json`` are
JSONC; Gemini CLI strips comments; Continue reads JSONC). Loading such a file with ``json`` and
dumping it again would drop the comments and reflow the user's formatting, so this module parses
the text into a tree that remembers where every value lies and edits the text in place: setting
or removing one member splices only that member's span. Comments, key order, indentation and
line endings elsewhere stay byte for byte.

Strict files (``strict=True``) refuse comments and trailing commas, as the agent reading them
would. Every error names the line and column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 200
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JSONCError(ValueError):
    """Text that is not JSON (or JSONC): ``line`` and ``column`` are 1-based."""

    def __init__(self, reason: str, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {reason}")
        self.reason = reason
        self.line = line
        self.column = column


@dataclass
class Node:
    """A value and the span ``[start, end)`` of its text."""

    kind: str  # object, array, string, number, literal
    start: int
    end: int
    value: Any = None
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def python(self) -> Any:
        if self.kind == "object":
            return {m.key: m.node.python() for m in self.members}
        if self.kind == "array":
            return [item.python() for item in self.items]
        return self.value

    def member(self, key: str) -> Member | None:
        """The member named ``key`` (the last one, as JSON readers take it)."""
        found = [m for m in self.members if m.key == key]
        return found[-1] if found else None


@dataclass
class Member:
    key: str
    key_start: int
    node: Node


_QUOTE_OR_ESCAPE = re.compile(r'["\\]')


class _Parser:
    def __init__(self, text: str, strict: bool) -> None:
        self.text = text
        self.strict = strict
        self.pos = 0

    def error(self, reason: str, pos: int | None = None) -> JSONCError:
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JSONCError(reason, line, column)

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos) or text.startswith("/*", self.pos):
                if self.strict:
                    raise self.error("comments are not allowed in this JSON file")
                if text[self.pos + 1] == "/":
                    end = text.find("\n", self.pos)
                    self.pos = len(text) if end < 0 else end
                else:
                    end = text.find("*/", self.pos + 2)
                    if end < 0:
                        raise self.error("a /* comment is never closed")
                    self.pos = end + 2
            else:
                return

    def parse(self) -> Node | None:
        self.skip()
        if self.pos >= len(self.text):
            return None
        node = self.value(0)
        self.skip()
        if self.pos < len(self.text):
            raise self.error("unexpected text after the JSON value")
        return node

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep")
        if self.pos >= len(self.text):
            raise self.error("the file ends where a value should be")
        char = self.text[self.pos]
        if char == "{":
            return self.container(depth, "object", "}")
        if char == "[":
            return self.container(depth, "array", "]")
        if char == '"':
            return self.string()
        number = _NUMBER.match(self.text, self.pos)
        if number:
            start, self.pos = self.pos, number.end()
            return Node("number", start, self.pos, json.loads(number.group()))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                start, self.pos = self.pos, self.pos + len(word)
                return Node("literal", start, self.pos, literal)
        raise self.error(f"unexpected character {char!r}")

    def string(self) -> Node:
        start = self.pos
        index = start + 1
        text = self.text
        while True:
            # One search for the next quote or backslash: finding each on its own looked for
            # a backslash to the end of the file at every string, quadratic in a large file
            # (a 5 MB ~/.claude.json took 20 seconds).
            found = _QUOTE_OR_ESCAPE.search(text, index)
            if found is None:
                raise self.error("a string is never closed", start)
            index = found.start()
            if text[index] == "\\":
                index += 2
                continue
            break
        self.pos = index + 1
        try:
            decoded = json.loads(text[start:self.pos])
        except json.JSONDecodeError as exc:
            raise self.error(f"bad string: {exc.msg}", start + exc.pos) from None
        return Node("string", start, self.pos, decoded)

    def container(self, depth: int, kind: str, close: str) -> Node:
        node = Node(kind, self.pos, self.pos)
        self.pos += 1
        self.skip()
        first = True
        while True:
            if self.pos < len(self.text) and self.text[self.pos] == close:
                self.pos += 1
                node.end = self.pos
                return node
            if not first:
                if self.pos >= len(self.text) or self.text[self.pos] != ",":
                    raise self.error(f"expected ',' or '{close}'")
                comma = self.pos
                self.pos += 1
                self.skip()
                if self.pos < len(self.text) and self.text[self.pos] == close:
                    if self.strict:
                        raise self.error("a trailing comma is not allowed in this JSON file",
                                         comma)
                    continue
            first = False
            if kind == "object":
                if self.pos >= len(self.text) or self.text[self.pos] != '"':
                    raise self.error("expected a quoted key")
                key = self.string()
                self.skip()
                if self.pos >= len(self.text) or self.text[self.pos] != ":":
                    raise self.error("expected ':' after the key")
                self.pos += 1
                self.skip()
                node.members.append(Member(key.value, key.start, self.value(depth + 1)))
            else:
                node.items.append(self.value(depth + 1))
            self.skip()


_PARSED: dict[tuple[str, bool], Node | None] = {}
"""The last few trees parsed: one setup reads the same text several times (check it, find
the entry, edit it, verify the edit), and a ~/.claude.json can be megabytes. Trees are never
changed once parsed."""


def parse(text: str, *, strict: bool = False) -> Node | None:
    """The tree of ``text`` (None for an empty file); raises :class:`JSONCError`."""
    key = (text, strict)
    if key not in _PARSED:
        node = _Parser(text, strict).parse()
        if len(_PARSED) >= 4:
            _PARSED.clear()
        _PARSED[key] = node
    return _PARSED[key]


def loads(text: str, *, strict: bool = False) -> Any:
    node = parse(text, strict=strict)
    return None if node is None else node.python()


# ---------------------------------------------------------------------- editing


def _indent_unit(text: str) -> str:
    """The indentation the file uses (two spaces when it shows none)."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped.startswith('"') and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else " " * min(len(lead), 8)
    return "  "


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _leading(text: str, pos: int) -> str:
    """The whitespace that opens the line holding ``pos``."""
    start = _line_start(text, pos)
    line = text[start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _first_on_line(text: str, pos: int) -> bool:
    return not text[_line_start(text, pos):pos].strip()


def _rest_of_line(text: str, pos: int) -> tuple[int, bool, int]:
    """After a value at ``pos``: (position of a comma or -1, whether only a comma, blanks and a
    line comment follow on the line, end of the line)."""
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    rest = text[pos:end]
    stripped = rest.lstrip(" \t\r")
    comma = -1
    if stripped.startswith(","):
        comma = pos + (len(rest) - len(stripped))
        stripped = stripped[1:].lstrip(" \t\r")
    return comma, not stripped or stripped.startswith("//"), end


def render(value: Any, indent: str, unit: str, newline: str) -> str:
    """``value`` as JSON laid out with ``unit`` per level, continuing at ``indent``; lists of
    plain values stay on one line (``"args": ["--store", "memory", "mcp"]``)."""
    if isinstance(value, dict) and value:
        inner = indent + unit
        members = [f"{json.dumps(str(k), ensure_ascii=False)}: {render(v, inner, unit, newline)}"
                   for k, v in value.items()]
        return "{" + newline + inner + ("," + newline + inner).join(members) + newline + \
            indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        inner = indent + unit
        items = [render(v, inner, unit, newline) for v in value]
        return "[" + newline + inner + ("," + newline + inner).join(items) + newline + \
            indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _nest(path: list[str], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def set_value(text: str, path: list[str], value: Any, *, strict: bool = False) -> str:
    """``text`` with the member at ``path`` (object keys from the root) set to ``value``,
    creating the objects on the way; everything else is left as it was."""
    root = parse(text, strict=strict)
    newline = _newline(text)
    unit = _indent_unit(text)
    if root is None:
        return render(_nest(path, value), "", unit, newline) + newline
    node, walked = root, list[str]()
    for depth, key in enumerate(path):
        if node.kind != "object":
            where = ".".join(walked) or "the file"
            raise _not_object(text, node, where)
        member = node.member(key)
        if member is None:
            return _insert(text, node, key, _nest(path[depth + 1:], value), unit, newline)
        walked.append(key)
        if depth == len(path) - 1:
            indent = _leading(text, member.key_start)
            inline = "\n" not in text[member.node.start:member.node.end] and \
                not _first_on_line(text, member.key_start)  # a one-line object stays one line
            rendered = json.dumps(value, ensure_ascii=False) if inline else \
                render(value, indent, unit, newline)
            return text[: member.node.start] + rendered + text[member.node.end:]
        node = member.node
    raise AssertionError("unreachable: an empty path")


def _not_object(text: str, node: Node, where: str) -> JSONCError:
    parser = _Parser(text, False)
    return parser.error(f"{where} is a JSON {node.kind}, not an object", node.start)


def _insert(text: str, obj: Node, key: str, value: Any, unit: str, newline: str) -> str:
    if not obj.members:
        base = _leading(text, obj.start)
        inner = base + unit
        member = f"{json.dumps(key, ensure_ascii=False)}: {render(value, inner, unit, newline)}"
        interior = text[obj.start + 1: obj.end - 1]
        kept = interior.lstrip(" \t")
        if interior.strip() and kept.startswith(("\n", "\r\n")):
            # A comment on lines of its own stays below the new member, with its lines (no
            # line of blanks between them, and --remove finds the text as it was).
            return text[: obj.start + 1] + newline + inner + member + kept + text[obj.end - 1:]
        rest = text[obj.end - 1:] if not interior.strip() else interior.lstrip(" \t") + \
            text[obj.end - 1:]  # a comment inside stays, after the new member
        return text[: obj.start + 1] + newline + inner + member + newline + base + rest
    last = obj.members[-1]
    multiline = "\n" in text[obj.start:last.key_start]
    if multiline:
        indent = _leading(text, last.key_start) if _first_on_line(text, last.key_start) \
            else _leading(text, obj.start) + unit
        member = f"{json.dumps(key, ensure_ascii=False)}: {render(value, indent, unit, newline)}"
        comma, clean, line_end = _rest_of_line(text, last.node.end)
        if clean:  # keep a comment that follows the last member on its line
            if line_end > 0 and text[line_end - 1] == "\r":
                line_end -= 1
            head = text[: last.node.end] + ("," if comma < 0 else "")
            trailing = "," if comma >= 0 else ""  # the file's trailing-comma style, kept
            return head + text[last.node.end:line_end] + newline + indent + member + \
                trailing + text[line_end:]
        return text[: last.node.end] + "," + newline + indent + member + text[last.node.end:]
    compact = json.dumps(value, ensure_ascii=False)
    return text[: last.node.end] + f", {json.dumps(key, ensure_ascii=False)}: {compact}" + \
        text[last.node.end:]


def remove_value(text: str, path: list[str], *, strict: bool = False) -> str:
    """``text`` without the member at ``path`` (every member of that name in its object);
    unchanged when there is none."""
    root = parse(text, strict=strict)
    node: Node | None = root
    for key in path[:-1]:
        if node is None or node.kind != "object":
            return text
        member = node.member(key)
        node = member.node if member else None
    if node is None or node.kind != "object":
        return text
    removed = False
    for index in reversed(range(len(node.members))):
        if node.members[index].key == path[-1]:
            text = _delete(text, node, index)
            node = _reparse_at(text, path[:-1], strict)
            removed = True
            if node is None:
                break
    if removed and node is not None and not node.members and \
            not text[node.start + 1: node.end - 1].strip():
        text = text[: node.start] + "{}" + text[node.end:]  # no blank lines left behind
    return text


def _reparse_at(text: str, path: list[str], strict: bool) -> Node | None:
    node = parse(text, strict=strict)
    for key in path:
        member = node.member(key) if node is not None and node.kind == "object" else None
        node = member.node if member else None
    return node


def _delete(text: str, obj: Node, index: int) -> str:
    member = obj.members[index]
    last = index == len(obj.members) - 1
    comma, clean, line_end = _rest_of_line(text, member.node.end)
    if _first_on_line(text, member.key_start) and clean:
        start = _line_start(text, member.key_start)
        end = min(line_end + 1, len(text))
        text = text[:start] + text[end:]
        if last and comma < 0 and index > 0:  # the member before is now last: drop its comma
            previous = obj.members[index - 1]
            prev_comma, _clean, _end = _rest_of_line(text, previous.node.end)
            if prev_comma >= 0:
                text = text[:prev_comma] + text[prev_comma + 1:]
        return text
    if not last:
        return text[: member.key_start] + text[obj.members[index + 1].key_start:]
    if index > 0:
        return text[: obj.members[index - 1].node.end] + text[member.node.end:]
    return text[: member.key_start] + text[(comma + 1) if comma >= 0 else member.node.end:]


def get_value(text: str, path: list[str], *, strict: bool = False) -> Any:
    """The value at ``path``, or None where there is none."""
    node = _reparse_at(text, path, strict)
    return None if node is None else node.python()
