"""Read, set and remove one server entry in an agent's config text, JSON or TOML alike.

JSON and JSONC go through :mod:`.jsonc` (in-place splicing, comments kept); TOML through
``tomlkit``, which keeps comments and layout too. Every function takes and returns the file's
text, so the caller can show a diff before anything is written. Syntax errors come back as
:class:`ConfigSyntaxError` with the line and column.
"""

from __future__ import annotations

import re
from typing import Any

from . import jsonc


class ConfigSyntaxError(ValueError):
    """The file is not valid JSON/TOML; ``line`` and ``column`` are 1-based (0: unknown)."""

    def __init__(self, reason: str, line: int, column: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column


class ConfigShapeError(ValueError):
    """Valid syntax, but a value on the way to the entry is not an object (table)."""


def _strict(fmt: str) -> bool:
    return fmt == "json"


def check(text: str, fmt: str) -> Any:
    """The parsed document (None for an empty file); raises :class:`ConfigSyntaxError`."""
    if fmt == "toml":
        return _toml_doc(text).unwrap()
    try:
        return jsonc.loads(text, strict=_strict(fmt))
    except jsonc.JSONCError as exc:
        raise ConfigSyntaxError(exc.reason, exc.line, exc.column) from None


def get(text: str, fmt: str, path: list[str]) -> Any:
    return _lookup(check(text, fmt), path)


def _with(document: Any, path: list[str], value: Any) -> Any:
    """``document`` (parsed) with ``value`` at ``path`` (None: removed, and the objects on the
    way dropped once empty) — what an edit must produce, to check the edited text against."""
    root = dict(document or {})
    chain = [root]
    for key in path[:-1]:
        child = chain[-1].get(key)
        chain[-1][key] = dict(child) if isinstance(child, dict) else {}
        chain.append(chain[-1][key])
    if value is not None:
        chain[-1][path[-1]] = value
        return root
    chain[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):  # whether a file keeps `"mcpServers": {}` or
        if not chain[depth]:                    # drops it is the same setup
            del chain[depth - 1][path[depth - 1]]
    return root


def _lookup(document: Any, path: list[str]) -> Any:
    """The value at ``path`` in a parsed document (None where there is none)."""
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def _checked(before: str, after: str, fmt: str, path: list[str], value: Any) -> str:
    """``after``, once a parser confirms it differs from ``before`` only at ``path``."""
    if fmt == "toml":
        import tomllib

        try:
            got = tomllib.loads(after)
        except tomllib.TOMLDecodeError:
            got = None
        want = _with(tomllib.loads(before), path, value)
    else:
        got = jsonc.loads(after)
        want = _with(jsonc.loads(before), path, value)
    if value is None and got is not None and _lookup(got, path) is None:
        got = _with(got, path, None)  # (an entry left behind, in part, stays a difference)
    if got != want:
        raise ConfigShapeError(
            f"{'.'.join(path[:-1])} is written in a way deepfield cannot edit without changing "
            "other settings; add the entry by hand (deepfield setup AGENT --print shows it)")
    return after


def set_entry(text: str, fmt: str, path: list[str], value: dict[str, Any]) -> str:
    check(text, fmt)
    if fmt == "toml":
        return _checked(text, _same_endings(text, _toml_set(text, path, value)), fmt, path,
                        value)
    try:
        after = jsonc.set_value(text, path, value, strict=_strict(fmt))
    except jsonc.JSONCError as exc:
        raise ConfigShapeError(exc.reason) from None
    return _checked(text, after, fmt, path, value)


def remove_entry(text: str, fmt: str, path: list[str]) -> str:
    check(text, fmt)
    if fmt == "toml":
        after = _same_endings(text, _toml_remove(text, path))
    else:
        after = jsonc.remove_value(text, path, strict=_strict(fmt))
    return _checked(text, after, fmt, path, None)


# ---------------------------------------------------------------------- TOML


def _same_endings(before: str, after: str) -> str:
    """``after`` with Windows line endings where ``before`` has nothing else: tomlkit writes
    the lines it adds with ``\n``, which would leave such a file with both."""
    if "\r\n" not in before or before.count("\n") != before.count("\r\n"):
        return after
    return re.sub(r"(?<!\r)\n", "\r\n", after)


def _toml_doc(text: str) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = str(exc).split(" at line ")[0]
        raise ConfigSyntaxError(reason, exc.line, exc.col) from None


TOML_KINDS = {"AoT": "array of tables ([[...]])", "Bool": "boolean"}
"""tomlkit's class names that would not tell a user what the value is."""


def _toml_container(doc: Any, path: list[str], create: bool) -> Any:
    import tomlkit

    node = doc
    for depth, key in enumerate(path):
        child = node.get(key)
        if child is None:
            if not create:
                return None
            # A table of tables is written [mcp_servers.deepfield], not under an empty
            # [mcp_servers] header.
            child = tomlkit.table(is_super_table=depth == len(path) - 1)
            node[key] = child
        if not isinstance(child, dict):
            kind = TOML_KINDS.get(type(child).__name__, type(child).__name__.lower())
            raise ConfigShapeError(f"{'.'.join(path[: depth + 1])} is a TOML {kind}, not a "
                                   "table")
        node = child
    return node


def _toml_set(text: str, path: list[str], value: dict[str, Any]) -> str:
    import tomlkit

    doc = _toml_doc(text)
    container = _toml_container(doc, path[:-1], create=True)
    inline = isinstance(container, tomlkit.items.InlineTable)
    table = tomlkit.inline_table() if inline else tomlkit.table()
    for key, item in value.items():
        table[key] = item
    existed = path[-1] in container
    old = container.get(path[-1])
    if isinstance(old, tomlkit.items.Table) and not inline and set(old) == set(value):
        # An entry setup updates key for key (the user's kept, see plan.merged_entry): only
        # the values that differ change, so its sub-tables ([...deepfield.env]) keep their
        # layout. (A new key would land after the comments that close the table.)
        for key, item in value.items():
            if old.get(key) != item:
                old[key] = item
        return _checked(text, str(tomlkit.dumps(doc)), "toml", path, value)
    if isinstance(old, tomlkit.items.Table) and not inline:
        # tomlkit keeps the blank lines and comments after a table's last key (those above
        # the next table) in the table's body: carry them over, or replacing it drops them.
        items = [item for _, item in old.value.body]
        start = len(items)
        while start and isinstance(items[start - 1], (tomlkit.items.Whitespace,
                                                      tomlkit.items.Comment)):
            start -= 1
        for item in items[start:]:
            assert isinstance(item, (tomlkit.items.Whitespace, tomlkit.items.Comment))
            table.add(item)
    container[path[-1]] = table
    rendered = str(tomlkit.dumps(doc))
    if not inline:
        header = f"[{tomlkit.key(path).as_string().strip()}]"
        if not existed:
            rendered = _comment_below(rendered, header)
        rendered = _blank_line_after(rendered, header)
    try:
        return _checked(text, rendered, "toml", path, value)
    except ConfigShapeError:
        if existed or inline:
            raise
    # tomlkit places a new table after the last key of its parent: when the parent is made of
    # dotted keys at the top (`mcp_servers.docs.command = ...`), that can swallow later keys.
    # A table header at the end of the file means the same and moves nothing.
    body = tomlkit.table()
    for key, item in value.items():
        body[key] = item
    appended = (text if text.endswith("\n") or not text else text + "\n") + "\n" + \
        f"[{tomlkit.key(path).as_string().strip()}]\n" + str(tomlkit.dumps(body))
    return _checked(text, appended, "toml", path, value)


def _table_lines(lines: list[str], header: str) -> tuple[int, int] | None:
    """The line indexes [start, end) of the one table under ``header``, from the header to
    its last key (not the blank lines or comments that follow); None if not exactly one."""
    starts = [i for i, line in enumerate(lines) if line.strip() == header]
    if len(starts) != 1:
        return None
    end = starts[0] + 1
    while end < len(lines) and lines[end].strip() and not lines[end].lstrip().startswith(
            ("[", "#")):
        end += 1
    return starts[0], end


def _comment_below(text: str, header: str) -> str:
    """``text`` with the comment right above the new table under ``header`` moved below it:
    tomlkit keeps a comment about the next table in the body of the table before it, so a
    table inserted between them would come under that comment."""
    lines = text.splitlines(keepends=True)
    span = _table_lines(lines, header)
    if span is None:
        return text
    start, end = span
    blank = start
    while blank and not lines[blank - 1].strip():
        blank -= 1
    first = blank
    while first and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    if first == blank:
        return text
    return "".join(lines[:first] + lines[start:end] + lines[first:blank] + lines[end:])


def _blank_line_after(text: str, header: str) -> str:
    """``text`` with a blank line between the table under ``header`` and whatever table (or
    comment before one) follows it: tomlkit puts a new table's last key right above the next
    header."""
    lines = text.splitlines(keepends=True)
    span = _table_lines(lines, header)
    if span is None:
        return text
    start, end = span
    if end == len(lines) or not lines[end].strip():
        return text  # the end of the file, or a blank line already
    newline = "\r\n" if lines[start].endswith("\r\n") else "\n"
    return "".join(lines[:end]) + newline + "".join(lines[end:])


def _toml_remove(text: str, path: list[str]) -> str:
    import tomlkit

    doc = _toml_doc(text)
    container = _toml_container(doc, path[:-1], create=False)
    if container is None or path[-1] not in container:
        return text
    # Cut the table's own lines out of the text, so the comments after its last key (about
    # the next table) stay; tomlkit would delete them with it.
    lines = text.splitlines(keepends=True)
    span = _table_lines(lines, f"[{tomlkit.key(path).as_string().strip()}]")
    if span is not None:
        start, end = span
        if end < len(lines) and not lines[end].strip():
            end += 1  # the blank line that set it apart from what follows
        elif end == len(lines) and start and not lines[start - 1].strip():
            start -= 1  # the last table: the blank line above it
        cut = "".join(lines[:start] + lines[end:])
        try:
            return _checked(text, cut, "toml", path, None)
        except ConfigShapeError:
            pass  # not a plain [a.b] table (a sub-table follows, ...): let tomlkit do it
    del container[path[-1]]
    after = str(tomlkit.dumps(doc))
    if after.endswith("\n\n") and not text.endswith("\n\n"):
        # The table was the last: the blank line that set it apart goes with it.
        after = after.rstrip("\r\n") + ("\r\n" if after.endswith("\r\n") else "\n")
        after = "" if not after.strip() else after
    return after
