"""Read, set and remove one server entry in an agent's config text, JSON or TOML alike.

JSON and JSONC go through :mod:`.jsonc` (in-place splicing, comments kept); TOML through
``tomlkit``, which keeps comments and layout too. Every function takes and returns the file's
text, so the caller can show a diff before anything is written. Syntax errors come back as
:class:`ConfigSyntaxError` with the line and column.
"""

from __future__ import annotations

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
    document = check(text, fmt)
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


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
    if value is None and got is not None:
        got = _with(got, path, None)
    if got != want:
        raise ConfigShapeError(
            f"{'.'.join(path[:-1])} is written in a way deepfield cannot edit without changing "
            "other settings; add the entry by hand (deepfield setup AGENT --print shows it)")
    return after


def set_entry(text: str, fmt: str, path: list[str], value: dict[str, Any]) -> str:
    check(text, fmt)
    if fmt == "toml":
        return _toml_set(text, path, value)
    try:
        after = jsonc.set_value(text, path, value, strict=_strict(fmt))
    except jsonc.JSONCError as exc:
        raise ConfigShapeError(exc.reason) from None
    return _checked(text, after, fmt, path, value)


def remove_entry(text: str, fmt: str, path: list[str]) -> str:
    check(text, fmt)
    if fmt == "toml":
        after = _toml_remove(text, path)
    else:
        after = jsonc.remove_value(text, path, strict=_strict(fmt))
    return _checked(text, after, fmt, path, None)


# ---------------------------------------------------------------------- TOML


def _toml_doc(text: str) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = str(exc).split(" at line ")[0]
        raise ConfigSyntaxError(reason, exc.line, exc.col) from None


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
            raise ConfigShapeError(f"{'.'.join(path[: depth + 1])} is a TOML "
                               f"{type(child).__name__}, not a table")
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
    container[path[-1]] = table
    try:
        return _checked(text, str(tomlkit.dumps(doc)), "toml", path, value)
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


def _toml_remove(text: str, path: list[str]) -> str:
    import tomlkit

    doc = _toml_doc(text)
    container = _toml_container(doc, path[:-1], create=False)
    if container is None or path[-1] not in container:
        return text
    del container[path[-1]]
    return str(tomlkit.dumps(doc))
